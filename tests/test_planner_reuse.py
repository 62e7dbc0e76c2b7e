"""The planner's reuse of options and edge matrices across identical operators (and its memoised
redistribution seconds) changes nothing: the reference is the plain computation
(``build_problem(reuse=False)``, one option list per operator, one matrix per edge)."""
from __future__ import annotations

import numpy as np
import pytest

from smsg_ms import planner
from smsg_ms.cost.model import CostModel
from smsg_ms.planner import PlanningOptions, build_problem, plan_graph, plan_graph_with


def _problem_dump(problem):
    return ([(v.name, v.op_ids, v.keys, v.cost.tolist(), v.memory.tolist())
             for v in problem.variables],
            [(e.u, e.v, e.cost.tolist()) for e in problem.edges])


@pytest.mark.parametrize("devices", [8, 24])
def test_reused_problem_equals_plain_problem(captured, devices):
    graph = captured("llama", layers=2)
    fully = devices > planner.EXHAUSTIVE_UP_TO
    fast, fast_vars = build_problem(graph, CostModel(graph, devices, fully_use_devices=fully))
    plain, plain_vars = build_problem(graph, CostModel(graph, devices, fully_use_devices=fully),
                                      reuse=False)
    assert _problem_dump(fast) == _problem_dump(plain)
    # the reuse really happened: layer 1 shares layer 0's option lists
    shared = [fv for fv in fast_vars if fv.rename]
    assert shared and all(fv.options is not pv.options for fv, pv in zip(fast_vars, plain_vars))
    assert len(shared) >= len(fast_vars) // 3


@pytest.mark.parametrize("devices", [8, 24])
def test_reused_plan_equals_plain_plan(captured, devices):
    graph = captured("llama", layers=2)
    fast = plan_graph(graph, devices)
    plain = plan_graph_with(graph, devices, PlanningOptions(reuse=False))
    assert fast.to_json() == plain.to_json()


def test_shared_collectives_name_their_own_tensors(captured):
    """A layer-1 matmul that shares layer 0's options still names layer 1's weight."""
    graph = captured("llama", layers=2)
    plan = plan_graph(graph, 8)
    for d in plan.decisions:
        if d.name.startswith("layers.1.") and d.collectives:
            own = {n for op in graph.ops if op.label == d.name or op.prim_path == d.name
                   for n in op.inputs + op.outputs}
            assert {c["tensor"] for c in d.collectives
                    if not c.get("redistribution")} <= own, d.name


def test_shared_matrices_are_read_only(captured):
    graph = captured("llama", layers=2)
    problem, _ = build_problem(graph, CostModel(graph, 8))
    shared = [e for e in problem.edges if not e.cost.flags.writeable]
    assert shared
    with pytest.raises(ValueError):
        shared[0].cost[0, 0] = np.nan


def test_shared_option_costs_are_read_only_and_shared(captured):
    """Variables of one signature share one cost array (the search compares them by identity
    first); writing into it raises instead of changing every layer at once."""
    graph = captured("llama", layers=2)
    problem, variables = build_problem(graph, CostModel(graph, 8))
    by_name = {v.name: v for v in problem.variables}
    a, b = by_name["layers.0.attention.wq.matmul"], by_name["layers.1.attention.wq.matmul"]
    assert a.cost is b.cost and a.memory is b.memory
    with pytest.raises(ValueError):
        a.cost[0] = 0.0
