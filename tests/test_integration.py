"""Write-back: apply_plan, the smsg search mode, the AutoParallel wrapper, msrun-style ranks and
the strategy checkpoint export; MindSpore's parallel compiler (dry-run) is the oracle."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integration_support import MLP_OPTIONS, data_parallel_plan
from smsg_ms.devices import DeviceCountError
from smsg_ms.dryrun.runner import run_child
from smsg_ms.dryrun.toolchain import ensure_toolchain
from smsg_ms.integration.plan_io import PlanError, save_plan
from smsg_ms.plan import OpDecision, Plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "scripts" / "msrun_example.py"
#: Megatron MLP split (shared/docs/mindspore-dryrun.md): fc1 columns cut, fc2 reduction dim cut;
#: neither is MindSpore's default (batch-parallel) strategy, so seeing them proves the write-back.
MEGATRON = {"fc1.matmul": [[2, 1], [4, 1]], "fc2.matmul": [[2, 4], [1, 4]]}


@pytest.fixture(scope="module")
def mlp_graph(captured):
    return captured("mlp", **MLP_OPTIONS)


@pytest.fixture(scope="module")
def megatron_plan_file(mlp_graph, tmp_path_factory):
    plan = data_parallel_plan(mlp_graph, 8, "mlp", MLP_OPTIONS)
    for d in plan.decisions:
        if d.name in MEGATRON:
            d.strategy = MEGATRON[d.name]
    path = tmp_path_factory.mktemp("plans") / "mlp-megatron.json"
    save_plan(plan.seal(), path)
    return path


def run_rank(args: list[str], devices: int, rank: int) -> subprocess.CompletedProcess:
    env = ensure_toolchain().environment(devices, rank)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    return subprocess.run([sys.executable, str(EXAMPLE)] + args, env=env, capture_output=True,
                          text=True, timeout=300)


def used_matmuls(stdout: str) -> dict[str, list]:
    line = next(l for l in stdout.splitlines() if "MindSpore used" in l)
    used = json.loads(line.split("MindSpore used", 1)[1])
    return {k.split("/")[-2].split("-")[0]: v for k, v in used.items()}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_msrun_eight_ranks_load_the_plan_file_and_log_its_hash(megatron_plan_file):
    """msrun itself (scheduler + 8 workers) in the dry-run environment."""
    plan_hash = json.loads(megatron_plan_file.read_text())["content_hash"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--msrun", "8", "--master-port",
                           str(free_port()), "--plan", str(megatron_plan_file)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("rank ")]
    assert [l.split()[1] for l in lines] == [f"{r}:" for r in range(8)]
    assert {l.split()[-1] for l in lines} == {plan_hash}


def test_msrun_eight_ranks_plan_live_through_mindspores_own_set_auto_parallel_context():
    """msrun, 8 workers; each only calls ``mindspore.set_auto_parallel_context(search_mode=
    "smsg")`` after ``import smsg_ms``, plans the network itself, and all logged plans agree."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--msrun", "8", "--master-port",
                           str(free_port()), "--mindspore-api"], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT / "tests")
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("rank ")]
    assert [l.split()[1] for l in lines] == [f"{r}:" for r in range(8)]
    assert len({l.split()[-1] for l in lines}) == 1


@pytest.mark.parametrize("api", ["search_mode", "AutoParallel", "mindspore.set_auto_parallel_"
                                 "context", "mindspore.AutoParallel"])
def test_mindspore_compiles_with_the_planned_strategies(megatron_plan_file, api):
    """smsg_ms's function and wrapper, and MindSpore's own ones after ``import smsg_ms``."""
    flags = {"search_mode": [], "AutoParallel": ["--wrapper"],
             "mindspore.set_auto_parallel_context": ["--mindspore-api"],
             "mindspore.AutoParallel": ["--mindspore-api", "--wrapper"]}[api]
    proc = run_rank(["--plan", str(megatron_plan_file)] + flags, devices=8, rank=5)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if "--mindspore-api" in flags and "--wrapper" not in flags:  # the user's script reads smsg
        assert "search_mode smsg collectives" in proc.stdout
    used = used_matmuls(proc.stdout)
    assert used["fc1"] == MEGATRON["fc1.matmul"] and used["fc2"] == MEGATRON["fc2.matmul"]
    assert used["fc3"] == [[8, 1], [1, 1]]  # the plan's data-parallel choice


def test_plan_for_other_device_count_is_refused_on_the_rank(megatron_plan_file):
    proc = run_rank(["--plan", str(megatron_plan_file)], devices=4, rank=0)
    assert proc.returncode != 0
    assert "made for 8 devices, not 4" in proc.stderr


def test_other_search_modes_pass_through_to_mindspore():
    import mindspore as ms

    import smsg_ms
    from smsg_ms.integration import context

    try:
        for mode in ("recursive_programming", "dynamic_programming", "sharding_propagation"):
            smsg_ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode=mode)
            assert ms.get_auto_parallel_context("search_mode") == mode
            assert ms.get_auto_parallel_context("parallel_mode") == "auto_parallel"
            assert context.smsg_settings() is None
        with pytest.raises(ValueError):  # MindSpore's own validation still applies
            smsg_ms.set_auto_parallel_context(search_mode="no_such_mode")
        smsg_ms.set_auto_parallel_context(parallel_mode="auto_parallel",
                                          auto_parallel_search_mode="smsg", device_num=8)
        assert ms.get_auto_parallel_context("parallel_mode") == "semi_auto_parallel"
        assert context.smsg_settings().devices == 8
        with pytest.raises(DeviceCountError, match="use 4 or 8"):
            smsg_ms.set_auto_parallel_context(search_mode="smsg", device_num=6)
    finally:
        context.uninstall_compile_hook()
        context._settings = None
        ms.reset_auto_parallel_context()


def test_apply_plan_refuses_another_network(tmp_path):
    import mindspore as ms  # noqa: F401

    import smsg_ms
    from smsg_ms.networks import build_network

    net = build_network("mlp", **MLP_OPTIONS).net
    other = Plan(network="llama", fingerprint="0" * 64, devices=8, options={},
                 input_shapes=[[8, 512]], hardware="ascend910b",
                 decisions=[OpDecision("layers.0.attention.wq.matmul", "MatMul", [[8, 1], [1, 1]])])
    save_plan(other, tmp_path / "other.json")
    with pytest.raises(PlanError, match="not in it .*layers.0.attention.wq.matmul"):
        smsg_ms.apply_plan(net, tmp_path / "other.json", devices=8, set_context=False)
    wrong_type = Plan(network="mlp", fingerprint="0" * 64, devices=8, options={},
                      input_shapes=[[64, 64]], hardware="ascend910b",
                      decisions=[OpDecision("fc1.matmul", "BatchMatMul", [[8, 1], [1, 1]])])
    with pytest.raises(PlanError, match="BatchMatMul in the plan but a MatMul"):
        smsg_ms.apply_plan(net, wrong_type.seal(), devices=8, set_context=False)
    with pytest.raises(PlanError, match="made for 8 devices, not 16"):
        smsg_ms.apply_plan(net, wrong_type, devices=16, set_context=False)


def test_strategy_checkpoint_export_is_loaded_by_mindspore(mlp_graph, megatron_plan_file,
                                                            tmp_path):
    from smsg_ms.integration.plan_io import load_plan
    from smsg_ms.integration.strategy_files import write_strategy_ckpt

    ckpt = tmp_path / "strategy.json"
    write_strategy_ckpt(load_plan(megatron_plan_file), mlp_graph, ckpt)
    keys = set(json.loads(ckpt.read_text())["parallel_strategy_item"])
    # MindSpore's key: primitive name + "_" + the parameter it reads (mindspore-notes.md)
    assert {"MatMul_fc1.weight", "MatMul_fc2.weight", "BiasAdd_fc1.bias"} <= keys
    result = run_child({"job": "compile", "spec": "mlp", "options": MLP_OPTIONS,
                        "strategies": {},
                        "context": {"full_batch": True,
                                    "strategy_ckpt_config": {"load_file": str(ckpt)}}},
                       devices=8)
    used = {k.split("/")[-2].split("-")[0]: v for k, v in result["strategies"].items()
            if k.endswith("MatMul-op0")}
    assert used["fc1"] == MEGATRON["fc1.matmul"] and used["fc2"] == MEGATRON["fc2.matmul"]


@pytest.mark.skipif(importlib.util.find_spec("smsg_ms.planner") is None,
                    reason="smsg_ms.planner is not merged yet")
@pytest.mark.parametrize("wrapper", [False, True], ids=["search_mode", "AutoParallel"])
def test_ranks_plan_live_with_the_smsg_planner_and_agree(wrapper):
    """Every rank captures and plans the network itself; the hashes must be equal (8 ranks for
    the search mode, 2 for the wrapper to keep the run short)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    ranks = "2" if wrapper else "8"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--simulate-ranks", ranks]
                          + (["--wrapper"] if wrapper else []), env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT / "tests")
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
    hashes = {l.split()[-1] for l in proc.stdout.splitlines() if l.startswith("rank ")}
    assert len(hashes) == 1
