"""A data input read by two primitives in different layouts: MindSpore gives it one data-set
layout (one cut dimension at most) and redistributes into each reader that needs another. The
plan's ``dataset_strategy`` must be one MindSpore accepts, and every reader's redistribution must
be priced and predicted: MindSpore's parallel compiler (dry-run) is the oracle.
"""
from __future__ import annotations

import functools

import pytest

from smsg_ms.integration.check import check_plan

SPEC = "smsg_ms.networks.input_readers:build"
OPTIONS = {"batch": 64, "width": 256}


@pytest.fixture(scope="module")
def forced(captured):
    """``forced(mm1, mm2, add)``: the plan with these strategies (searched nothing:
    ``plan_graph(choice=...)``), of one capture of the network shared by every case."""
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import plan_graph
    from smsg_ms.planner.problem import build_problem

    graph = captured(SPEC, **OPTIONS)

    @functools.lru_cache(maxsize=None)
    def plan(mm1, mm2, add):
        _, variables = build_problem(graph, CostModel(graph, 8, "ascend910b"))
        want = {"mm1": mm1, "mm2": mm2, "add": add}
        choice = [[tuple(map(tuple, k)) for k in v.keys].index(want[v.name]) for v in variables]
        return plan_graph(graph, 8, choice=choice, network=SPEC, options=OPTIONS)
    return plan


def _x_gathers(plan) -> dict[str, int]:
    return {d.name: sum(1 for c in d.collectives if c["tensor"] == "x") for d in plan.decisions}


@pytest.mark.parametrize("mm2,add,x_gathered_for", [
    # (2,1) and (2,4) are further splits of the (2,1) data set: nothing to move
    (((2, 1), (4, 1)), ((2, 4), (2, 4)), set()),     # mm2's weight is (out, in)
    # a replicated reader needs the whole x: one AllGather over the 2 data-set shards
    (((1, 1), (8, 1)), ((1, 8), (1, 8)), {"mm2"}),
])
def test_every_reader_priced_and_checked(forced, mm2, add, x_gathered_for):
    plan = forced(((2, 4), (4, 1)), mm2, add)
    # the first reader cuts two dimensions of x; MindSpore's data set holds one
    assert plan.dataset_strategy == [[2, 1]]
    assert {k for k, n in _x_gathers(plan).items() if n} == x_gathered_for
    report = check_plan(plan, [0])
    assert report.ok, [row for r in report.ranks for row in r.rows if not row.ok]


def test_searched_plan_has_an_accepted_dataset_strategy():
    from smsg_ms.planner import plan_network

    plan = plan_network(SPEC, 8, **OPTIONS)
    assert all(sum(1 for c in cuts if c > 1) <= 1 for cuts in plan.dataset_strategy)
    assert check_plan(plan, [0]).ok
