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
