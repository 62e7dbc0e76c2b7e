"""The ``smsg-ms`` commands end to end, in a subprocess on a clean working folder, as a user runs
them: good paths, and one clear line + non-zero exit + no partial file for each bad input."""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from integration_support import MLP_OPTIONS, data_parallel_plan
from smsg_ms.integration.plan_io import save_plan

ROOT = Path(__file__).resolve().parents[1]
HAS_PLANNER = importlib.util.find_spec("smsg_ms.planner") is not None
needs_planner = pytest.mark.skipif(not HAS_PLANNER, reason="smsg_ms.planner is not merged yet")

USER_NETS = '''
def raises(**options):
    raise RuntimeError("boom in user code")


def wider(**options):
    from smsg_ms.networks.mlp import build
    return build(batch=64, d_in=64, hidden=256, d_out=32)
'''


def smsg(args: list[str], cwd: Path, columns: int = 200) -> subprocess.CompletedProcess:
    # ROOT stands for the installed package; the user's module is found in the working folder
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns))
    exe = shutil.which("smsg-ms")
    cmd = [exe] if exe else [sys.executable, "-m", "smsg_ms.cli"]
    return subprocess.run(cmd + args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smsg-ms: error: "), proc.stderr[-2000:]
    for f in fragments:
        assert f in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.fixture()
def work(tmp_path):
    """A clean working folder holding a user network module."""
    (tmp_path / "mynets.py").write_text(USER_NETS)
    return tmp_path


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in ("mynets.py", "__pycache__"))


@pytest.fixture(scope="module")
def plans(captured, tmp_path_factory):
    """Plan files made by hand for the MLP on 8 devices: data parallel with the collectives
    derived in integration_support; the same with fc3's predictions dropped; and one with a
    strategy MindSpore rejects (fc1's column cut 4 != weight's row cut 2)."""
    graph = captured("mlp", **MLP_OPTIONS)
    folder = tmp_path_factory.mktemp("cli-plans")
    good = data_parallel_plan(graph, 8, "mlp", MLP_OPTIONS)
    good.decisions[0].runner_up = {"strategy": [[4, 1], [1, 1]], "extra_seconds": 2.5e-4}
    good.decisions[0].symbolic = "fc1"
    good.symbolic["fc1"] = {
        "einsum": "bi,ih->bh", "sizes": {"b": 64, "i": 64, "h": 128},
        "cuts": {"c_b": 8, "c_i": 1, "c_h": 1}, "D": 8,
        "terms": [{"term": "FLOPs forward", "unit": "FLOPs", "formula": "2*b*d_in*hidden/8",
                   "value": 2 * 64 * 64 * 128 / 8}]}
    save_plan(good.seal(), folder / "good.json")
    good.dataset_strategy = [[8, 1]]  # the batch split at the source, as fc1 wants it
    save_plan(good.seal(), folder / "good-dataset.json")
    bad_pred = data_parallel_plan(graph, 8, "mlp", MLP_OPTIONS)
    for d in bad_pred.decisions:
        if d.name.startswith("fc3"):
            d.collectives = []
    save_plan(bad_pred.seal(), folder / "mismatch.json")
    rejected = data_parallel_plan(graph, 8, "mlp", MLP_OPTIONS)
    rejected.decisions[0].strategy = [[2, 4], [2, 1]]
    save_plan(rejected.seal(), folder / "rejected.json")
    return folder


# ---- plan: bad input ---------------------------------------------------------------------------
def test_malformed_argument_is_one_line(work):
    one_line_error(smsg(["plan", "--devices", "abc"], work), "--devices", "'abc'")
    one_line_error(smsg(["frobnicate"], work), "invalid choice")
    assert files(work) == []


def test_devices_per_node_must_fill_whole_nodes_or_fit_in_one(capsys):
    """Rank r sits on node r // N (MindSpore's rank order, cost/hardware.py fanout): 8 devices
    on nodes of 3 leave the third node with 2, which the cost model would price as a whole
    node; 4 devices on nodes of 8 are half of one node, as the presets already allow."""
    from smsg_ms.cli import main
    from smsg_ms.cli_options import machine_of

    def of(devices, per_node, hardware="a100"):
        return machine_of(argparse.Namespace(hardware=hardware, devices=devices,
                                             devices_per_node=per_node))

    assert of(4, 8).devices_per_node == 8 and of(16, 8).devices_per_node == 8
    assert of(24, 4).devices_per_node == 4 and of(None, 3).devices_per_node == 3
    for devices, per_node in ((8, 3), (16, 6), (24, 16)):
        with pytest.raises(ValueError, match=rf"^--devices-per-node: {per_node} devices per "
                                             rf"node do not divide --devices {devices} "):
            of(devices, per_node)
    for per_node in (0, -2):
        with pytest.raises(ValueError, match="^--devices-per-node: devices per node must be"):
            of(8, per_node)
    # score reads the same flags through the same helper: one line, exit 2 as plan's (bad
    # input), before any capture
    with pytest.raises(SystemExit) as exited:
        main(["score", "mlp", "--devices", "8", "--devices-per-node", "3"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["smsg-ms: error: --devices-per-node: 3 devices per node do not divide "
                   "--devices 8 (the devices must fill whole nodes, or fit in one) (see "
                   "'smsg-ms score --help')"]


def test_empty_out_and_unknown_hardware_are_refused_before_capture(work):
    one_line_error(smsg(["plan", "mlp", "--out", ""], work), "--out", "empty")
    # the preset is checked before the network is even looked up (so before any capture)
    one_line_error(smsg(["plan", "nosuch", "--hardware", "tpu"], work), "--hardware", "'tpu'",
                   "presets: a100, ascend910b, atlas-800t-a2, dgx-a100, dgx-h100, h100")
    # a description file with one bad field: one line naming the file and the field
    (work / "mine.yaml").write_text("cube_flops: 1.0e+14\nvector_flops: 1.0e+13\n"
                                    "hbm_bandwidth: 1.0e+12\nmemory: 1.0e+10\n"
                                    "launch_latency: -1\nlevels:\n  - {name: node, count: 4, "
                                    "bandwidth: 1.0e+9, latency: 1.0e-5}\n")
    one_line_error(smsg(["plan", "nosuch", "--hardware", "mine.yaml"], work), "mine.yaml",
                   "launch_latency must be a positive number, got -1")
    # a bad --devices-per-node is named as itself, not as --hardware
    # (argparse's type check: before the network is looked up, exit 2)
    bad = smsg(["plan", "nosuch", "--devices-per-node", "0"], work)
    one_line_error(bad, "smsg-ms: error: argument --devices-per-node: ",
                   "must be at least 1, got 0", "see 'smsg-ms plan --help'")
    assert bad.returncode == 2
    assert "--hardware" not in bad.stderr
    # 8 devices on nodes of 3 leave a node partly filled: refused, in one line
    one_line_error(smsg(["plan", "nosuch", "--devices", "8", "--devices-per-node", "3"], work),
                   "smsg-ms: error: --devices-per-node: ", "do not divide --devices 8")
    (work / "mine.yaml").unlink()
    assert files(work) == []


def test_default_plan_names_carry_non_default_settings():
    from smsg_ms.cli import build_parser, default_plan_path, _plan_settings

    def name(*argv):
        args = build_parser().parse_args(["plan", "llama", *argv])
        return default_plan_path(args.network, args.devices, {}, _plan_settings(args))

    assert name() == "llama-8dev.plan.json"     # README's name for the defaults
    assert name("--hardware", "ascend910b", "--write-back", "auto") == "llama-8dev.plan.json"
    assert name("--pipeline", "2") == "llama-8dev-p2.plan.json"
    assert name("--hardware", "h100", "--memory", "80") == "llama-8dev-h100-mem80.plan.json"
    assert name("--write-back", "propagate") == "llama-8dev-propagate.plan.json"
    assert name("--memory", "7.5") == "llama-8dev-mem7-5.plan.json"
    assert name("--build-for-devices") == "llama-8dev.plan.json"     # the default
    assert name("--no-build-for-devices") == "llama-8dev-unbuilt.plan.json"
    names = {name(), name("--pipeline", "2"), name("--pipeline", "auto"),
             name("--hardware", "h100"), name("--memory", "80"), name("--write-back", "propagate"),
             name("--pipeline", "2", "--micro-batches", "4"),
             name("--pipeline", "2", "--optimizer-sharding", "off")}
    assert len(names) == 8


def test_top_level_help_names_every_command(work):
    from smsg_ms.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    proc = smsg(["--help"], work)
    description = proc.stdout.split("positional arguments")[0]
    assert len(sub.choices) == 8
    for command in sub.choices:
        assert command in description, command


def test_counts_are_singular_for_one():
    from smsg_ms.report.tables import count

    assert count(1, "device") == "1 device" and count(8, "device") == "8 devices"
    assert count(1, "micro-batch", "micro-batches") == "1 micro-batch"
    assert count(4, "micro-batch", "micro-batches") == "4 micro-batches"


def test_unknown_network(work):
    one_line_error(smsg(["plan", "nosuch", "--devices", "8"], work), "unknown network 'nosuch'")
    assert files(work) == []


@pytest.mark.parametrize("devices, fragment", [("0", "at least 1"), ("-8", "at least 1"),
                                               ("6", "use 4 or 8"), ("12", "use 8 or 16")])
def test_device_counts(work, devices, fragment):
    one_line_error(smsg(["plan", "mlp", "--devices", devices], work), fragment)
    assert files(work) == []


def test_memory_must_be_positive(work):
    one_line_error(smsg(["plan", "mlp", "--memory", "0"], work), "--memory")


def test_read_only_folder(work):
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    target = ro / "p.json" if not os.access(ro, os.W_OK) else Path("/sys/smsg-test.plan.json")
    try:
        one_line_error(smsg(["plan", "mlp", "--out", str(target)], work), "cannot write")
        assert files(ro) == [] and not target.exists()
    finally:
        ro.chmod(0o755)


def test_debug_shows_the_traceback(work):
    proc = smsg(["--debug", "plan", "nosuch"], work)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.skipif(HAS_PLANNER, reason="the planner is present")
def test_plan_without_planner_says_so(work):
    one_line_error(smsg(["plan", "mlp"], work), "planner is not available")
    assert files(work) == []


@needs_planner
def test_plan_writes_a_verified_plan_file(work):
    proc = smsg(["plan", "mlp", "--devices", "8", "--batch", "64", "--out", "p.json"], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == ["p.json"]
    data = json.loads((work / "p.json").read_text())
    assert data["devices"] == 8 and data["content_hash"] in proc.stdout
    again = smsg(["plan", "mlp", "--devices", "8", "--batch", "64", "--out", "q.json"], work)
    assert (work / "q.json").read_bytes() == (work / "p.json").read_bytes()
    assert again.returncode == 0


@needs_planner
def test_plan_with_no_arguments_plans_the_default_network(work):
    proc = smsg(["plan"], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == ["llama-8dev.plan.json"]
    assert "layers.*" in proc.stdout and "attention.wq.matmul" in proc.stdout
    # the title names the shape planned for: batch and seq those of the captured data input
    batch, seq = json.loads((work / "llama-8dev.plan.json").read_text())["input_shapes"][0]
    title = " ".join(proc.stdout[:proc.stdout.index("┏")].split())
    assert title.startswith(f"llama (batch {batch}, seq {seq}, layers 2, hidden "), title
    assert "step / pure data parallel" in proc.stdout
    # a primitive listed more than once names disjoint instances on each of its rows
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in proc.stdout.splitlines()
            if line.startswith("│ layers.")]
    names = [re.sub(r" \(x\d+\)$", "", r[1]) for r in rows]
    for name in {n for n in names if names.count(n) > 1}:
        blocks = [r[0] for r, n in zip(rows, names) if n == name]
        assert "layers.*" not in blocks, (name, blocks)
        ids = [i for b in blocks for i in _instance_ids(b)]
        assert len(ids) == len(set(ids)) == 2, (name, blocks)     # 2 layers by default


def _instance_ids(block: str) -> list[int]:
    """``layers.0–6,9`` → ``[0, 1, ..., 6, 9]``."""
    ids = []
    for part in block.split(".", 1)[1].split(","):
        lo, _, hi = part.partition("–")
        ids += range(int(lo), int(hi or lo) + 1)
    return ids


@needs_planner
def test_memory_too_small_for_any_plan(work):
    one_line_error(smsg(["plan", "mlp", "--memory", "0.00001", "--out", "m.json"], work),
                   "no plan fits")
    assert files(work) == []


@needs_planner
def test_user_function_that_raises(work):
    one_line_error(smsg(["plan", "mynets:raises", "--devices", "8"], work), "boom in user code")
    assert files(work) == []


# ---- explain -----------------------------------------------------------------------------------
def test_explain_and_plot(work, plans):
    proc = smsg(["explain", str(plans / "good.json"), "--plot", "layers.png"], work)
    assert proc.returncode == 0, proc.stderr
    assert "fc2.matmul" in proc.stdout and "(8,1)(1,1)" in proc.stdout
    # runner-up: 2.5e-4 s extra = 250 µs (4 significant digits)
    assert "(4,1)(1,1) (+250.0 µs)" in proc.stdout and "2*b*d_in*hidden/8" in proc.stdout
    assert "1.31e+05 FLOPs" in proc.stdout and "bi,ih->bh" in proc.stdout
    assert files(work) == ["layers.png"]
    import matplotlib.image
    assert matplotlib.image.imread(work / "layers.png").ndim == 3


def test_truncated_plan(work, plans):
    text = (plans / "good.json").read_text()
    (work / "cut.json").write_text(text[: len(text) // 2])
    one_line_error(smsg(["explain", "cut.json"], work), "cut.json", "truncated")


def test_file_that_is_not_json(work):
    (work / "README.md").write_text("# smsg-ms\n\nProfiling-free auto-parallel {search}.\n")
    proc = smsg(["explain", "README.md"], work)
    one_line_error(proc, "README.md", "not JSON", "not an smsg-ms plan file")
    assert "truncated" not in proc.stderr


@pytest.mark.parametrize("args", [["explain", "PLAN"], ["explain", "PLAN", "--all"],
                                  ["graph", "mlp"]])
def test_closed_stdout_ends_quietly(work, plans, args):
    """``smsg-ms explain plan.json | head``: the reader goes away before the output is
    written; the command exits 0 with nothing on stderr."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    exe = shutil.which("smsg-ms")
    cmd = ([exe] if exe else [sys.executable, "-m", "smsg_ms.cli"])
    cmd += [str(plans / "good.json") if a == "PLAN" else a for a in args]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()                 # closed before the command prints its first line
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and err == b"", err.decode()[-2000:]


def test_edited_plan(work, plans):
    data = json.loads((plans / "good.json").read_text())
    data["decisions"][0]["strategy"] = [[4, 1], [2, 1]]
    (work / "edited.json").write_text(json.dumps(data))
    one_line_error(smsg(["explain", "edited.json"], work), "content hash mismatch")


def test_missing_plan_file(work):
    one_line_error(smsg(["explain", "nothing.json"], work), "does not exist")


# ---- check -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_checked(plans, tmp_path_factory):
    """``check good.json`` on a terminal of 80 columns, compiled once for the two tests that
    read it."""
    return smsg(["check", str(plans / "good.json")], tmp_path_factory.mktemp("check"),
                columns=80)


@pytest.mark.parametrize("name", ["good.json", "good-dataset.json"])
def test_check_passes_when_predictions_match(work, plans, good_checked, name):
    proc = good_checked if name == "good.json" else smsg(["check", str(plans / name)], work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check: passed" in proc.stdout and "grad_sync" in proc.stdout


def test_check_reads_at_80_columns(good_checked):
    """A terminal of 80 columns: collective kinds and phases are whole, and the last line is the
    summary README promises."""
    proc = good_checked
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert "…" not in proc.stdout and "AllReduce" in proc.stdout and "grad_sync" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "check: passed (0 rejected, 0 mismatches)"


def test_check_fails_on_mismatch(work, plans):
    proc = smsg(["check", str(plans / "mismatch.json")], work)
    assert proc.returncode == 1
    assert "MISMATCH" in proc.stdout and "check: FAILED" in proc.stdout
    # fc3's predictions were dropped: at least one row disagrees, nothing was rejected
    mismatched = sum(line.count("MISMATCH") for line in proc.stdout.splitlines())
    assert mismatched >= 1
    assert re.search(rf"check: FAILED \(0 rejected, {mismatched} mismatch(es)?\)$", proc.stdout)


def test_check_reports_rejected_strategy(work, plans):
    proc = smsg(["check", str(plans / "rejected.json")], work)
    assert proc.returncode == 1
    assert "MindSpore rejected the plan" in proc.stdout and "MatMul" in proc.stdout
    assert proc.stdout.rstrip().endswith("check: FAILED (1 rejected, 0 mismatches)")


def test_check_rank_and_all_ranks_exclude_each_other(work, plans):
    one_line_error(smsg(["check", str(plans / "good.json"), "--rank", "1", "--all-ranks"], work),
                   "--all-ranks", "not allowed with argument --rank")


def test_check_refuses_plan_of_another_network(work, plans):
    one_line_error(smsg(["check", str(plans / "good.json"), "--network", "mynets:wider"], work),
                   "does not fit the network 'mynets:wider'", "fingerprint")


def test_check_with_a_network_function_that_raises(work, plans):
    one_line_error(smsg(["check", str(plans / "good.json"), "--network", "mynets:raises"], work),
                   "boom in user code")


def test_export_strategy_checkpoint(work, plans):
    proc = smsg(["export", str(plans / "good.json"), "strategy.json"], work)
    assert proc.returncode == 0, proc.stderr
    items = json.loads((work / "strategy.json").read_text())["parallel_strategy_item"]
    assert items["MatMul_fc1.weight"] == {"stage": 0, "parallel_strategy": [[8, 1], [1, 1]]}
    # the MLP reads each Parameter in one primitive: one item per written strategy, out of all
    # the plan's strategies (activation-only primitives such as ReLU have no key)
    planned = sum(1 for d in json.loads((plans / "good.json").read_text())["decisions"]
                  if d["shardable"] and d["strategy"])
    assert len(items) < planned
    assert f"{len(items)} of {planned} strategies written" in proc.stdout
    # the load line is valid Python: a call with keyword arguments only, literal values
    line = next(l for l in proc.stdout.splitlines() if "set_auto_parallel_context(" in l)
    call = ast.parse(line.split("load it with ", 1)[1], mode="eval").body
    assert isinstance(call, ast.Call) and not call.args
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert kwargs["strategy_ckpt_config"] == {"load_file": "strategy.json"}
    assert kwargs["parallel_mode"] in ("semi_auto_parallel", "auto_parallel")
    one_line_error(smsg(["export", str(plans / "good.json"), "strategy.ckpt"], work),
                   "must end in .json")
    assert files(work) == ["strategy.json"]
