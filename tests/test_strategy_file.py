"""The strategy file of ``smsg-ms export`` works without smsg-ms: an ordinary MindSpore script
(``scripts/plain_training.py``, which never imports smsg_ms) that loads it compiles, in the
dry-run, to the same collectives as the plan applied by smsg-ms. MindSpore's parallel compiler
is the oracle on both sides."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from integration_support import MLP_OPTIONS, data_parallel_plan
from test_cli import one_line_error, smsg
from test_integration import MEGATRON
from smsg_ms.integration.plan_io import save_plan

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ROOT / "scripts" / "plain_training.py"


@pytest.fixture(scope="module")
def exported(captured, tmp_path_factory):
    """A Megatron-split MLP plan (not MindSpore's default strategies) and its export."""
    plan = data_parallel_plan(captured("mlp", **MLP_OPTIONS), 8, "mlp", MLP_OPTIONS)
    for d in plan.decisions:
        if d.name in MEGATRON:
            d.strategy = MEGATRON[d.name]
    work = tmp_path_factory.mktemp("export")
    save_plan(plan.seal(), work / "plan.json")
    proc = smsg(["export", "plan.json", "mlp.strategy.json"], work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return work, plan.seal(), proc.stdout


def plain_compile(context: dict, devices: int, ir: Path) -> subprocess.CompletedProcess:
    from smsg_ms.dryrun.toolchain import ensure_toolchain

    env = ensure_toolchain().environment(devices, 0)
    env.pop("PYTHONPATH", None)  # the user's script sees MindSpore only
    size = ["--batch", "64", "--d-in", "64", "--hidden", "128", "--d-out", "32"]
    return subprocess.run([sys.executable, str(PLAIN), "--context", json.dumps(context),
                           "--save-ir", str(ir), *size], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ir.parent)


def collective_counts(collectives: list[dict]) -> Counter:
    """What a compiled step communicates: kind, pass, gradient sync or not, group size, shapes
    and dtype of each collective call (not its scope: the two scripts wrap the loss
    differently)."""
    return Counter((c["type"], c["pass"], c["grad_sync"], c["group_size"], tuple(c["in_shape"]),
                    tuple(c["out_shape"]), c["dtype"]) for c in collectives)


def test_plain_mindspore_script_with_the_exported_file_compiles_to_the_plans_collectives(
        exported):
    from mindspore.train import mind_ir_pb2

    from smsg_ms.integration.check import plan_compile_job
    from smsg_ms.dryrun.collectives import collectives_from_model
    from smsg_ms.dryrun.runner import run_child

    work, plan, printed = exported
    line = next(l for l in printed.splitlines() if "set_auto_parallel_context(" in l)
    assert "strategy_ckpt_config={'load_file': 'mlp.strategy.json'}" in line
    assert "full_batch=True" in line   # the plan's data layout, printed for the user
    context = {"parallel_mode": "semi_auto_parallel", "full_batch": True,
               "strategy_ckpt_config": {"load_file": str(work / "mlp.strategy.json")}}
    proc = plain_compile(context, 8, work / "plain.mindir")
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-3000:]
    model = mind_ir_pb2.ModelProto()
    model.ParseFromString((work / "plain.mindir").read_bytes())
    plain = collectives_from_model(model, 8)
    applied = run_child(plan_compile_job(plan), devices=8)["collectives"]
    assert collective_counts(plain) == collective_counts(applied)
    # and they are the Megatron split's, not data parallel's: a forward AllReduce after fc2
    assert any(c["type"] == "AllReduce" and c["pass"] == "forward" for c in plain)


def test_check_compiles_a_strategy_file_for_its_network(exported):
    proc = smsg(["check", "mlp.strategy.json", "--network", "mlp", "--devices", "8", "--batch",
                 "64", "--hidden", "128", "--json"], exported[0])
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["strategies"] == 6  # 3 MatMul + 3 BiasAdd read a Parameter
    # fc2's reduction dimension is cut 4 ways (MEGATRON): its output is summed by an AllReduce
    assert any(c["type"] == "AllReduce" and c["pass"] == "forward" and c["group_size"] == 4
               for c in doc["collectives"])


@pytest.mark.parametrize("args, fragments", [
    # the file records the 8 devices it was exported for: refused on 4 and on 16, although every
    # cut divides 16 (MindSpore would repeat the computation)
    (["--network", "mlp", "--devices", "4", "--batch", "64"],
     ["mlp.strategy.json was written for 8 devices, not --devices 4", "--devices 8"]),
    (["--network", "mlp", "--devices", "16", "--batch", "64"],
     ["mlp.strategy.json was written for 8 devices, not --devices 16", "--devices 8"]),
    # the keys name the MLP's Dense layers, which LLaMA does not have
    (["--network", "llama", "--devices", "8", "--layers", "1", "--seq", "16", "--hidden", "64",
      "--heads", "4", "--ffn", "64", "--vocab", "100"],
     ["is for another network", "6 of 6 strategies", "'llama' does not have",
      "BiasAdd_fc1.bias"]),
    (["--devices", "8"], ["names no network: give --network"]),
])
def test_a_file_for_another_device_count_or_network_is_explained_in_one_line(exported, args,
                                                                               fragments):
    one_line_error(smsg(["check", "mlp.strategy.json", *args], exported[0]), *fragments)


def test_a_file_without_its_device_count_is_refused_by_mindspore(exported):
    """A file that records no device count (an older export): MindSpore's own reason for 8-device
    strategies on 4 devices, and the likely cause."""
    data = json.loads((exported[0] / "mlp.strategy.json").read_text())
    del data["device_num"]
    (exported[0] / "bare.strategy.json").write_text(json.dumps(data))
    one_line_error(smsg(["check", "bare.strategy.json", "--network", "mlp", "--devices", "4",
                         "--batch", "64"], exported[0]),
                   "MindSpore rejects bare.strategy.json for 'mlp' on 4 devices",
                   "requires 8 devices", "exported for another device count")


def test_the_device_count_of_mindspores_own_save_is_its_device_matrix(tmp_path):
    """MindSpore's save carries no device count, but each parameter layout's device matrix
    spans the stage's devices (the repeated-calculation dimension pads it): [2, 4] is 8
    devices; a pipelined save (an item in stage 1) tells only a stage's, so nothing."""
    from smsg_ms.integration.strategy_check import recorded_devices

    layout = {"dev_matrix": [2, 4], "tensor_map": [1, -1], "tensor_shape": [64, 64], "field": 0,
              "opt_weight_shard_step": 0, "opt_weight_shard_size": 0}
    data = {"current_stage": 0,
            "parallel_strategy_item": {"MatMul_w": {"stage": 0, "parallel_strategy": [[4, 1]]}},
            "parallel_layout_item": {"w": layout}}
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(data))
    assert recorded_devices(str(path)) == 8
    data["parallel_strategy_item"]["MatMul_v"] = {"stage": 1, "parallel_strategy": [[4, 1]]}
    path.write_text(json.dumps(data))
    assert recorded_devices(str(path)) is None
