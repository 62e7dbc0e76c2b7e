"""Exit codes are the same in every command: 2 for bad input (a flag, flags that do not go
together, a file given as an argument that is missing or is not what it should be), as argparse
exits for a bad flag; 1 for a network that cannot be planned or a failed check. Each refusal is
one line on stderr saying what is wrong and what to do.

The table runs :func:`smsg_ms.cli.main` in-process (every case stops before a capture); one case
of each code also runs the installed command in a subprocess."""
from __future__ import annotations

from pathlib import Path

import pytest

from test_cli import one_line_error, smsg
from test_cli_input import refused

#: a sealed plan file of the repository (``strategies/``, checked byte for byte elsewhere)
MLP_PLAN = str(Path(__file__).resolve().parents[1] / "strategies" / "mlp-8dev.plan.json")


def run(capsys, argv) -> tuple[int, str]:
    """``main(argv)``'s exit status and its one stderr line (stdout may hold a progress line)."""
    return refused(capsys, argv, quiet=False)


@pytest.fixture()
def files(tmp_path, monkeypatch):
    """A working folder with a truncated plan and a JSON that is no plan."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cut.plan.json").write_text('{"decisions": [{"path": "fc1"')
    (tmp_path / "other.json").write_text('{"model": "llama"}')
    return tmp_path


@pytest.mark.parametrize("argv, fragments", [
    # stages must divide the devices: each stage runs on devices / stages of them (8 = 2^3)
    (["plan", "mlp", "--pipeline", "3"], ["stage count dividing 8 devices, got 3",
                                          "give 1, 2, 4 or 8"]),
    (["plan", "mlp", "--devices", "16", "--pipeline", "5"], ["give 1, 2, 4, 8 or 16"]),
    (["plan", "mlp", "--hardware", "bad"], ["--hardware: unknown hardware 'bad'", "presets:"]),
    (["score", "mlp", "--devices", "8", "--hardware", "bad"],
     ["--hardware: unknown hardware 'bad'", "presets:"]),
    (["score", "mlp"], ["score needs --devices N"]),
    (["score", "mlp", "--devices", "8", "--out", "o.csv"], ["--out goes with --configs"]),
    (["score", "mlp", "--config", "dp=x"], ["dp wants a positive integer, got 'x'"]),
    (["score", "mlp", "--devices", "8", "--config",
      "dp=2,tp=2,pp=1,micro_batch=1,global_batch=8"], ["dp·tp·pp = 2·2·1 = 4 is not the device "
                                                       "count 8"]),
    (["score", "mlp", "--configs", "missing.csv"], ["cannot read missing.csv"]),
    (["compare", "mlp"], ["compare needs --devices N"]),
    (["explain", "missing.plan.json"], ["plan file missing.plan.json does not exist"]),
    (["explain", "cut.plan.json"], ["cut.plan.json: truncated"]),
    (["check", "missing.plan.json"], ["plan file missing.plan.json does not exist"]),
    (["check", "cut.plan.json"], ["cut.plan.json: truncated"]),
    (["check", "other.json"], ["neither a plan file", "'smsg-ms plan'"]),
    (["check", MLP_PLAN, "--devices", "8"], ["--devices and network options are for a strategy "
                                             "file"]),
    (["check", MLP_PLAN, "--rank", "8"], ["--rank 8 is outside the plan's ranks 0..7"]),
    (["export", "missing.plan.json", "o.json"], ["plan file missing.plan.json does not exist"]),
    (["plan", "mlp", "--out", "nowhere/p.plan.json"], ["cannot write nowhere/p.plan.json",
                                                       "does not exist"]),
])
def test_bad_input_exits_2(capsys, files, argv, fragments):
    rc, line = run(capsys, argv)
    assert rc == 2, line
    for fragment in fragments:
        assert fragment in line, line
    assert line.endswith(f"(see 'smsg-ms {argv[0]} --help')"), line
    assert not list(files.glob("*.csv")) and not (files / "o.json").exists()


def test_bad_input_exits_2_from_the_command(tmp_path):
    proc = smsg(["score", "mlp", "--devices", "8", "--hardware", "bad"], tmp_path)
    one_line_error(proc, "--hardware: unknown hardware 'bad'")
    assert proc.returncode == 2


def test_a_network_that_cannot_be_planned_exits_1(tmp_path):
    """The flags are right, the network does not fit: 10 KiB per device hold no plan of the mlp
    (its weights alone are MiBs)."""
    proc = smsg(["plan", "mlp", "--devices", "2", "--memory", "0.00001", "--out", "p.plan.json"],
                tmp_path)
    one_line_error(proc, "no plan fits in", "give more --devices or a larger --memory")
    assert proc.returncode == 1
    assert not (tmp_path / "p.plan.json").exists()


# --devices: 1, 2, 4 or a multiple of 8 (MindSpore 2.10's rule, smsg_ms/devices.py); the
# planner plans 24 (tests/test_planner.py, 3-way cuts: tests/test_cost_model.py), so a count
# that is not a power of two is planned, with one line saying what that assumes

def test_a_device_count_not_a_power_of_two_is_planned_with_a_note(tmp_path):
    proc = smsg(["plan", "mlp", "--devices", "24", "--out", "p.plan.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [
        "note: 24 devices is not a power of two (nearest: 16, 32): planned as MindSpore runs "
        "it, with cuts by the divisors of 24, so 3-way cuts only on axes 3 divides"]
    assert (tmp_path / "p.plan.json").exists()


@pytest.mark.parametrize("devices, note", [
    (1, None), (8, None), (64, None),
    (40, "40 devices is not a power of two (nearest: 32, 64): planned as MindSpore runs it, "
         "with cuts by the divisors of 40, so 5-way cuts only on axes 5 divides"),
    (120, "so 3-way or 5-way cuts only on axes 3 or 5 divides")])
def test_the_note_names_the_odd_factors(devices, note):
    from smsg_ms.devices import device_count_note

    got = device_count_note(devices)
    assert got == note if note is None or note.startswith("40") else note in got


def test_a_count_mindspore_refuses_exits_2_naming_the_nearest(capsys):
    rc, line = run(capsys, ["plan", "mlp", "--devices", "12"])
    assert rc == 2 and "does not accept 12 devices" in line and "use 8 or 16" in line, line
