"""A plan's predicted collectives through a Reshape follow MindSpore's one redistribution
between the expanded layouts (D11 in docs/known-differences.md), checked by the dry-run.

The network: ``(8, 16)`` activations, Transpose, Reshape to ``128``, ReLU, then a sum of
squares. The plan is the project's own (``plan_graph``) with the choice pinned to the D11 chain:
the Transpose cut ``(2, 4)`` (its output ``(16, 8)`` cut ``(4, 2)``, the 4-way cut on the minor
axis of the device matrix ``(2, 4)``), the ReLU and what follows cut 8. MindSpore unifies
``(16, 8)`` and ``128`` cut 8 on the shape ``(2, 2, 4, 8)`` over three 2-way device axes, all
of which move: three 2-way AllGathers forward (128, 256, 512 B; derived by hand in
``tests/test_cost_reshape.py``), where the producer → Reshape option → consumer pair predicted
two (a 2-way and a 4-way one). The oracle is ``check`` (MindSpore's compiler, CPU dry-run).
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.model import CostModel
from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph
from smsg_ms.planner.problem import build_problem
from smsg_ms.planner.variables import option_key
from test_cost_vs_mindspore import SPEC, act

CASES = [{"ops": [{"type": "Transpose", "init": {}, "inputs": [act(8, 16)], "args": [[1, 0]]},
                  {"type": "Reshape", "init": {}, "inputs": [["prev"]], "args": [[128]]},
                  {"type": "ReLU", "init": {}, "inputs": [["prev"]], "args": []}]}]


@pytest.fixture(scope="module")
def graph():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC, cases=CASES)


def pinned_plan(graph, devices: int):
    """The plan whose Transpose (and the Add before it) is cut ``(2, 4)``, whose ReLU and Square
    are cut ``devices``-way and whose final ReduceSum is whole (one AllGather into it); the
    Reshape takes its first option (MindSpore gives it no layout of its own)."""
    model = CostModel(graph, devices)
    built = build_problem(graph, model)
    rest = (devices,)
    want = {"cases.0.steps.0.pre0": ((2, 4), (2, 4)), "cases.0.steps.0.op": ((2, 4),),
            "cases.0.steps.2.op": (rest,), "square": (rest,), "total": ((1,),)}
    choice = []
    for var in built[1]:
        keys = [option_key(calls[0]) for calls in var.options]
        choice.append(keys.index(want[var.name]) if var.name in want else 0)
    return plan_graph(graph, devices, network=SPEC, options={"cases": CASES}, choice=choice,
                      model=model, built=built, progress=False)


@pytest.mark.parametrize("devices", [8, 16])
def test_plan_through_strided_merge_matches_mindspore(graph, devices):
    plan = pinned_plan(graph, devices)
    gathers = sorted((c["group"], c["bytes"]) for d in plan.decisions for c in d.collectives
                     if c.get("redistribution") and c["phase"] == "forward")
    # by hand (module docstring): three 2-way AllGathers of the growing (8, 16) float32 tensor,
    # and the Square's output (128 float32, 512 B) gathered whole for the ReduceSum
    assert gathers == [(2, 128.0), (2, 256.0), (2, 512.0), (devices, 512.0)]
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    inserted = {row.key: row.inserted for row in rank.rows}
    assert inserted[("AllGather", "forward", 2)] == 3
    assert inserted[("ReduceScatter", "backward", 2)] == 3
