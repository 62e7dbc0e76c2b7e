"""``--mindformers-config`` on a mixture-of-experts YAML of the mindformers 1.9.0 wheel
(Qwen3-30B-A3B, ``configs/qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml``), through the CLI in
subprocesses, at one layer and reduced widths (the experts keep the YAML's 128 experts, top-8,
``moe_intermediate_size`` 768).

One plan (4 devices, shared), its ``check`` by MindSpore's compiler (the AlltoAllV calls of
mindformers' dispatcher against the plan's prediction, the expert weights' gradient sync), and
``score`` of the YAML's own ``expert_parallel``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from integration_support import mindformers_configs

CONFIGS = mindformers_configs()
pytestmark = pytest.mark.skipif(CONFIGS is None,
                                reason="mindformers 1.9.0 wheel with its configs/ not installed")

MOE = "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml"
SMALL = ["--layers", "1", "--hidden", "512", "--heads", "8", "--kv-heads", "4", "--ffn", "1024",
         "--vocab", "4096", "--seq", "256"]
#: elements of one layer's expert weights, from the YAML: weight1 (E·h, 2F) and weight2 (E·F, h)
#: with E = 128 experts, h = 512 (--hidden), F = moe_intermediate_size 768 (gated: 2F)
EXPERT_ELEMENTS = 128 * 512 * 2 * 768 + 128 * 768 * 512


def smsg(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smsg_ms.cli", *map(str, args)], cwd=cwd,
                          env=dict(os.environ), capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """``plan --mindformers-config`` of Qwen3-30B-A3B on 4 devices, one layer, batch 4."""
    folder = tmp_path_factory.mktemp("mfmoe")
    out = folder / "moe.plan.json"
    proc = smsg("plan", "--mindformers-config", CONFIGS / MOE, "--devices", 4, "--batch", 4,
                *SMALL, "--out", out, "--json", cwd=folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder, out, json.loads(proc.stdout)


def test_plan_writes_expert_parallel(planned):
    folder, _, result = planned
    written = yaml.safe_load((folder / "moe.yaml").read_text())
    par = written["parallel_config"]
    # By hand: one layer's experts hold 150,994,944 fp32 weights (604 MB). At ep = 1 every one
    # of the 4 devices keeps them all and AllReduces their 604 MB gradient each step; at ep = 4
    # each keeps 1/4 and there is no gradient to reduce (d/ep = 1 replica), for AlltoAlls of the
    # routed rows (4·256 tokens · top-8 · 512 · 2 bytes = 8 MiB in all, 3/4 of a device's
    # quarter leaving it): ep = 4, the most the 4 devices and 128 experts allow, wins by far.
    assert par["expert_parallel"] == 4
    assert result["mindformers"]["settings"]["parallel_config"]["expert_parallel"] == 4
    assert par["data_parallel"] * par["model_parallel"] == 4
    # mindformers' MoELayer refuses model_parallel > 1 without sequence parallelism
    assert par["use_seq_parallel"] or par["model_parallel"] == 1
    # ep = 4 takes 3/4 of the experts' fp32 weight, gradient and two Adam states (4 + 4 + 2·4
    # bytes per element) off each device
    assert result["totals"]["expert_memory_bytes"] == -0.75 * EXPERT_ELEMENTS * 16


def test_check_finds_the_predicted_alltoalls(planned):
    folder, out, result = planned
    proc = smsg("check", out, "--json", cwd=folder)
    report = json.loads(proc.stdout)
    rank = report["ranks"][0]
    assert rank["error"] is None, proc.stderr[-1000:]
    rows = rank["collectives"]
    # the dispatcher's AlltoAllV (its group is mindformers' own, so the reader knows no size):
    # as many per pass as the plan predicts from the captured layer
    for phase in ("forward", "backward"):
        got = sum(r["inserted"] for r in rows
                  if r["collective"] == "AlltoAllV" and r["phase"] == phase)
        assert got == result["totals"][f"expert_alltoall_{phase}"], (phase, rows)
    # ep = 4 on 4 devices leaves each expert slice on one device: no gradient AllReduce moves
    # the 604 MB of expert weights (ep = 1 would synchronise all of them)
    synced = sum(r["inserted_bytes"] for r in rows if r["phase"] == "grad_sync")
    assert synced < EXPERT_ELEMENTS * 4 / 4, rows
    # and the plan's per-operator predictions say the same as MindSpore's compiled graph: the
    # gradient AllReduces (the dense weights' only) and the dispatcher's AlltoAllV, count and
    # bytes, are rows the check finds equal
    for key in (("AllReduce", "grad_sync"), ("AlltoAllV", "forward"), ("AlltoAllV", "backward")):
        row = next(r for r in rows if (r["collective"], r["phase"]) == key)
        assert row["ok"], (key, rows)


def test_expert_sync_is_priced_as_the_planner_prices_it(planned):
    _, out, result = planned
    plan = json.loads(out.read_text())
    totals = plan["totals"]
    experts = [d for d in plan["decisions"] if d["op_type"] == "GroupedMatmul"]
    assert experts
    # ep = 4 = d: no expert gradient is synchronised, so neither operator predicts one, and the
    # time it was charged at ep = 1 (its exposed part) is what the step lost: the plan's
    # gradient-sync total stays the sum of its decisions' and is not driven below zero
    for d in experts:
        assert not [c for c in d["collectives"] if c["phase"] == "grad_sync"], d["collectives"]
        assert d["breakdown"]["grad_sync"] == pytest.approx(0.0, abs=1e-12)
    assert totals["grad_sync"] == pytest.approx(
        sum(d["breakdown"].get("grad_sync", 0.0) for d in plan["decisions"]), rel=1e-9)
    assert 0.0 <= totals["grad_sync"] and totals["expert_grad_sync_seconds"] < 0.0


def test_score_prices_the_yaml_expert_parallel(tmp_path):
    # the YAML's own layout on one stage (dp 1, mp 4, ep 4; pipeline and micro-batches off so
    # one layer is the stage)
    data = yaml.safe_load((CONFIGS / MOE).read_text())
    data["parallel_config"].update(pipeline_stage=1, micro_batch_num=1)
    path = tmp_path / "moe1.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = smsg("score", "--mindformers-config", path, *SMALL, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["expert_parallel"] == 4
    # by hand: ep = 4 keeps 1/4 of the experts' fp32 weight, gradient and two Adam states
    # (4 + 4 + 2·4 bytes per element) on each device: −3/4 · 150,994,944 · 16 B = −1728.0 MiB
    note = next(n for n in result["notes"] if n.startswith("expert_parallel = 4"))
    assert "memory -1728.0 MiB" in note, note


def test_expert_row_counts_the_alltoallv_of_mindformers_groups(tmp_path):
    """The expert row of ``compare --mindformers-config`` compiles the YAML's own layout
    (``data_parallel 1 · model_parallel 4`` on 4 devices, ``expert_parallel 4``). MindSpore
    inserts mindformers' AlltoAllV (token dispatch and combine) and its sequence-parallel
    ReduceScatter/AllGather in groups mindformers creates itself (hashed names, no ranks in the
    compiled graph); they were read with group size 0 and dropped from the row's bytes, which
    left only the router's and loss's small AllReduces (tens of KiB) as its forward
    communication. Sized by MindSpore's communication layer they count. By hand (seq 256,
    global batch 16 from the YAML, 4-way sequence parallel → 1024 tokens per device, top-k 8,
    hidden 512): each token buffer 1024·8·512 bf16 = 8 MiB, the routing ids 1024·8 float32
    = 32 KiB; two buffers and the ids forward, two buffers backward, all in the ep = 4 group."""
    from smsg_ms.compare.measures import collective_bytes
    from smsg_ms.compare.runner import _compile

    options = {"run_config": str(CONFIGS / MOE), "batch": 16, "layers": 1, "hidden": 512,
               "heads": 8, "kv_heads": 4, "ffn": 1024, "vocab": 4096, "seq": 256,
               "data_parallel": 1, "model_parallel": 4}
    result = _compile("smsg_ms.networks.mf_run:build_expert", 4, "expert", options,
                      timeout=600)
    calls = [c for c in result["collectives"] if c["type"] == "AlltoAllV"]
    assert sorted((c["pass"], c["in_shape"][0]) for c in calls) == [
        ("backward", 1024 * 8 * 512)] * 2 + [("forward", 1024 * 8)] + [
        ("forward", 1024 * 8 * 512)] * 2
    assert {c["group_size"] for c in calls} == {0}      # check keys them as own_group
    assert {c["named_group_size"] for c in calls} == {4}
    sent = collective_bytes(result["collectives"])
    buffer = 1024 * 8 * 512 * 2
    assert sent["forward"]["AlltoAllV"] == 2 * buffer + 1024 * 8 * 4
    assert sent["backward"]["AlltoAllV"] == 2 * buffer
