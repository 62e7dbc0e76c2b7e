"""``--mindformers-config``: the pretrain YAMLs the mindformers 1.9.0 wheel ships (``configs/`` in
site-packages) planned, written back, priced and refused through the CLI, in subprocesses.

One dense YAML (Qwen3-32B) end to end at reduced depth and width: plan (the plan file, the
strategy checkpoint at the YAML's full 64 layers, the planned YAML), ``check`` of the plan by
MindSpore's compiler, and ``score`` of the YAML's own configuration. The refusals need no
compile. The MoE YAMLs: ``tests/test_mindformers_moe.py``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from integration_support import mindformers_configs

CONFIGS = mindformers_configs()
pytestmark = pytest.mark.skipif(CONFIGS is None,
                                reason="mindformers 1.9.0 wheel with its configs/ not installed")

QWEN3 = "qwen3/pretrain_qwen3_32b_4k.yaml"
#: reduced widths the CPU dry-run captures in seconds (heads / KV heads keep Qwen3's 8:1 → 2:1)
SMALL = ["--hidden", "512", "--heads", "8", "--kv-heads", "4", "--ffn", "1024", "--vocab", "4096",
         "--seq", "256"]


def smsg(*args, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "smsg_ms.cli", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """``plan --mindformers-config`` of Qwen3-32B on 8 devices at 2 layers, global batch 8."""
    folder = tmp_path_factory.mktemp("mfrun")
    out = folder / "qwen3.plan.json"
    proc = smsg("plan", "--mindformers-config", CONFIGS / QWEN3, "--devices", 8, "--layers", 2,
                "--batch", 8, *SMALL, "--out", out, "--json", cwd=folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder, out, json.loads(proc.stdout)


def test_plan_writes_plan_checkpoint_and_yaml(planned):
    folder, out, result = planned
    original = yaml.safe_load((CONFIGS / QWEN3).read_text())
    ckpt, run = folder / "qwen3.strategy.json", folder / "qwen3.yaml"
    assert out.is_file() and ckpt.is_file() and run.is_file()
    assert result["mindformers"]["yaml"] == str(run)
    written = yaml.safe_load(run.read_text())
    # the user's other keys are kept as they were
    assert set(written) >= set(original)
    for key in ("optimizer", "lr_schedule", "train_dataset", "callbacks", "context", "trainer"):
        assert written[key] == original[key], key
    model = written["model"]["model_config"]
    assert model["num_hidden_layers"] == 64 and model["hidden_size"] == 5120
    par = written["parallel_config"]
    # mindformers runs dp·mp·pp = the device count, mp dividing the written model's heads (64)
    # and KV heads (8): the YAML keeps Qwen3-32B's widths, the reduced ones were for the capture
    assert par["data_parallel"] * par["model_parallel"] * par["pipeline_stage"] == 8
    assert 64 % par["model_parallel"] == 0 and 8 % par["model_parallel"] == 0
    # one stage planned: the YAML's per-stage offsets [-1, -1, 1, 1] (4 stages) no longer fit
    assert par["pipeline_stage"] == 1 and model["offset"] == 0
    # mindformers' global batch (runner batch_size · dp · micro_batch_num) is the 8 planned
    assert written["runner_config"]["batch_size"] * par["data_parallel"] * \
        par["micro_batch_num"] == 8
    section = written["parallel"]
    assert section["strategy_ckpt_config"]["load_file"] == str(ckpt)
    assert section["strategy_ckpt_config"]["save_file"] == "./ckpt_strategy.ckpt"
    assert all(row[0] == par["data_parallel"] for row in section["dataset_strategy"])
    # the checkpoint names every one of the YAML's 64 layers, though 2 were captured
    items = json.loads(ckpt.read_text())["parallel_strategy_item"]
    layers = {int(m.group(1)) for k in items for m in [re.search(r"\.layers\.(\d+)\.", k)] if m}
    assert layers == set(range(64))


def test_check_compiles_the_plan(planned):
    folder, out, _ = planned
    proc = smsg("check", out, "--json", cwd=folder)
    report = json.loads(proc.stdout)
    # MindSpore's compiler accepts every strategy (collective counts may still differ: the
    # mindformers Morph layers keep their own layouts, docs/networks.md)
    assert [r["error"] for r in report["ranks"]] == [None], proc.stderr[-1000:]
    assert report["ranks"][0]["collectives"]


def test_score_prices_the_yaml_configuration(tmp_path):
    proc = smsg("score", "--mindformers-config", CONFIGS / QWEN3, "--layers", 4, *SMALL, "--json",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    # by hand from the YAML: data_parallel 1, model_parallel 4, pipeline_stage 4, batch_size 1,
    # micro_batch_num 4 → global batch 1·1·4 = 4; recompute True; no optimizer sharding
    assert result["config"] == ("dp=1,tp=4,pp=4,micro_batch=1,global_batch=4,recompute=true,"
                                "optimizer_shard=false")
    assert result["micro_batches"] == 4 and result["devices_per_stage"] == 4
    assert result["step_seconds"] > 0 and result["memory_bytes"] > 0


def _one_line_error(proc) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smsg-ms: error:"), proc.stderr[-1000:]
    return lines[0]


def test_template_without_model_folder_refused(tmp_path):
    line = _one_line_error(smsg("plan", "--mindformers-config",
                                CONFIGS / "general/llm_pretrain_dense_template.yaml",
                                cwd=tmp_path))
    assert "pretrained_model_dir" in line


def test_score_refuses_context_parallel(tmp_path):
    data = yaml.safe_load((CONFIGS / QWEN3).read_text())
    data["parallel_config"]["context_parallel"] = 2
    path = tmp_path / "cp.yaml"
    path.write_text(yaml.safe_dump(data))
    line = _one_line_error(smsg("score", "--mindformers-config", path, cwd=tmp_path))
    assert "parallel_config.context_parallel" in line


def test_score_refuses_partial_recompute(tmp_path):
    # TeleChat3-36B recomputes [[14, 14], [14, 14]] = 56 of its 64 layers
    line = _one_line_error(smsg("score", "--mindformers-config",
                                CONFIGS / "telechat3/pretrain_telechat3_36b.yaml", cwd=tmp_path))
    assert "recompute_config.recompute" in line and "56 of 64" in line


def _plan(devices: int, stages: int, micro: int, global_batch: int, dp_cut: int):
    """A plan record as the pipelined planner writes it (no decisions: the settings read only
    its pipeline record and dataset strategy)."""
    from smsg_ms.plan import Plan

    pipeline = ({"stages": stages, "micro_batches": micro, "global_batch": global_batch}
                if stages > 1 else None)
    return Plan(network="smsg_ms.networks.mf_run", fingerprint="", devices=devices,
                options={"batch": global_batch}, input_shapes=[], hardware="ascend910b",
                decisions=[], dataset_strategy=[[dp_cut, 1]], pipeline=pipeline)


def test_data_parallel_divides_the_micro_batch():
    """mindformers' ``runner_config.batch_size`` is the micro-batch's samples per data-parallel
    replica: ``data_parallel`` must divide them. By hand: 16 devices, 2 stages → 8 per stage;
    global batch 4 in 2 micro-batches → 2 samples each, so ``dp ∈ {1, 2}`` and ``mp ∈ {8, 4}``.
    With 8 heads and 4 KV heads ``mp = 4`` divides both: dp 2, batch_size 4 / (2·2) = 1. With 2
    KV heads neither 8 nor 4 divides 2 (``mp = 2`` would need ``dp = 4`` > 2 samples): refused,
    one line naming the samples and the heads."""
    from smsg_ms.integration.mindformers_run import run_settings
    from smsg_ms.integration.plan_io import PlanError

    plan = _plan(16, 2, 2, 4, 1)
    settings = run_settings(plan, {"num_attention_heads": 8, "num_key_value_heads": 4})
    par = settings["parallel_config"]
    assert (par["data_parallel"], par["model_parallel"], settings["batch_size"]) == (2, 4, 1)
    with pytest.raises(PlanError) as err:
        run_settings(plan, {"num_attention_heads": 8, "num_key_value_heads": 2})
    message = str(err.value)
    assert "\n" not in message
    assert "micro-batch's 2 samples" in message and "8 heads and 2 KV heads" in message


MINDFORMERS_STAGES = r"""
import json, sys
from types import SimpleNamespace
from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting
out = []
for layers, stages, offset in json.loads(sys.argv[1]):
    config = SimpleNamespace(pipeline_stage=stages, swap=SimpleNamespace(swap=False),
                             recompute=False, gradient_aggregation_group=4)
    try:
        out.append([int(s) for s in LayerSetting(layers, offset, config).pp_ids])
    except ValueError as exc:
        out.append(str(exc))
print(json.dumps(out))
"""


def test_layers_not_a_multiple_of_the_stages_get_offsets(tmp_path):
    """The planned YAML's ``model_config.offset`` for layers the stages do not divide, checked
    by mindformers' own ``LayerSetting`` (``parallel_core/training_graph/transformer/utils.py``,
    in a subprocess): it accepts the offset written and places each layer on the stage the
    strategy checkpoint names. The YAML's own offset is kept when the stage count is; 0 (what
    the YAMLs ship for divisible layers) is what mindformers refuses for 61 layers on 8 stages."""
    from smsg_ms.integration.mf_offsets import stage_of_layers, stage_offsets
    from smsg_ms.integration.mindformers_run import planned_run

    data = yaml.safe_load((CONFIGS / "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml").read_text())
    model = data["model"]["model_config"]
    model.update(num_hidden_layers=61, num_attention_heads=8, num_key_value_heads=8)
    written = planned_run(data, _plan(16, 8, 8, 8, 1), model, str(tmp_path / "s.json"))
    offset = written["model"]["model_config"]["offset"]
    assert isinstance(offset, list) and len(offset) == 8 and sum(offset) == 61 % 8
    cases = [(61, 8, offset), (15, 4, stage_offsets(15, 4)), (64, 4, [-1, -1, 1, 1]),
             (16, 16, stage_offsets(16, 16)), (61, 8, 0)]
    proc = subprocess.run([sys.executable, "-c", MINDFORMERS_STAGES, json.dumps(cases)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    *accepted, refused = json.loads(proc.stdout.strip().splitlines()[-1])
    for (layers, stages, off), theirs in zip(cases, accepted):
        assert theirs == stage_of_layers(layers, stages, off), (layers, stages, off)
    assert "sum of `offset`" in refused
    # the stage count kept: the YAML's own (valid) offset stays
    qwen = yaml.safe_load((CONFIGS / QWEN3).read_text())
    kept = planned_run(qwen, _plan(16, 4, 4, 8, 1), {**qwen["model"]["model_config"],
                                                     "num_key_value_heads": 8},
                       str(tmp_path / "q.json"))
    assert kept["model"]["model_config"]["offset"] == [-1, -1, 1, 1]


def test_yaml_batch_below_the_stage_devices_is_planned(tmp_path):
    """Qwen3-32B's YAML: batch_size 1 · data_parallel 1 · micro_batch_num 4 = global batch 4
    (pipeline_stage 4), planned on 8 devices in one stage. mindformers builds its layouts with
    ``data_parallel = gcd(8, 4) = 4`` and ``model_parallel = 8 / 4 = 2`` (``mf_run.build``),
    so the plan cuts the batch 4-way (dataset strategy) and writes dp 4 · mp 2 = 8; MindSpore's
    compiler accepts the plan (``check``: no rank rejected; before, the loss's OneHotExt kept
    mindformers' (4, 2) beside a (8, 1) log-softmax and the hand-written backward of
    ``_NLLLoss`` failed: "For 'Sub', input1.shape and input2.shape need to broadcast")."""
    out = tmp_path / "q.plan.json"
    proc = smsg("plan", "--mindformers-config", CONFIGS / QWEN3, "--devices", 8, "--layers", 2,
                *SMALL, "--out", out, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["dataset_strategy"][0] == [4, 1]
    par = result["mindformers"]["settings"]["parallel_config"]
    assert (par["data_parallel"], par["model_parallel"], par["pipeline_stage"]) == (4, 2, 1)
    assert result["mindformers"]["settings"]["batch_size"] == 1
    plan = json.loads(out.read_text())
    onehot = [d for d in plan["decisions"] if d["op_type"] == "OneHotExt"]
    assert onehot and onehot[0]["strategy"] is not None
    proc = smsg("check", out, "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert [r["error"] for r in report["ranks"]] == [None], proc.stderr[-1000:]


def test_fitted_device_matrix_takes_the_batch():
    """By hand, as ``mf_run.build`` sets ``parallel_config``: dp = gcd(devices, batch), the
    rest on ``tp``; without a ``tp`` axis the rest has nowhere to go."""
    from smsg_ms.cost.kept_layout import fitted_device_matrix

    names = ("dp", "cp", "tp")
    assert fitted_device_matrix((1, 1, 1), 8, {0, 2}, names) == (8, 1, 1)
    assert fitted_device_matrix((1, 1, 1), 8, {0, 2}, names, batch=16) == (8, 1, 1)
    assert fitted_device_matrix((1, 1, 1), 8, {0, 2}, names, batch=4) == (4, 1, 2)
    assert fitted_device_matrix((1, 1, 1), 8, {0, 2}, names, batch=6) == (2, 1, 4)
    assert fitted_device_matrix((1, 1, 1), 8, {0, 2}, names, batch=3) == (1, 1, 8)
    assert fitted_device_matrix((1, 1), 8, {0}, ("dp", "cp"), batch=4) is None


MINDFORMERS_FLASH = r"""
import json, sys
import mindspore as ms
dp, tp, cp, heads = json.loads(sys.argv[1])
ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=dp * tp * cp)
from mindformers.parallel_core.transformer_config import TransformerConfig
from mindformers.parallel_core.training_graph.device_matrix import layout
from mindformers.parallel_core.training_graph.transformer.flash_attention import FlashAttention
cfg = TransformerConfig(num_layers=1, hidden_size=64 * heads, num_attention_heads=heads,
                        data_parallel_size=dp, tensor_model_parallel_size=tp,
                        context_parallel_size=cp, use_flash_attention=True, seq_length=256)
layout.init_layout(cfg)
prim = FlashAttention(cfg, layer_number=1).flash_attention
cuts = []
for lay in prim.attrs["in_layout"][:3]:
    dm, n = lay["device_matrix"], len(lay["device_matrix"])
    cuts.append([dm[n - 1 - e] if e >= 0 else 1 for e in lay["tensor_map"]])
print(json.dumps({"layout": cfg.input_layout, "cuts": cuts}))
"""


def _flash_plan(cuts: list, layout: str = "BNSD"):
    """A one-stage plan on 8 devices, batch 4, whose flash attentions (one per cut list:
    query, key, value strategies) are ops of a small hand-made graph with ``input_layout``."""
    from smsg_ms.graph.model import OpGraph, OpNode
    from smsg_ms.plan import OpDecision

    plan = _plan(8, 1, 1, 4, cuts[0][0][0])
    ops = []
    for i, strategy in enumerate(cuts):
        name = f"model.decoder.layers.{i}.core_attention.flash_attention"
        ops.append(OpNode(i, "FlashAttentionScore", ["q", "k", "v"], [f"o{i}"],
                          {"input_layout": layout}, prim_path=name))
        plan.decisions.append(OpDecision(name, "FlashAttentionScore", strategy))
    return plan, OpGraph(ops=ops, tensors={}, inputs=[], outputs=[])


def test_context_parallel_written_as_mindformers_builds_it(tmp_path):
    """A plan cutting the flash attention's query sequence (S1) 2-way (BNSD query ``(2, 2, 2,
    1)``: batch, heads, S1; keys and values whole on their sequence ``(2, 2, 1, 1)``) on 8
    devices is written as ``context_parallel 2`` with ``data_parallel 2 · model_parallel 2``
    (2·2·2 = 8) and ``context_parallel_algo colossalai_cp``. Independent check: mindformers'
    own ``FlashAttention`` built from those sizes (in a subprocess) cuts its query and keys as
    the plan does (mindformers switches to BSH at cp > 1: query ``(dp, cp, tp)`` = (B, S, N)
    cuts, keys ``(dp, 1, tp)``)."""
    from smsg_ms.integration.mindformers_run import planned_run, run_settings

    q, kv = [2, 2, 2, 1], [2, 2, 1, 1]
    plan, graph = _flash_plan([[q, kv, kv], [q, kv, kv]])
    model = {"num_attention_heads": 8, "num_key_value_heads": 8, "use_flash_attention": True}
    par = run_settings(plan, model, graph)["parallel_config"]
    assert (par["data_parallel"], par["model_parallel"], par["context_parallel"]) == (2, 2, 2)
    assert par["context_parallel_algo"] == "colossalai_cp"
    # without the graph (no input_layout to read) nothing is claimed: context_parallel 1
    assert run_settings(plan, model)["parallel_config"]["context_parallel"] == 1
    data = yaml.safe_load((CONFIGS / QWEN3).read_text())
    written = planned_run(data, plan, {**data["model"]["model_config"], **model},
                          str(tmp_path / "s.json"), graph)
    assert written["parallel_config"]["context_parallel"] == 2
    proc = subprocess.run([sys.executable, "-c", MINDFORMERS_FLASH,
                           json.dumps([par["data_parallel"], par["model_parallel"],
                                       par["context_parallel"], 8])],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["layout"] == "BSH"
    bsh = lambda c: [c[0], c[2], c[1]]     # BNSD cuts (B, N, S, D) as BSH's (B, S, N·D)
    assert theirs["cuts"] == [bsh(q), bsh(kv), bsh(kv)]


def test_context_parallel_refusals():
    """mindformers has one ``context_parallel`` for every layer, only with flash attention,
    and this export writes no ring attention (keys cut on their sequence): each refused in
    one line."""
    from smsg_ms.integration.mindformers_run import run_settings
    from smsg_ms.integration.plan_io import PlanError

    model = {"num_attention_heads": 8, "num_key_value_heads": 8, "use_flash_attention": True}
    kv = [2, 2, 1, 1]
    cases = [([[[2, 2, 2, 1], kv, kv], [[2, 4, 1, 1], kv, kv]], model, "unequally"),
             ([[[2, 2, 2, 1], kv, kv]], {**model, "use_flash_attention": False},
              "use_flash_attention"),
             ([[[2, 2, 2, 1], [2, 2, 2, 1], [2, 2, 2, 1]]], model, "ring attention")]
    for cuts, config, words in cases:
        plan, graph = _flash_plan(cuts)
        with pytest.raises(PlanError) as err:
            run_settings(plan, config, graph)
        assert words in str(err.value) and "\n" not in str(err.value)
