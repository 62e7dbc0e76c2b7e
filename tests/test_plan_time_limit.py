"""``plan`` under a time limit: a binding memory limit leaves a duality gap; with almost no
work allowed the plan is the best fitting one found, and its totals and table state the proven
lower bound and the gap. The exact plan (default limit, ample for this size) is the reference:
its step lies between the bound and the bounded plan's step.
"""
from __future__ import annotations

import io
import math

import pytest

NET = dict(layers=2, batch=8, seq=256, hidden=256, heads=4, ffn=512, vocab=512)


@pytest.fixture(scope="module")
def plans(captured):
    from smsg_ms.planner import plan_graph

    graph = captured("llama", **NET)
    limit = 0.9 * plan_graph(graph, 8, memory_gib=math.inf).totals["memory_bytes"] / 2**30
    return (plan_graph(graph, 8, memory_gib=limit, time_limit=1e-9),
            plan_graph(graph, 8, memory_gib=limit), limit)


def test_bounded_plan_states_its_gap(plans):
    bounded, exact, limit = plans
    assert "optimality_gap" not in exact.totals
    assert bounded.totals["memory_bytes"] <= limit * 2**30
    low, step = bounded.totals["lower_bound_seconds"], bounded.totals["step_seconds"]
    assert low <= exact.totals["step_seconds"] * (1 + 1e-12) <= step * (1 + 1e-12)
    assert bounded.totals["optimality_gap"] == pytest.approx((step - low) / step)
    assert bounded.totals["optimality_gap"] > 0


def test_gap_row_in_the_summary(plans):
    from rich.console import Console

    from smsg_ms.report.tables import print_summary

    out = io.StringIO()
    print_summary(plans[0], Console(file=out, width=80))
    text = out.getvalue()
    assert "optimality gap" in text and "proven lower bound" in text
    assert f"{100 * plans[0].totals['optimality_gap']:.2f} %" in text


def test_time_limit_refused_when_not_positive():
    from smsg_ms.planner.options import PlanningOptions

    with pytest.raises(ValueError, match="positive number of seconds"):
        PlanningOptions(time_limit=0)


def test_too_wide_plan_under_a_tiny_bound_states_its_gap(captured, monkeypatch):
    """A stage too wide for elimination (forced: every table over the limit) under almost no
    work: the plan is valid (its step is the priced step of its strategies), between the exact
    plan's step and the proven bound, and the gap is stated."""
    import sys

    from smsg_ms.planner import plan_graph

    monkeypatch.setattr(sys.modules["smsg_ms.search.solve"], "TABLE_LIMIT", 1)
    exact = plan_graph(captured("llama", **NET), 8, memory_gib=math.inf)
    bounded = plan_graph(captured("llama", **NET), 8, memory_gib=math.inf, time_limit=1e-9)
    low, step = bounded.totals["lower_bound_seconds"], bounded.totals["step_seconds"]
    assert low <= exact.totals["step_seconds"] * (1 + 1e-12) <= step * (1 + 1e-12)
    assert bounded.totals["optimality_gap"] == pytest.approx((step - low) / step)
    assert "optimality_gap" not in exact.totals          # the integer program finished
    assert math.isfinite(step) and len(bounded.decisions) == len(exact.decisions)
