"""``--hardware FILE``: every bad field of a description is reported at once (the first kind of
error used to hide the others), one line per field under a line that counts them, exit 2; a
figure written in another unit than the file's (``memory: 64``, meant as GiB, is 64 bytes) is
refused naming the unit with an example. The files of the repository still read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smsg_ms.cost.hardware import PRESETS
from test_cli import one_line_error, smsg

ROOT = Path(__file__).resolve().parents[1]


def _write(folder: Path, **changes) -> str:
    """The atlas-800t-a2 preset as a JSON description, with ``changes``; its file name."""
    data = {**PRESETS["atlas-800t-a2"].to_dict(), **changes}
    (folder / "hw.json").write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return "hw.json"


@pytest.mark.parametrize("command", [["plan", "mlp", "--out", "p.plan.json"],
                                     ["score", "mlp", "--devices", "8"]])
def test_every_bad_field_one_line_each(tmp_path, command):
    levels = PRESETS["atlas-800t-a2"].to_dict()["levels"]
    name = _write(tmp_path, speed=3, hbm_bandwidth=None, cube_flops=-1,
                  levels=[dict(levels[0], count=0), dict(levels[1], latency="fast")])
    proc = smsg([*command, "--hardware", name], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    first, *fields = proc.stderr.strip().splitlines()
    assert first == (f"smsg-ms: error: --hardware: hardware file hw.json: 5 bad fields, one per "
                     f"line below (see 'smsg-ms {command[0]} --help')")
    assert sorted(fields) == sorted([
        "  unknown field 'speed'", "  missing field 'hbm_bandwidth'",
        "  cube_flops must be a positive number, got -1",
        "  levels[0] (node): count must be a positive integer, got 0",
        "  levels[1] (cluster): latency must be a positive number, got 'fast'"])
    assert not (tmp_path / "p.plan.json").exists()


@pytest.mark.parametrize("changes, fragment", [
    # 64 meant as GiB: 64 bytes; 64 GiB = 64 * 2**30 bytes
    ({"memory": 64}, "memory 64 is too small in bytes (the file's unit): give e.g. 64 GiB = "
                     f"{64 * 2**30}"),
    ({"cube_flops": 313}, "cube_flops 313 is too small in FLOP/s"),
    ({"launch_latency": 10}, "launch_latency 10 is too large in seconds"),
])
def test_a_figure_in_another_unit_is_refused(tmp_path, changes, fragment):
    proc = smsg(["plan", "mlp", "--hardware", _write(tmp_path, **changes)], tmp_path)
    one_line_error(proc, "--hardware: hardware file hw.json: ", fragment)
    assert proc.returncode == 2


def test_a_unit_error_is_counted_with_the_others(tmp_path):
    levels = PRESETS["atlas-800t-a2"].to_dict()["levels"]
    name = _write(tmp_path, memory=64, levels=[dict(levels[0], bandwidth=196), levels[1]])
    proc = smsg(["plan", "mlp", "--hardware", name], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "2 bad fields" in lines[0], proc.stderr
    assert lines[1:] == ["  levels[0] (node): bandwidth 196 is too small in bytes/s (the file's "
                         "unit): give e.g. 196 GB/s = 1.96e+11",
                         f"  memory 64 is too small in bytes (the file's unit): give e.g. 64 GiB "
                         f"= {64 * 2**30}"]


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks" / "measured").glob("*.yaml")))
def test_the_repository_descriptions_still_read(tmp_path, path):
    """Read and accepted: the command goes on to the network, and fails there (no such
    network), not on the file."""
    proc = smsg(["plan", "nosuch", "--hardware", str(path)], tmp_path)
    one_line_error(proc, "unknown network 'nosuch'")
    assert "--hardware" not in proc.stderr
