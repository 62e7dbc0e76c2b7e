"""Report verdicts and the CLI parser, on hand-made results (no compile)."""
from __future__ import annotations

import argparse

import pytest

from smsg_ms.compare.cli import register
from smsg_ms.compare.report import markdown, verdict


def run(costs: dict, failed=()):
    rows = []
    for name, s in costs.items():
        rows.append({"planner": name, "ok": True, "error": None, "planning_seconds": 1.0,
                     "measures": {"step_seconds": s, "collective_bytes": {
                         "forward": {}, "backward": {}, "grad_sync": {"AllReduce": 10.0}},
                         "flops": {"total": 1.0}, "memory": {"total": 8.0}}})
    for name in failed:
        rows.append({"planner": name, "ok": False, "error": "RuntimeError: boom | x"})
    return {"network": "mlp", "devices": 8, "hardware": "a100", "options": {}, "rows": rows,
            "spearman": None}


def test_verdict_says_when_smsg_is_worse():
    assert "WORSE than data_parallel by 50.0 %" in verdict(
        run({"smsg": 3.0, "data_parallel": 2.0, "recursive_programming": 4.0}))
    v = verdict(run({"smsg": 1.0, "data_parallel": 2.0, "recursive_programming": 1.0}))
    assert v.startswith("smsg is no worse") and "not better than recursive_programming" in v


def test_failed_planner_keeps_its_row_with_the_error():
    text = markdown([run({"smsg": 1.0}, failed=("dynamic_programming",))])
    line = next(l for l in text.splitlines() if l.startswith("| dynamic_programming"))
    assert "failed: RuntimeError: boom / x" in line
    assert line.count("|") == 13  # 12 columns, the pipe in the error escaped


def test_cli_expert_option():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", "llama", "--devices", "8", "--expert", "2,4"])
    assert args.expert == (2, 4) and args.func.__name__ == "cmd_compare"
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "llama", "--devices", "8", "--expert", "2"])
