"""Pipelined plans end to end: ``smsg-ms plan --pipeline``, ``check`` (every stage's rank compiled by
MindSpore's parallel compiler in the dry-run), ``explain``; the outer search's choice of ``p``;
``apply_plan`` on a pipelined plan; MindSpore's optimizer-sharding threshold.

Oracles: MindSpore's compiler for the Send/Receive and the collectives of optimizer sharding;
derivations written here for the bubble fraction and for ``p = 1``.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from smsg_ms.cost.pipeline import ParamSlice
from smsg_ms.integration.check import check_plan
from smsg_ms.dryrun.runner import run_child
from smsg_ms.integration.pipeline import ranks_per_stage
from smsg_ms.plan import Plan
from test_cli import smsg

SEQ = "64"


@pytest.fixture(scope="module")
def two_stage(tmp_path_factory) -> tuple[Path, Plan]:
    folder = tmp_path_factory.mktemp("pipe2")
    out = folder / "p.plan.json"
    res = smsg(["plan", "llama", "--devices", "8", "--layers", "4", "--seq", SEQ,
                "--pipeline", "2", "--micro-batches", "4", "--out", str(out)], folder)
    assert res.returncode == 0, res.stderr
    return out, Plan.from_dict(json.loads(out.read_text()))


def test_plan_fills_pipeline_record(two_stage):
    _, plan = two_stage
    rec = plan.pipeline
    assert (rec["stages"], rec["micro_batches"], rec["devices_per_stage"]) == (2, 4, 4)
    # llama's default global batch is 8: 4 micro-batches of 2; the options record the global
    # batch, the stage graph is built for 2
    assert rec["micro_batch_size"] == 2 and plan.options["batch"] == 8
    assert plan.build_options()["batch"] == 2
    assert plan.devices == 8
    # every strategy is for one stage's 4 devices
    assert all(1 <= eval_prod(s) <= 4 and 4 % eval_prod(s) == 0
               for st in plan.strategies.values() for s in st)
    stages = list(rec["stage_of_block"].values())
    assert stages == sorted(stages) and set(stages) == {0, 1}
    # bubble (p − 1)/(m + p − 1) = 1/5 (GPipe §2.2)
    assert rec["bubble_fraction"] == pytest.approx(1 / 5)


def eval_prod(cuts) -> int:
    out = 1
    for c in cuts:
        out *= int(c)
    return out


def test_check_cli_and_explain(two_stage):
    """``smsg-ms check`` compiles rank 0 (stage 0) and rank 4 (stage 1) in MindSpore's compiler:
    the Send/Receive it inserts agree in count (one per micro-batch and direction: 4), slice
    shape and dtype with the plan. ``explain`` shows the stage split and the bubble."""
    path, plan = two_stage
    res = smsg(["check", str(path)], path.parent)
    assert "rank 0 (stage 0)" in res.stdout and "rank 4 (stage 1)" in res.stdout, res.stderr
    shape = str(plan.pipeline["boundary_shape"])
    p2p = [line for line in res.stdout.splitlines()
           if line.startswith(("│ Send ", "│ Receive "))]
    assert len(p2p) == 4, res.stdout          # two kinds on each of the two stages
    for line in p2p:
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert cells[2:] == [shape, plan.pipeline["boundary_dtype"], "4", "4", "ok"], line
    res = smsg(["explain", str(path)], path.parent)
    assert res.returncode == 0, res.stderr
    assert "pipeline: 2 stages x 4 devices, 4 micro-batches of 2" in res.stdout
    assert "bubble fraction (p-1)/(m+p-1): 0.200" in res.stdout
    # the stage split shown is the record's: contiguous, non-decreasing, every stage used, and
    # each stage's first block named on its row
    stages = [plan.pipeline["stage_of_block"][b] for b in sorted(
        plan.pipeline["stage_of_block"], key=lambda b: int(b.rsplit(".", 1)[1]))]
    assert stages == sorted(stages) and set(stages) == {0, 1}
    rows = [line for line in res.stdout.splitlines() if line.startswith(("│ 0 ", "│ 1 "))]
    assert len(rows) == 2
    for stage, line in enumerate(rows):
        first = stages.index(stage)
        assert f"layers.{first}" in line, line


def test_four_stages_on_16_devices(tmp_path):
    out = tmp_path / "p4.plan.json"
    res = smsg(["plan", "llama", "--devices", "16", "--layers", "4", "--seq", SEQ,
                "--pipeline", "4", "--micro-batches", "4", "--out", str(out)], tmp_path)
    assert res.returncode == 0, res.stderr
    plan = Plan.from_dict(json.loads(out.read_text()))
    assert list(plan.pipeline["stage_of_block"].values()) == [0, 1, 2, 3]
    report = check_plan(plan, ranks_per_stage(16, 4))
    for r in report.ranks:
        assert r.error is None, r.error
        assert r.p2p and all(row.ok for row in r.p2p), r.p2p
        # operator collectives too (the loss's scalar AllReduce gradient is the loss's)
        assert all(row.ok for row in r.rows), [row for row in r.rows if not row.ok]
        # inner stages receive and send both ways: 4 kinds x 4 micro-batches; ends 2 kinds
        inner = 0 < r.stage < 3
        assert sum(row.inserted for row in r.p2p) == (16 if inner else 8)


def test_bad_pipeline_flags_one_line(tmp_path):
    res = smsg(["plan", "llama", "--devices", "8", "--layers", "4", "--pipeline", "3"], tmp_path)
    assert res.returncode != 0 and "stage count dividing 8" in res.stderr
    res = smsg(["plan", "llama", "--devices", "8", "--layers", "4", "--pipeline", "4",
                "--micro-batches", "2"], tmp_path)
    assert res.returncode != 0 and "micro-batches 2 < stages 4" in res.stderr
    res = smsg(["plan", "llama", "--devices", "8", "--layers", "4", "--optimizer-sharding", "on"],
               tmp_path)
    assert res.returncode != 0 and "need --pipeline" in res.stderr
    assert not list(tmp_path.glob("*.plan.json"))


def test_auto_picks_one_stage_for_small_model_big_batch(capture_of):
    """A 2-layer LLaMA, global batch 32 on 8 devices, 4 micro-batches for p > 1.

    Derivation: every candidate does the same FLOPs per device per step (the batch is spread over
    all 8 devices either way), but a pipeline of ``p`` stages with ``m`` micro-batches runs
    ``m + p − 1`` slots of its slowest stage, i.e. at least ``(m + p − 1)/m`` = 5/4 (p = 2) of the
    compute-only time, plus the sends; ``p = 1`` has no bubble and no send. What ``p > 1`` saves
    is gradient synchronisation of fewer parameters over fewer replicas, at most the whole
    gradient AllReduce of this small model, which is far below a quarter of its compute at
    batch 32. So ``p = 1`` must win, and the forced ``p = 2`` super-step must exceed p = 1's.
    """
    from smsg_ms.planner import plan_network_pipelined

    net = dict(layers=2, seq=64)
    opts = dict(net, capture=capture_of("llama", **net))     # both plans share the captures
    auto = plan_network_pipelined("llama", 8, global_batch=32, stages="auto", micro_batches=4,
                                  **opts)
    assert auto.pipeline["stages"] == 1 and auto.pipeline["micro_batches"] == 1
    assert auto.options["batch"] == 32 and auto.devices == 8
    two = plan_network_pipelined("llama", 8, global_batch=32, stages=2, micro_batches=4, **opts)
    assert two.pipeline["stages"] == 2
    assert two.pipeline["step_seconds"] > auto.pipeline["step_seconds"]
    # the bubble alone: (m + p − 1) slots of the slowest stage vs m
    slowest = max(two.pipeline["stage_seconds"])
    assert two.pipeline["step_seconds"] >= 5 * slowest
    assert two.pipeline["bubble_fraction"] == pytest.approx(1 / 5)


# ---- optimizer-sharding threshold against MindSpore ------------------------------------------
THRESHOLD_NET = {"seq": 16, "layers": 1, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 256,
                 "batch": 8}
THRESHOLD_STRATEGIES = {"layers.0.feed_forward.w1.matmul": [[2, 1], [1, 4]],
                        "layers.0.feed_forward.w3.matmul": [[2, 1], [1, 4]],
                        "layers.0.feed_forward.w2.matmul": [[2, 4], [4, 1]]}


def _threshold_params() -> dict[str, ParamSlice]:
    """The network's parameters on 8 devices (fp32, 4 bytes), derived by hand: un-annotated
    operators are batch-parallel, so their weights are whole and replicated 8 times; w1/w3
    ``(128, 256)`` cut ``(1, 4)`` → slice ``(128, 64)`` replicated 2 times; w2 ``(256, 128)`` cut
    ``(4, 1)`` → ``(64, 128)`` x 2."""
    def p(shape, slice_, replicas):
        n = 1
        for d in slice_:
            n *= d
        full = 4
        for d in shape:
            full *= d
        return ParamSlice(n, slice_[0], replicas, full), tuple(slice_)
    out = {"embedding": p((256, 128), (256, 128), 8), "lm_head": p((128, 256), (128, 256), 8),
           "w1": p((128, 256), (128, 64), 2), "w3": p((128, 256), (128, 64), 2),
           "w2": p((256, 128), (64, 128), 2)}
    for name in ("wq", "wk", "wv", "wo"):        # exactly 64 KB: not below the threshold
        out[name] = p((128, 128), (128, 128), 8)
    for name in ("attention_norm", "ffn_norm", "norm_out"):      # 512 B
        out[name] = p((128,), (128,), 8)
    return out


def test_optimizer_sharding_threshold_matches_mindspore():
    """MindSpore (``parallel_optimizer_threshold`` 64 KB on the whole parameter) shards the
    optimizer of every parameter but the 512-byte norm weights: those keep the mirror AllReduce;
    the others get their weight AllGathered (slice / replicas → slice) over the replicas. A
    threshold on the per-device slice would leave w1/w3 (32 KB slices) out: MindSpore does not."""
    params = _threshold_params()
    rec = {"stages": 1, "micro_batches": 1, "optimizer_sharding": True,
           "stage_of_block": {}, "recompute": {}}
    out = run_child({"job": "pipeline_compile", "spec": "llama", "options": THRESHOLD_NET,
                     "pipeline": rec, "strategies": THRESHOLD_STRATEGIES}, devices=8, rank=0)
    colls = out["collectives"]
    mirrors = Counter((tuple(c["in_shape"]), c["group_size"]) for c in colls
                      if c["grad_sync"] and c["type"] == "AllReduce")
    gathers = Counter((tuple(c["in_shape"]), tuple(c["out_shape"]), c["group_size"])
                      for c in colls if c["type"] == "AllGather" and c["pass"] == "forward")
    want_mirrors = Counter((sl, prm.replicas) for prm, sl in params.values()
                           if not prm.optimizer_shardable())
    want_gathers = Counter(((sl[0] // prm.replicas,) + sl[1:], sl, prm.replicas)
                           for prm, sl in params.values() if prm.optimizer_shardable())
    assert mirrors == want_mirrors
    assert all(gathers[k] >= n for k, n in want_gathers.items()), (gathers, want_gathers)
    # the slice-size reading of the threshold would be wrong on w1/w3
    w1 = params["w1"][0]
    assert w1.elements * 4 < 64 * 1024 <= w1.full_bytes and w1.optimizer_shardable()
    assert not ParamSlice(128, 128, 8, 512).optimizer_shardable()
    assert not ParamSlice(128, 128, 8, 512).optimizer_shardable(threshold=1024)
    assert ParamSlice(128, 128, 8, 512).optimizer_shardable(threshold=0)


def test_apply_plan_marks_stages(two_stage):
    """``apply_plan`` on a pipelined plan: refused while MindSpore's context has another
    ``pipeline_stages``; with it set, the blocks get their stages."""
    import mindspore as ms

    from smsg_ms.integration.annotate import apply_plan
    from smsg_ms.integration.plan_io import PlanError
    from smsg_ms.networks import build_network

    _, plan = two_stage
    built = build_network("llama", no_init=True, **plan.build_options())
    saved = ms.get_auto_parallel_context("pipeline_stages")
    try:
        ms.set_auto_parallel_context(pipeline_stages=1)
        with pytest.raises(PlanError, match="pipeline_stages=1"):
            apply_plan(built.net, plan, devices=8, set_context=False)
        ms.set_auto_parallel_context(pipeline_stages=2)
        apply_plan(built.net, plan, devices=8, set_context=False)
        cells = dict(built.net.cells_and_names())
        assert [cells[f"layers.{i}"].pipeline_stage for i in range(4)] == \
            [plan.pipeline["stage_of_block"][f"layers.{i}"] for i in range(4)]
    finally:
        ms.set_auto_parallel_context(pipeline_stages=saved)


def test_layer_costs_add_up_to_the_stage_plan(captured):
    """The per-block sums of the adapter equal the operator-level plan's own totals (its step
    minus gradient synchronisation and optimizer update, once per step; its activation bytes); every parameter is in exactly one
    block (embedding with the first, head and final norm with the last)."""
    import math

    from smsg_ms.planner.stages import layer_costs_of, solve_stage
    from smsg_ms.planner import plan_graph

    graph = captured("llama", layers=2, batch=2, seq=64)
    layers = layer_costs_of(solve_stage(graph, 4, "ascend910b"))
    plan = plan_graph(graph, 4, memory_gib=math.inf)
    assert [x.name for x in layers] == ["layers.0", "layers.1"]
    busy = sum(x.forward_seconds + x.backward_seconds for x in layers)
    assert busy == pytest.approx(plan.totals["step_seconds"] - plan.totals.get("grad_sync", 0)
                                 - plan.totals.get("update", 0))
    assert sum(x.activation_bytes for x in layers) == pytest.approx(
        plan.totals["activation_bytes"])
    assert sum(len(x.params) for x in layers) == len(graph.parameters())
    # the hidden state (batch·seq, hidden) fp32 crosses the boundary, sliced by its layout
    assert layers[0].output_bytes == layers[1].input_bytes > 0
    assert 2 * 64 * 1024 * 4 % layers[0].output_bytes == 0
