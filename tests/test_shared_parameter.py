"""A parameter read by two primitives (an embedding table tied to the output head) is one weight:
one layout, one gradient synchronisation, one copy in memory (MindSpore's rule; its parallel
compiler, in the dry-run, is the oracle for the collectives).

Expected memory is derived here from the plan's strategies: each distinct parameter's elements
divided by the cuts of its layout, times 4 bytes (fp32), counted once.
"""
from __future__ import annotations

import functools
from math import prod

import pytest

from smsg_ms.integration.check import check_plan

SPEC = "smsg_ms.networks.tied:build"
OPTIONS = {"tokens": 128, "vocab": 512, "hidden": 256}


@functools.lru_cache(maxsize=None)
def _plan(devices: int):
    from smsg_ms.planner import plan_network

    return plan_network(SPEC, devices, **OPTIONS)


@pytest.mark.parametrize("devices", [8])
def test_tied_weight_counted_once_and_checked_by_mindspore(devices):
    plan = _plan(devices)
    strategy = {d.name: d.strategy for d in plan.decisions}
    table_cuts = strategy["gather"][0]               # Gather(table, ids): the table's layout
    assert strategy["head"][1] == table_cuts         # one layout for both readers
    w_cuts = strategy["proj"][1]
    want = 4 * (OPTIONS["vocab"] * OPTIONS["hidden"] // prod(table_cuts)
                + OPTIONS["hidden"] ** 2 // prod(w_cuts))
    assert plan.totals["parameter_bytes"] == want
    assert plan.totals["gradient_bytes"] == want
    syncs = [c for d in plan.decisions for c in d.collectives if c.get("phase") == "grad_sync"]
    assert sorted(c["tensor"] for c in syncs) == sorted({c["tensor"] for c in syncs})
    report = check_plan(plan, [0])
    assert report.ok, [row for r in report.ranks for row in r.rows if not row.ok]


def test_non_trainable_parameter_under_a_default_layout_user(shared_capture):
    """``smsg_ms.networks.accumulate``: ``acc (64,)``, not trainable, read by the planned Add
    ``add_accu`` and updated by ``assignadd`` (an AssignAdd, no cost family: its own
    ``shard(((1,), (1,)))`` is cleared and MindSpore's batch-parallel default applies), as
    mindformers' MoE router keeps ``fi_accu``. By hand from ``step_parallel_utils.cc``
    (``ExtractInputParameterByNode``: the parameter flag is ``ParameterRequireGrad``) and
    ``GenerateBatchStrategiesBySplitFlag``: acc is not flagged, so the default cuts both
    inputs' first dimension 64 -> gcd(8, 64) = 8 ways, ``((8,), (8,))``. One layout per
    parameter: the Add must cut acc 8 ways too, and MindSpore compiles the plan (before the
    fix, the default was taken to leave acc whole, the Add kept it whole, and the compile
    failed: "The parameter: acc has multiple users, but the TensorInfo are different")."""
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import plan_graph

    spec = "smsg_ms.networks.accumulate:build"
    graph = shared_capture(spec)
    (assign,) = [op for op in graph.ops if op.type == "AssignAdd"]
    assert CostModel(graph, 8).default(assign).strategy == ((8,), (8,))
    plan = plan_graph(graph, 8, progress=False, network=spec, options={})
    assert plan.strategies["add_accu"][0] == [8]
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok


SHARED = "smsg_ms.networks.shared_weight:build"


def _compiles(mm) -> bool:
    from smsg_ms.dryrun import runner as dryrun

    try:
        dryrun.run_child({"job": "compile", "spec": SHARED,
                          "strategies": {"mm": mm, "scale": [[1, 4], [1, 4]]}}, devices=8)
    except dryrun.DryRunError as err:
        assert "multiple users, but the TensorInfo are different" in str(err), str(err)
        return False
    return True


def test_users_of_a_parameter_must_agree_on_rank_groups_not_only_cuts(shared_capture):
    """``smsg_ms.networks.shared_weight``: ``w (16, 32)`` read by ``mm`` (MatMul) and ``scale``
    (Mul ``((1, 4), (1, 4))``: device matrix ``(1, 4, 2)``, ``w``'s columns over the axis of
    stride 2). MatMul ``((2, 1), (1, 4))`` (matrix ``(2, 1, 4)``, columns over stride 1) cuts
    ``w`` ``(1, 4)`` too, over other ranks: MindSpore's compile fails; MatMul ``((1, 1),
    (1, 4))`` (matrix ``(1, 1, 4)`` + 2 replicas on the right: stride 2) compiles. The search's
    parameter edge is infinite exactly for the pair MindSpore refuses (it compared cuts
    before, and allowed both)."""
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import build_problem

    assert not _compiles([[2, 1], [1, 4]])
    assert _compiles([[1, 1], [1, 4]])
    graph = shared_capture(SHARED)
    problem, variables = build_problem(graph, CostModel(graph, 8))
    index = {var.name: i for i, var in enumerate(variables)}
    u, v = sorted((index["mm"], index["scale"]))
    (edge,) = [e for e in problem.edges if (e.u, e.v) == (u, v)]

    def option(name, strategy):
        return next(o for o, calls in enumerate(variables[index[name]].options)
                    if calls[0].strategy == strategy)

    scale = option("scale", ((1, 4), (1, 4)))
    for mm, ok in ((((2, 1), (1, 4)), False), (((1, 1), (1, 4)), True)):
        i, j = option("mm", mm), scale
        if u != index["mm"]:
            i, j = j, i
        assert bool(edge.cost[i, j] == 0.0) is ok, (mm, edge.cost[i, j])


def test_dim_groups_by_hand():
    """``(size, stride)`` of each dimension's cutting axis: MatMul ``w`` in ``(2, 1, 4)`` with
    tensor map ``(1, 0)``: rows on the size-1 axis (not cut), columns on the last axis
    (stride 1); Mul's ``w`` in ``(1, 4, 2)`` with map ``(2, 1)``: columns on stride 2."""
    from smsg_ms.cost.layout import TensorLayout

    assert TensorLayout((2, 1, 4), (1, 0)).dim_groups() == (None, (4, 1))
    assert TensorLayout((1, 4, 2), (2, 1)).dim_groups() == (None, (4, 2))
    assert TensorLayout((1, 1, 4, 2), (2, 1)).dim_groups() == (None, (4, 2))
    assert TensorLayout((1, 4, 2), (2, 1)).cuts == TensorLayout((2, 1, 4), (1, 0)).cuts
