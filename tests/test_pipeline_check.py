"""``check`` of pipelined plans with optimizer sharding: MindSpore's parallel compiler (CPU dry-run)
compiles every stage's first rank and the operator collectives it inserts must equal the plan's
prediction, row by row (kind, phase, group, count, bytes), as must the Send/Receive.

The network is the built-in LLaMA at a width where the stage plan is data-parallel (hidden 128,
FFN 256, sequence 256: the activations dwarf the weights), so every weight is replicated on the
stage's 4 devices and MindSpore's optimizer sharding applies. The counts below are derived here,
not read from the planner: per decoder block the weights wq, wk, wv, wo (128 × 128 fp32 = 64 KB,
not below MindSpore's 64 KB ``parallel_optimizer_threshold``) and w1, w3, w2 (128 KB) are sharded,
the two RMSNorm weights (512 B) are not; the embedding (256 × 128, 128 KB) lives on the first stage
and the head (128 × 256) with the final norm on the last. A sharded weight gets one AllGather
(forward) and one ReduceScatter (backward) per step over its 4 replicas; an unsharded one keeps
one gradient AllReduce per step.
"""
from __future__ import annotations

import functools

import pytest

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage

NET = {"layers": 4, "seq": 256, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 256}
BLOCK_SHARDED, BLOCK_NORMS = 7, 2


@pytest.fixture(scope="module")
def checked(capture_of):
    """``checked(devices, stages)``: the plan of NET and its check, once per pair; the plans
    share the network's captures."""
    from smsg_ms.planner import plan_network_pipelined

    capture = capture_of("llama", **NET)

    @functools.lru_cache(maxsize=None)
    def run(devices: int, stages: int):
        plan = plan_network_pipelined("llama", devices, global_batch=64, stages=stages,
                                      micro_batches=4, optimizer_sharding=True, capture=capture,
                                      **NET)
        return plan, check_plan(plan, ranks_per_stage(devices, stages))
    return run


def _derived(stage: int, stages: int) -> tuple[int, int]:
    """(sharded weights, unsharded norm weights) on ``stage``."""
    blocks = NET["layers"] // stages
    sharded, norms = blocks * BLOCK_SHARDED, blocks * BLOCK_NORMS
    if stage == 0:
        sharded += 1                       # embedding
    if stage == stages - 1:
        sharded, norms = sharded + 1, norms + 1      # head, final norm
    return sharded, norms


@pytest.mark.parametrize("devices,stages", [(8, 2), (16, 4)])
def test_optimizer_sharding_collectives_match_mindspore(checked, devices, stages):
    plan, report = checked(devices, stages)
    assert plan.pipeline["stages"] == stages and plan.pipeline["optimizer_sharding"] is True
    assert [r.stage for r in report.ranks] == list(range(stages))
    for r in report.ranks:
        assert r.error is None, r.error
        bad = [row for row in r.rows if not row.ok] + [row for row in r.p2p if not row.ok]
        assert not bad, f"stage {r.stage}: {bad}"
        got = {row.key: row.inserted for row in r.rows if row.planned}
        sharded, norms = _derived(r.stage, stages)
        group = devices // stages
        assert got.get(("AllGather", "forward", group)) == sharded
        assert got.get(("ReduceScatter", "backward", group)) == sharded
        assert got.get(("AllReduce", "grad_sync", group)) == norms
        # data-parallel stage plan: no operator collective inside the blocks
        assert set(got) == {("AllGather", "forward", group),
                            ("ReduceScatter", "backward", group),
                            ("AllReduce", "grad_sync", group)}
        assert report.ok


def test_sharded_parameters_in_record(checked):
    """The record names exactly the weights derived above, each with 4 shards."""
    plan, _ = checked(8, 2)
    sharded = plan.pipeline["optimizer_sharded"]
    assert set(sharded.values()) == {4}
    assert len(sharded) == 2 * 1 + NET["layers"] * BLOCK_SHARDED     # embedding, head
    assert not any("norm" in name for name in sharded)


# ---- mindformers LLaMA ------------------------------------------------------------------------
MF_NET = {"seq": 64, "hidden": 256, "heads": 4, "ffn": 512, "vocab": 512}


@pytest.mark.parametrize("layers,stages", [(2, 2), (4, 4)])
def test_mindformers_llama_pipelined_send_receive(layers, stages):
    """mindformers' ``LlamaForCausalLM`` cut into ``stages`` stages on 8 devices, optimizer
    sharding on: every stage's rank compiles (mindformers' own parallel config follows the
    context's ``pipeline_stages``, our record marks ``model.layers.i``), and MindSpore sends
    exactly the hidden state: per boundary and micro-batch one forward Send/Receive and one
    backward pair (derived count: ``m`` of each kind per neighbour), of the slice the plan
    predicts; the causal mask that also crosses the block boundary in the graph is recomputed by
    the later stage, not sent (its forward collectives are predicted there too).

    Operator rows: zero mismatches. mindformers builds its embedding table with
    ``parallel_optimizer=False``: 512 × 256 fp16 = 256 KB (above the 64 KB threshold, first axis
    divisible by the replicas) would be sharded otherwise; MindSpore keeps its gradient
    AllReduce, so stage 0's inserted gradient AllReduces carry at least its 262144 bytes."""
    pytest.importorskip("mindformers")
    from smsg_ms.planner import plan_network_pipelined

    micro = 4
    plan = plan_network_pipelined("mf-llama", 8, global_batch=8, stages=stages,
                                  micro_batches=micro, layers=layers, optimizer_sharding=True,
                                  **MF_NET)
    assert plan.pipeline["optimizer_sharding"] is True
    assert "model.tok_embeddings.embedding_weight" not in plan.pipeline["optimizer_sharded"]
    assert list(plan.pipeline["stage_of_block"]) == [f"model.layers.{i}" for i in range(layers)]
    assert list(plan.pipeline["stage_of_block"].values()) == list(range(stages))
    shape = plan.pipeline["boundary_shape"]
    assert shape[-1] == MF_NET["hidden"] and plan.pipeline["boundary_dtype"] == "float16"
    report = check_plan(plan, ranks_per_stage(8, stages))
    for r in report.ranks:
        assert r.error is None, r.error
        assert all(row.ok for row in r.p2p), r.p2p
        neighbours = (r.stage > 0) + (r.stage < stages - 1)
        assert sum(row.inserted for row in r.p2p) == 2 * micro * neighbours
        assert {row.key[2] for row in r.p2p} == {tuple(shape)}
        assert r.rows and all(row.ok for row in r.rows), [row for row in r.rows if not row.ok]
        if r.stage == 0:
            sync = [row for row in r.rows if row.key[:2] == ("AllReduce", "grad_sync")]
            assert sum(row.inserted_bytes for row in sync) >= 512 * 256 * 2
    assert report.ok


def test_capture_records_parallel_optimizer(captured):
    """The flag as the networks set it: mindformers' embedding ``False``, the built-in LLaMA's
    weights MindSpore's default ``True``; the graph JSON names it only when ``False``, and a
    graph written without it reads ``True``."""
    pytest.importorskip("mindformers")
    from smsg_ms.graph.model import OpGraph

    mf = captured("mf-llama", layers=2, batch=1, **MF_NET)
    assert mf.tensors["model.tok_embeddings.embedding_weight"].parallel_optimizer is False
    assert mf.tensors["lm_head.weight"].parallel_optimizer is True
    own = captured("llama", layers=2, batch=2, **{k: MF_NET[k] for k in ("seq", "hidden",
                                                                         "heads", "ffn",
                                                                         "vocab")})
    assert all(t.parallel_optimizer for t in own.parameters())
    data = mf.to_dict()
    flagged = {t["name"] for t in data["tensors"] if "parallel_optimizer" in t}
    assert flagged == {t.name for t in mf.parameters() if not t.parallel_optimizer}
    for t in data["tensors"]:
        t.pop("parallel_optimizer", None)
    assert all(t.parallel_optimizer for t in OpGraph.from_dict(data).parameters())


# ---- one stage, gradient accumulation -----------------------------------------------------------
GA_NET = {"layers": 2, "seq": 64, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 256}


def test_gradient_accumulation_one_stage_matches_mindspore():
    """``p = 1`` with 4 micro-batches is written back as ``GradAccumulation(net, 4)`` under
    ``build_train_network``; MindSpore unrolls the micro-batch loop, so each forward/backward
    collective of the plan appears 4 times, while gradient synchronisation (and optimizer
    sharding's AllGather/ReduceScatter) happens once per step: derived, 5 norm weights (two per
    block and the final one, 512 B, below the 64 KB threshold) keep one AllReduce each."""
    from smsg_ms.planner import plan_network_pipelined

    m = 4
    plan = plan_network_pipelined("llama", 8, global_batch=8, stages=1, micro_batches=m,
                                  optimizer_sharding=True, **GA_NET)
    rec = plan.pipeline
    # the options hold the global batch 8, the graph is built for 8 / m = 2
    assert (rec["stages"], rec["micro_batches"], plan.options["batch"]) == (1, m, 8)
    assert plan.build_options()["batch"] == 2
    assert rec["bubble_fraction"] == 0
    report = check_plan(plan, [0])
    (rank,) = report.ranks
    assert rank.error is None, rank.error
    assert all(row.ok for row in rank.rows), [row for row in rank.rows if not row.ok]
    got = {row.key: row.inserted for row in rank.rows if row.planned}
    assert got[("AllReduce", "grad_sync", 8)] == 5
    per_micro = sum(1 for d in plan.decisions for c in d.collectives
                    if c["phase"] == "forward" and not c.get("loss"))
    sharded = len(rec["optimizer_sharded"])
    assert sum(n for k, n in got.items() if k[1] == "forward") == m * per_micro + sharded


def test_gradient_accumulation_when_the_batch_does_not_fit(capture_of):
    """Derived: one micro-batch of ``b/m`` samples stores ``1/m`` of the activations, so with a
    memory limit between the 2-micro-batch and the whole-batch need (recompute and optimizer
    sharding off, so the whole batch has no other way to shrink), one stage must accumulate
    (``m >= 2``) and fit; without a limit the whole batch (``m = 1``) is never slower."""
    from smsg_ms.planner import plan_network_pipelined

    net = dict(GA_NET, seq=256)
    opts = dict(net, optimizer_sharding=False, recompute=False,
                capture=capture_of("llama", **net))       # the three plans share the captures
    whole = plan_network_pipelined("llama", 8, global_batch=16, stages=1, **opts)
    two = plan_network_pipelined("llama", 8, global_batch=16, stages=1, micro_batches=2, **opts)
    assert whole.pipeline["micro_batches"] == 1 and two.pipeline["micro_batches"] == 2
    need_whole = whole.pipeline["stage_memory_bytes"][0]
    need_two = two.pipeline["stage_memory_bytes"][0]
    assert need_two < need_whole
    assert whole.pipeline["step_seconds"] <= two.pipeline["step_seconds"]
    limit = (need_two + need_whole) / 2
    tight = plan_network_pipelined("llama", 8, global_batch=16, stages=1,
                                   memory_gib=limit / 2**30, **opts)
    assert tight.pipeline["micro_batches"] >= 2
    assert tight.pipeline["stage_memory_bytes"][0] <= limit


# ---- what optimizer sharding slices: MindSpore's compiled parameter shapes -------------------
def test_optimizer_sharding_memory_matches_compiled_parameter_shapes(checked):
    """Stage 0 of the 2-stage plan above, compiled by MindSpore: per weight, the elements one
    device holds of the weight itself, of its optimizer state (Momentum's ``moments.*``) and of
    its gradient accumulator (``accu_grads.*``) are read off the compiled parameters; the memory
    model (:func:`smsg_ms.cost.pipeline.parameter_memory` with one byte per element of one kind)
    must give the same counts for the planner's parameter slices. Observed: a sharded weight and
    its moments hold 1/r of the operator-level slice, the accumulator the whole slice."""
    from math import prod

    from smsg_ms.cost.pipeline import parameter_memory
    from smsg_ms.integration.check import plan_compile_job
    from smsg_ms.dryrun.runner import run_child
    from smsg_ms.planner.stage_costs import StageCosts
    from smsg_ms.planner.stages import parameter_slices

    plan, _ = checked(8, 2)
    out = run_child(plan_compile_job(plan), devices=8, rank=0)
    compiled = {p["name"]: prod(p["shape"]) for p in out["parameters"]}
    on_stage = sorted(p["name"] for p in out["parameters"]
                      if "slice_shape" in p
                      and not p["name"].startswith(("moments.", "accu_grads.")))
    rec = plan.pipeline
    costs = StageCosts("llama", "ascend910b", **dict(NET, batch=rec["micro_batch_size"]))
    slices = parameter_slices(costs.solution(rec["devices_per_stage"], rec["micro_batch_size"]))
    assert len(on_stage) == 2 * BLOCK_SHARDED + 2 * BLOCK_NORMS + 1     # 2 blocks + embedding
    kinds = ("parameter", "optimizer", "gradient")
    sharded = 0
    for name in on_stage:
        _, prm = slices[name]
        want = {k: parameter_memory([prm], True, {x: float(x == k) for x in kinds})[k]
                for k in kinds}
        got = {"parameter": compiled[name], "optimizer": compiled["moments." + name],
               "gradient": compiled["accu_grads." + name]}
        assert want == got, name
        sharded += got["parameter"] < got["gradient"]
    assert sharded == 2 * BLOCK_SHARDED + 1
