"""A functional call that opens a repeated block (``x1, x2 = ops.split(x)`` of the block's
input) runs on that block's pipeline stage, and the stage border passes the block's output
alone.

Network: :mod:`smsg_ms.networks.split_stack` (4 blocks, global batch 16 in 2 micro-batches of
8, 4 tokens, width 32; 2 stages of 4 devices). MindSpore runs an operator on the stage of the
cell whose ``construct`` calls it, but the capture gives every block's functional calls the
first block's scope, so the plan used to give the ``Split`` to the block before it: the
record then listed the two halves ``(2, 4, 16)`` as side tensors crossing the border, and
``check`` predicted their Send/Receive, which MindSpore does not insert. MindSpore's own compile
of the plan (the dry-run) is the oracle for every row.
"""
from __future__ import annotations

import functools

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage
from smsg_ms.planner.stages import block_of_ops

SPEC = "smsg_ms.networks.split_stack:build"


@functools.lru_cache(maxsize=None)
def _checked():
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined(SPEC, 8, global_batch=16, stages=2, micro_batches=2)
    return plan, check_plan(plan, ranks_per_stage(8, 2))


def test_split_stack_pipelined_matches_mindspore():
    """Every collective and Send/Receive row of both stages agrees with MindSpore's compile
    (before: Send/Receive ``(2, 4, 16)`` ×4 predicted per stage, none inserted)."""
    plan, report = _checked()
    assert plan.pipeline["stages"] == 2
    assert "boundary_extra" not in plan.pipeline
    for rank in report.ranks:
        assert rank.error is None, rank.error
        bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
        assert not bad, f"stage {rank.stage}: (key, predicted, inserted): {bad}"
    shape = tuple(plan.pipeline["boundary_shape"])
    assert shape == (2, 4, 32)                  # the block's output, batch cut 4 ways
    for rank in report.ranks:                   # that tensor alone, once per micro-batch
        kinds = ((("Send", "forward"), ("Receive", "backward")) if rank.stage == 0
                 else (("Receive", "forward"), ("Send", "backward")))
        assert {row.key: (row.predicted, row.inserted) for row in rank.p2p} == {
            (kind, phase, shape, "float32"): (2, 2) for kind, phase in kinds}


def test_split_runs_with_the_block_it_opens(captured):
    """By the network's code: each block's ``Split`` feeds that block's Dense cells ``a`` and
    ``b``, and the residual ``x + mix(z)`` that ends a block reads that block's ``mix``."""
    graph = captured(SPEC)
    names, block = block_of_ops(graph)
    assert names == [f"blocks.{i}" for i in range(4)]
    for op in graph.ops:
        if op.type == "Split":
            readers = {graph.ops[c].prim_path.rsplit(".", 2)[0]
                       for n in op.outputs for c in graph.tensors[n].consumers}
            (cell,) = readers                                  # blocks.i (a and b)
            assert names[block[op.id]] == cell
    def mix_input(op):
        producers = [graph.ops[graph.tensors[n].producer] for n in op.inputs
                     if graph.tensors[n].producer is not None]
        return next((q for q in producers if (q.prim_path or "").endswith("mix.reshape")), None)

    ends = [op for op in graph.ops if op.type == "Add" and mix_input(op) is not None]
    assert len(ends) == 4
    for op in ends:
        assert block[op.id] == block[mix_input(op).id]


MHA = "smsg_ms.networks.multihead:build"


def test_multihead_attention_runs_on_its_block_s_stage():
    """``nn.MultiheadAttention`` is all functional calls, every block's with the first block's
    scope; those reading ``blocks.1.attn``'s weights run on block 1's stage (global batch 16 in
    2 micro-batches, 2 stages of 4 devices). Stage 0 (rank 0) against MindSpore's compile:
    every row agrees (before, block 1's attention was counted there too: 32 AllGathers
    predicted, 16 inserted). Stage 1 keeps the single-stage model's open mismatch (the
    query/key/value reading one gathered input: 1 ReduceScatter predicted, 3 inserted)."""
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined(MHA, 8, global_batch=16, stages=2, micro_batches=2)
    assert plan.pipeline["stage_of_block"] == {"blocks.0": 0, "blocks.1": 1}
    (rank,) = check_plan(plan, [0]).ranks
    assert rank.error is None and rank.stage == 0, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows + rank.p2p if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    assert {row.key[0] for row in rank.rows} >= {"AllGather", "ReduceScatter"}
