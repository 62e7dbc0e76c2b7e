"""Output for people and for scripts: ``--json`` alone on stdout, tables whose labels survive 80
columns, a spinner on a terminal and silence in a pipe. Through the CLI in subprocesses."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_cli import ROOT, needs_planner, smsg

MLP = ["--batch", "64"]


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """``plan mlp --json`` in a clean folder: the folder, the process, its document."""
    work = tmp_path_factory.mktemp("out")
    proc = smsg(["plan", "mlp", *MLP, "--json"], work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return work, proc, json.loads(proc.stdout)


@needs_planner
def test_plan_json_is_the_whole_stdout_and_names_the_file_written(planned):
    work, proc, doc = planned
    written = json.loads((work / doc["file"]).read_text())   # the plan file, read on its own
    assert doc["content_hash"] == written["content_hash"]
    assert doc["devices"] == 8 and doc["network"] == "mlp"
    primitives = {d["name"] for d in written["decisions"] if d.get("shardable", True)}
    assert {r["primitive"] for r in doc["strategies"]} == primitives
    assert doc["totals"]["step_seconds"] == written["totals"]["step_seconds"]


@needs_planner
def test_explain_and_check_json(planned):
    work, _, doc = planned
    proc = smsg(["explain", doc["file"], "--json"], work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    explained = json.loads(proc.stdout)
    assert {d["name"] for d in explained["decisions"]} >= {"fc1.matmul", "fc2.matmul"}
    matmul = next(d for d in explained["decisions"] if d["name"] == "fc1.matmul")
    assert matmul["symbolic"]["einsum"]  # the formula the view prints
    proc = smsg(["check", doc["file"], "--json"], work)
    checked = json.loads(proc.stdout)
    assert proc.returncode == (0 if checked["ok"] else 1)
    assert checked["summary"] == "check: passed (0 rejected, 0 mismatches)"
    assert [r["rank"] for r in checked["ranks"]] == [0]
    grad = [c for c in checked["ranks"][0]["collectives"] if c["phase"] == "grad_sync"]
    assert grad and all(c["predicted"] == c["inserted"] for c in grad)


def test_graph_and_score_json(tmp_path):
    proc = smsg(["graph", "mlp", *MLP, "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    graph = json.loads(proc.stdout)
    # the built-in MLP (networks/mlp.py): 3 Dense layers = MatMul + BiasAdd each, 2 ReLUs
    assert dict(map(tuple, graph["op_counts"])) == {"MatMul": 3, "BiasAdd": 3, "ReLU": 2}
    assert graph["options"] == {"batch": 64}
    proc = smsg(["score", "smsg_ms.networks.user_shard:build", "--devices", "8", "--json"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    scored = json.loads(proc.stdout)
    # networks/user_shard.py shards its MatMul with ((2, 1), (1, 4))
    assert scored["strategies"] == {"mm": [[2, 1], [1, 4]]} and scored["pinned"] == 1


def words_intact(text: str, labels: list[str]) -> list[str]:
    """The labels' words that do not appear whole in ``text`` (a word split by a fold)."""
    return [w for label in labels for w in label.split() if not re.search(
        r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", text)]


@needs_planner
def test_tables_keep_their_labels_at_80_columns(tmp_path):
    proc = smsg(["plan", "llama", "--layers", "4", "--seq", "64", "--hidden", "256", "--heads",
                 "8", "--kv-heads", "2", "--ffn", "512", "--vocab", "1000", "--batch", "8",
                 "--devices", "8", "--pipeline", "2", "--out", "p.json"], tmp_path, columns=80)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    labels = ["block", "primitive", "strategy", "quantity", "value", "stage", "blocks",
              "recompute", "time / micro-batch", "memory / device", "attention.merge_transpose",
              "feed_forward.w2.matmul", "computation", "gradient sync", "optimizer state",
              "with gradient sync", "(no gradient sync)"]
    assert words_intact(proc.stdout, labels) == []
    check = smsg(["check", "p.json"], tmp_path, columns=80)
    assert max(len(line) for line in check.stdout.splitlines()) <= 80
    assert words_intact(check.stdout, ["collective", "phase", "group", "pred. MiB",
                                       "ins. MiB", "verdict"]) == [], check.stdout


def test_check_table_keeps_its_rows_whole_at_80_columns():
    """The widest rows the check prints (a 13-letter kind, a loss phase, a 4-digit group,
    thousands of MiB, "MISMATCH (bytes)" and "loss (not compared)") at 80 columns: rich crops a
    table wider than the terminal on the right (before the fix the last border and the verdict
    were cut, MiB values ended in "…"), so every table line must end in a border and every word
    must be whole. MiB by hand: 54321.4 MiB → 54321, 1234.4 → 1234, 5 GiB = 5120 MiB."""
    import io

    from rich.console import Console

    from smsg_ms.integration.check import CheckReport, CollectiveRow, RankCheck, print_report

    mib = 2 ** 20
    rows = [CollectiveRow(("ReduceScatter", "grad_sync (loss)", 1024), 120, 54321.4 * mib, 120,
                          int(1234.4 * mib)),
            CollectiveRow(("AllReduce", "backward", 8), 3, 5120 * mib, 4, 5120 * mib),
            CollectiveRow(("AllGather", "forward", 16), 3, 5120 * mib, 3, 4096 * mib)]
    out = io.StringIO()
    print_report(CheckReport(plan=None, ranks=[RankCheck(0, rows=rows)], has_predictions=True),
                 Console(file=out, width=80))
    text = out.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert len(table) >= 8 and all(line[-1] in "┓┃┩│┘" for line in table), text
    assert "…" not in text
    assert words_intact(text, ["collective", "phase", "group", "pred. MiB", "ins. MiB",
                               "verdict", "ReduceScatter", "grad_sync (loss)", "1024", "54321",
                               "1234", "5120", "4096", "MISMATCH (bytes)", "MISMATCH",
                               "loss (not compared)"]) == [], text
    assert lines[-1] == "check: FAILED (0 rejected, 2 mismatches)"


def test_quiet_in_a_pipe_and_a_spinner_on_a_terminal(tmp_path):
    piped = smsg(["graph", "llama", "--layers", "2"], tmp_path)
    assert piped.returncode == 0 and "capturing llama" not in piped.stderr
    # stderr on a pseudo-terminal: rich draws the spinner there (stdout stays a pipe)
    master, slave = os.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    seen = []
    reader = threading.Thread(target=lambda: _drain(master, seen), daemon=True)
    reader.start()
    proc = subprocess.run([sys.executable, "-m", "smsg_ms.cli", "graph", "llama", "--layers",
                           "2"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=slave,
                          text=True, timeout=600)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 0
    assert "capturing llama" in b"".join(seen).decode(errors="replace")
    assert "capturing llama" not in proc.stdout and "operators" in proc.stdout


def _drain(fd: int, sink: list) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        sink.append(chunk)


def test_compare_json_alone_on_stdout_and_progress_on_stderr(tmp_path):
    proc = smsg(["compare", "mlp", "--devices", "8", "--batch", "64", "--planners",
                 "data_parallel", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout)
    assert run["network"] == "mlp" and run["devices"] == 8
    assert [r["planner"] for r in run["rows"]] == ["data_parallel"] and run["rows"][0]["ok"]
    # in a pipe no progress at all (a bar on a terminal's stderr only: tests/test_cli_columns)
    assert "… data_parallel" not in proc.stderr and "\x1b[" not in proc.stderr
    assert list(tmp_path.iterdir()) == []     # --json alone writes no file
