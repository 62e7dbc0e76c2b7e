"""MindSpore's batch-parallel default for operators without a strategy (functional calls).

``OperatorInfo::GenerateBatchStrategiesWithCheck`` (``ops_info/operator_info.cc``) first cuts
the first dimension of each split input ``devices``-way, then lowers every such cut to the
greatest common divisor of the device count and those dimensions. The oracle of the network
test is MindSpore's own compiler (CPU dry-run): on a Swin-like window attention whose
relative-position bias ``(1, heads, N, N)`` is made by functional calls, the plan's predicted
collectives equal the inserted ones, the gathers of the heads cut 2- and 4-way included.
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.model import CostModel, batch_parallel_cut
from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph

SPEC = "smsg_ms.networks.window_bias:build"


@pytest.mark.parametrize("devices,dims,want", [
    (8, [6], 2),          # gcd(6, 8): Swin-T's 6 heads
    (8, [12], 4),
    (8, [24], 8),
    (8, [3], 1),          # odd: stays whole
    (8, [49], 1),         # 7 x 7 tokens
    (16, [24, 40], 8),    # every split input counts: gcd(24, 40, 16)
    (8, [16, 1], 1),      # a size-1 first dimension split as well leaves nothing to cut
    (8, [], 1),           # nothing split
    (8, ["B"], 8),        # symbolic size: as for a dynamic shape, cut devices-way
])
def test_batch_parallel_cut(devices, dims, want):
    assert batch_parallel_cut(devices, dims) == want


def test_expand_dims_default_cuts_heads_by_gcd(captured):
    graph = captured(SPEC)
    model = CostModel(graph, 8)
    got = {}
    for op in graph.ops:
        if op.type == "ExpandDims":
            heads = graph.tensors[op.inputs[0]].shape[0]
            got[heads] = model.default(op).strategy[0]
    assert got == {3: (1, 1, 1), 6: (2, 1, 1), 12: (4, 1, 1)}


def test_window_bias_predicted_equals_inserted(captured):
    plan = plan_graph(captured(SPEC), 8, network=SPEC, progress=False, write_back="shard")
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    inserted = {row.key: row.inserted for row in rank.rows}
    # the bias of 6 heads is gathered 2-way, that of 12 heads 4-way (forward and backward)
    for group in (2, 4):
        assert inserted.get(("AllGather", "forward", group)) == 1
        assert inserted.get(("ReduceScatter", "backward", group)) == 1
