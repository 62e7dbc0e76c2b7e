"""A block that ends with a Reshape's output (Swin's ``PatchMerging``) may still end a pipeline
stage: its tail runs with the next block, checked against MindSpore's compiler (CPU dry-run).

Network: :mod:`smsg_ms.networks.border_tail` (``layers.i`` = a residual ``x + Dense(x)``
block, then, but for the last, a ``downsample`` Dense whose output is a Reshape's; batch 8,
4 tokens, width 32). Before, a 2-stage plan was refused ("after layers.0 ... a Reshape's
output, which MindSpore refuses as a stage border"). Derived by hand for 2 layers on 2 stages
of 4 devices, 2 micro-batches of 4: stage 0 runs ``layers.0.blocks.0`` (its Dense weight and
bias: 2 gradient AllReduces over 4 devices), stage 1 ``layers.0.downsample`` and ``layers.1``
(4 gradient AllReduces); the tensor crossing is the residual ``Add``'s output, a micro-batch
cut 4 ways: ``(1, 4, 32)`` float32, Sent forward and its gradient Received back once per
micro-batch.
"""
from __future__ import annotations

import dataclasses

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage
from smsg_ms.planner import plan_network_pipelined
from smsg_ms.planner.border_tails import split_record, tails
from smsg_ms.planner.stages import block_of_ops, chain_blocks, reshape_borders, weight_dependent

SPEC = "smsg_ms.networks.border_tail:build"


def test_each_downsample_runs_with_the_next_layer(captured):
    graph = captured(SPEC, batch=4)
    names, raw = chain_blocks(graph)
    sent = weight_dependent(graph)
    assert reshape_borders(graph, raw, sent) == {0, 1, 2}      # by name: no border allowed
    assert split_record(names, tails(graph, names, raw, sent, {0, 1, 2})) == {
        f"layers.{i}": {f"layers.{i}.blocks.0": f"layers.{i}",
                        f"layers.{i}.downsample": f"layers.{i + 1}"} for i in range(3)}
    _, block = block_of_ops(graph)
    assert reshape_borders(graph, block, sent) == set()
    assert {op.prim_path: block[op.id] for op in graph.ops
            if op.prim_path and op.prim_path.startswith("layers.0.downsample")} == {
        "layers.0.downsample.reshape": 1, "layers.0.downsample.matmul": 1,
        "layers.0.downsample.bias_add": 1}


def test_a_block_with_operators_of_its_own_is_not_split(captured):
    """:mod:`smsg_ms.networks.layer_scale`: block 0's own ``gamma * h`` and residual ``Add``
    would run on no stage of their own; its border stays refused (``test_layer_scale``)."""
    graph = captured("smsg_ms.networks.layer_scale:build")
    names, raw = chain_blocks(graph)
    sent = weight_dependent(graph)
    assert tails(graph, names, raw, sent, reshape_borders(graph, raw, sent)) == {}


def test_a_stage_ends_before_the_downsample(capture_of, shared_capture):
    plan = plan_network_pipelined(SPEC, 8, global_batch=8, stages=2, micro_batches=2,
                                  capture=capture_of(SPEC, layers=2), layers=2)
    rec = plan.pipeline
    assert rec["stage_of_block"] == {"layers.0": 0, "layers.1": 1}
    assert rec["split_blocks"] == {"layers.0": {"layers.0.blocks.0": "layers.0",
                                                "layers.0.downsample": "layers.1"}}
    assert rec["boundary_shape"] == [1, 4, 32]
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    assert report.ok, [(r.stage, [(x.key, x.predicted, x.inserted) for x in r.rows + r.p2p])
                       for r in report.ranks]
    for rank, grads in zip(report.ranks, (2, 4)):
        got = {row.key: row.inserted for row in rank.rows}
        assert got[("AllReduce", "grad_sync", 4)] == grads
        assert {(p.key[2], p.inserted) for p in rank.p2p} == {((1, 4, 32), 2)}


def test_a_parameter_only_tensor_is_gathered_once_per_step(capture_of, shared_capture):
    """The pattern of Swin's relative-position bias, pipelined: :mod:`smsg_ms.networks.
    window_bias` chained (4 blocks of 4 heads, 2 stages of 4 devices, 2 micro-batches). The
    bias ``matmul(index, table)`` reads no micro-batch, and MindSpore merges its micro-batch
    copies: by hand per stage (2 blocks), the bias gathered at ``attn + bias`` once per block
    and step (2 forward AllGathers; counted per micro-batch before: 4 predicted), the
    attention's gradient ReduceScattered per micro-batch (2 × 2 = 4), and 3 trained weights
    per block (Dense weight and bias, the table) AllReduced once (6)."""
    spec, opts = "smsg_ms.networks.window_bias:build", {"chain": True, "heads": (4, 4, 4, 4)}
    plan = plan_network_pipelined(spec, 8, global_batch=8, stages=2, micro_batches=2,
                                  capture=capture_of(spec, **opts), **opts)
    assert plan.pipeline["once_per_step"]
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    for rank in report.ranks:
        got = {row.key: (row.predicted, row.inserted) for row in rank.rows}
        assert got[("AllGather", "forward", 4)] == (2, 2)
        assert got[("ReduceScatter", "backward", 4)] == (4, 4)
        assert got[("AllReduce", "grad_sync", 4)] == (6, 6)
    assert report.ok


def test_weights_before_the_first_block_are_staged_so_the_first_stage_merges_too(
        capture_of, shared_capture):
    """mindcv Swin's pattern, pipelined: a trained ``Dense`` ``stem`` outside the blocks runs
    before :mod:`smsg_ms.networks.window_bias`'s chain (Swin's ``patch_embed``). Left without a
    ``pipeline_stage``, MindSpore 2.10 computes stage 0's parameter-only biases once per
    micro-batch: their forward AllGathers 2 blocks × 2 micro-batches = 4 (compiled below with
    the record's ``first_stage_cells`` dropped; Swin's stage 0: 4 inserted, 2 predicted). The
    plan stages ``stem`` on stage 0 (as mindformers stages its embedding) and MindSpore merges
    the copies: 2 per stage, as predicted; stage 0 syncs the stem's 2 weights as well
    (3 · 2 + 2 = 8 gradient AllReduces)."""
    spec = "smsg_ms.networks.window_bias:build"
    opts = {"chain": True, "heads": (4, 4, 4, 4), "stem": True}
    plan = plan_network_pipelined(spec, 8, global_batch=8, stages=2, micro_batches=2,
                                  capture=capture_of(spec, **opts), **opts)
    assert plan.pipeline["first_stage_cells"] == ["stem"]
    assert plan.pipeline["once_per_step"]
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    for rank, grads in zip(report.ranks, (8, 6)):
        got = {row.key: (row.predicted, row.inserted) for row in rank.rows}
        assert got[("AllGather", "forward", 4)] == (2, 2)
        assert got[("ReduceScatter", "backward", 4)] == (4, 4)
        assert got[("AllReduce", "grad_sync", 4)] == (grads, grads)
    assert report.ok
    unstaged = dataclasses.replace(plan, pipeline={k: v for k, v in plan.pipeline.items()
                                                   if k != "first_stage_cells"}).seal()
    stage0 = check_plan(unstaged, [0]).ranks[0]
    got = {row.key: (row.predicted, row.inserted) for row in stage0.rows}
    assert got[("AllGather", "forward", 4)] == (2, 4)
