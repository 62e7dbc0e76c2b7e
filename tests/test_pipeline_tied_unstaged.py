"""A tied embedding whose cells the network leaves without a ``pipeline_stage`` (a user's
network; the built-in ``gpt`` ties its head likewise): the write-back stages them as MindSpore
needs, the embedding on the first stage and the head on the last
(:func:`smsg_ms.planner.param_only.shared_parameter_cells`, the record's
``shared_parameter_cells``).

Network: ``smsg_ms.networks.tied_stages:build`` with ``own_stages=False`` (its embedding cell
``embed`` and head cell ``head`` unstaged), 2 blocks on 2 stages of 4 devices, global batch 32
in 2 micro-batches. MindSpore's own compile (the dry-run) is the oracle: left unstaged it
rejects the pipeline on stage 0 ("can not find the end node of pipeline", observed with the
record's entry removed); staged, both stages compile and every row matches.
"""
from __future__ import annotations

import copy
import functools

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage

SPEC = "smsg_ms.networks.tied_stages:build"


@functools.lru_cache(maxsize=None)
def _plan():
    from smsg_ms.planner import plan_network_pipelined

    return plan_network_pipelined(SPEC, 8, global_batch=32, stages=2, micro_batches=2,
                                  own_stages=False)


def test_tied_cells_recorded():
    """The embedding reads the table before ``layers.0``, the head after ``layers.1``."""
    rec = _plan().pipeline
    assert rec["shared_parameter_cells"] == {"embed": 0, "head": 1}
    assert "embed" not in rec.get("first_stage_cells", [])


def test_staged_tied_cells_compile_and_match():
    report = check_plan(_plan(), ranks_per_stage(8, 2))
    assert [r.stage for r in report.ranks] == [0, 1]
    for r in report.ranks:
        assert r.error is None, r.error
        assert r.p2p and all(row.ok for row in r.p2p), r.p2p
    assert report.ok


def test_unstaged_tied_cells_rejected_by_mindspore():
    """The regression the record's entry fixes: without it, stage 0 does not compile."""
    plan = copy.deepcopy(_plan())
    del plan.pipeline["shared_parameter_cells"]
    report = check_plan(plan, [0])
    assert "end node of pipeline" in str(report.ranks[0].error)


def test_builtin_gpt_pipelined_passes_check():
    """The built-in ``gpt`` (head tied to the embedding, neither staged by the network) on 2
    stages: the write-back stages ``embedding`` and ``head``; MindSpore compiles both stages and
    every row matches (before, stage 0 was rejected: "can not find the end node of pipeline")."""
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined("gpt", 8, global_batch=8, stages=2, micro_batches=2,
                                  layers=4, hidden=64, heads=4, vocab=256, seq=32)
    assert plan.pipeline["shared_parameter_cells"] == {"embedding": 0, "head": 1}
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert all(r.error is None for r in report.ranks), [r.error for r in report.ranks]
    assert report.ok


def test_builtin_gpt_with_optimizer_sharding_keeps_the_tied_table_whole(capture_of):
    """Optimizer sharding on, the table read on both stages: MindSpore 2.10 cannot shard it (the
    parallel optimizer puts no AllGather before the Send of a shared parameter,
    ``InsertParallelOpt`` in ``frontend/parallel/parameter_manager.cc``; stage 0 was rejected:
    "For 'AddN', input shape must be same, but got shape of input[1]: (64, 64), shape of
    input[0]: ()"). The plan keeps it whole (``Parameter.parallel_optimizer = False`` in the
    write-back), shards the others, says why, and MindSpore compiles both stages with every
    row matching."""
    from smsg_ms.planner import plan_network_pipelined
    from smsg_ms.report.plan_notes import unsharded_lines

    gpt = dict(layers=4, hidden=64, heads=4, vocab=256, seq=32)
    plan = plan_network_pipelined("gpt", 8, global_batch=8, stages=2, micro_batches=2,
                                  optimizer_sharding=True, capture=capture_of("gpt", **gpt),
                                  **gpt)
    rec = plan.pipeline
    assert [p["name"] for p in rec["shared_parameters"]] == ["embedding_weight"]
    assert rec["optimizer_sharding"] and rec["optimizer_sharded"]
    assert "embedding_weight" not in rec["optimizer_sharded"]
    assert "InsertParallelOpt" in " ".join(unsharded_lines(plan))
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert all(r.error is None for r in report.ranks), [r.error for r in report.ranks]
    assert report.ok


def test_builtin_gpt_at_its_default_widths_pipelined_passes_check():
    """``smsg-ms plan gpt --pipeline 2 --micro-batches 2`` (8 devices, default widths: hidden
    1024, seq 512, vocab 51200, batch 8), then ``check``: it failed three ways (docs/networks.md,
    gpt p2). Optimizer sharding on (level 1): stage 0 rejected ("AddN"), now the tied table
    stays whole. The embedding's Gather cut ``(1, 2)`` on the table: MindSpore keeps the
    repeated calculation on the right of its device matrix (``NormalImpl``), the model had it
    on the left (4 AllGathers over 2 devices per stage predicted, 8 inserted, before). The
    hidden state reshaped to ``(T, h)`` and read by ``attention_norm`` cut ``(2, 1)`` and by
    ``add_attn`` cut ``(4, 1)``: MindSpore lays the Reshape's output out as the Add reads it and
    gathers it again for the LayerNorm (``FindNextLayout``; one AllGather per micro-batch
    more than predicted, before). Oracle: MindSpore's compile of both stages."""
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined("gpt", 8, global_batch=8, stages=2, micro_batches=2)
    rec = plan.pipeline
    assert rec["optimizer_sharding"] and "embedding_weight" not in rec["optimizer_sharded"]
    # the configuration this test is about (a planner that chooses otherwise needs new widths)
    strategy = {d.name: d.strategy for d in plan.decisions}
    assert strategy["embedding.gather"][0] == [1, 2]
    assert strategy["layers.0.attention_norm.norm"][0] != strategy["layers.0.add_attn"][0]
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert all(r.error is None for r in report.ranks), [r.error for r in report.ranks]
    bad = [(r.stage, [(x.key, x.predicted, x.inserted) for x in r.rows + r.p2p if not x.ok])
           for r in report.ranks]
    assert report.ok, bad
