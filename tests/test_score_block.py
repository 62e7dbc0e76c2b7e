"""``smsg-ms score``'s text output (a new user's trial): a short block of at most 80 columns
whose step and memory rows are in ``plan``'s totals format and labels, and that names the
largest stage only when the configuration has several. The values are checked against the same
command's ``--json`` (the scorer's own numbers, in seconds and bytes)."""
from __future__ import annotations

import json

import pytest

from smsg_ms.cli import main

UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9,
         "B": 1.0, "KiB": 2.0 ** 10, "MiB": 2.0 ** 20, "GiB": 2.0 ** 30}


def _run(capsys, args: list[str]) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


def _row(lines: list[str], label: str) -> float:
    """The value of the row starting with ``label``, in seconds or bytes."""
    (line,) = [x for x in lines if x.strip().startswith(label)]
    number, unit = line.strip()[len(label):].split()
    return float(number) * UNITS[unit]


@pytest.mark.parametrize("config, stages", [
    ("dp=2,tp=1,pp=1,micro_batch=4,global_batch=8", 1),
    ("dp=2,tp=2,pp=2,micro_batch=1,global_batch=8", 2)])
def test_score_block_is_short_and_in_plan_s_format(capsys, config, stages):
    args = ["score", "gpt", "--layers", "2", "--config", config]
    text = _run(capsys, args)
    doc = json.loads(_run(capsys, args + ["--json"]))
    lines = text.splitlines()
    assert 3 <= len(lines) <= 10, text
    assert max(len(line) for line in lines) <= 80, text
    step = "step (1F1B super-step)" if stages > 1 else "step (predicted)"
    memory = "memory per device (largest stage)" if stages > 1 else "memory per device"
    # 4 significant digits, as plan's totals (smsg_ms.report.units.significant)
    assert _row(lines, step) == pytest.approx(doc["step_seconds"], rel=1e-3)
    assert _row(lines, memory) == pytest.approx(doc["memory_bytes"], rel=1e-3)
    assert ("largest stage" in text) == (stages > 1), text
    assert f"{doc['micro_batches']} micro-batch" in text
