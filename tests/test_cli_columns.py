"""Every table-printing command at 80 columns, and every long command in a pipe, through the CLI
in subprocesses as a user runs them.

80 columns: the words of the command's output at 200 columns (same command, same inputs: the
plans are deterministic) must all appear whole at 80: a table may wrap a cell between words,
never cut a word (rich's fold or its ``…``), and no line may exceed 80 characters. The reference
at 200 columns is the command itself, so the check needs no list of labels copied from the code.

Pipe: with stdout and stderr both pipes, no ANSI escape and no spinner/bar frame is written
anywhere, and the work labels (``capturing``, ``compiling``) do not appear.
"""
from __future__ import annotations

import json
import re

import pytest

from test_cli import needs_planner, smsg

#: box-drawing characters of rich's tables: separators, not parts of words
BOX = "│┃┏┓┗┛┡┩└┘━─╇╈┳┻┼┠┨┯┷╍═║╔╗╚╝╞╡╪"
#: a small LLaMA, pipelined (two stages, recompute searched): every table of ``plan``
LLAMA = ["llama", "--layers", "4", "--seq", "64", "--hidden", "256", "--heads", "8",
         "--kv-heads", "2", "--ffn", "512", "--vocab", "1000", "--batch", "8"]
ANSI = re.compile(r"\x1b\[")
#: rich's spinner frames (dots) and bar glyphs
SPINNER = re.compile("[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏━╸╺]")


def words(text: str) -> set[str]:
    """The whitespace-separated words of ``text`` with the table borders taken out, a word
    also ending after ``*`` or ``/``: ``explain`` folds its formulas there by design
    (:func:`smsg_ms.report.units.fold_formula`: each line but the last ends in an operator), so
    only a cut inside a name, number or symbol counts."""
    text = re.sub(f"[{BOX}]", " ", text)
    return set(re.split(r"\s+|(?<=[*/])", text)) - {""}


def assert_fits_80(narrow: str, wide: str) -> None:
    """Every line of ``narrow`` fits 80 columns and every word of ``wide`` is whole in it (a
    cell rich cuts with ``…`` or folds inside a word loses the word)."""
    lines = narrow.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, narrow
    cut = sorted(words(wide) - words(narrow))
    assert cut == [], f"words cut at 80 columns: {cut}\n{narrow}"


def both(args: list[str], cwd) -> tuple[str, str]:
    """The command's stdout at 80 and at 200 columns (both must succeed)."""
    out = []
    for columns in (80, 200):
        proc = smsg(args, cwd, columns=columns)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out.append(proc.stdout)
    return out[0], out[1]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with a pipelined LLaMA plan (``p.json``, planned at 80 columns: its stdout
    kept) and an MLP plan (``m.json``)."""
    folder = tmp_path_factory.mktemp("columns")
    piped = smsg(["plan", *LLAMA, "--devices", "8", "--pipeline", "2", "--out", "p.json"],
                 folder, columns=80)
    assert piped.returncode == 0, piped.stderr[-2000:]
    mlp = smsg(["plan", "mlp", "--batch", "64", "--out", "m.json"], folder, columns=80)
    assert mlp.returncode == 0, mlp.stderr[-2000:]
    return folder, piped.stdout, mlp.stdout


@needs_planner
def test_plan_tables_at_80_columns(work):
    """``plan``'s own output at 80 columns against the same plan's summary at 200 (the plan
    file rendered by ``explain``'s sibling, the summary printer the command uses)."""
    import io

    from rich.console import Console

    from smsg_ms.integration.plan_io import load_plan
    from smsg_ms.report.tables import print_summary

    folder, piped, mlp = work
    for name, narrow in (("p.json", piped), ("m.json", mlp)):
        wide = io.StringIO()
        print_summary(load_plan(str(folder / name)), Console(file=wide, width=200))
        assert_fits_80(narrow, wide.getvalue())
    # what the summary now says in words (module docstring of report/plan_notes.py)
    assert "the largest of 2)" in piped       # --pipeline 2: 2 stages
    assert "why: MindSpore lays a Reshape out" in piped
    assert "input 0 (" in mlp and "data inputs: dataset_strategy" in mlp
    # --json carries the same: the largest stage of the record, the folded Reshapes
    from smsg_ms.report.json_views import plan_json

    plan = load_plan(str(folder / "p.json"))
    doc = plan_json(plan, "p.json")
    memory = plan.pipeline["stage_memory_bytes"]
    assert doc["largest_stage"] == {"stage": memory.index(max(memory)),
                                    "memory_bytes": max(memory)}
    assert "layers.*.attention.reshape" in doc["not_written_back"]["Reshape"]


@needs_planner
@pytest.mark.parametrize("args", [["explain", "p.json"], ["explain", "m.json"],
                                  ["explain", "p.json", "--all"]])
def test_explain_at_80_columns(work, args):
    assert_fits_80(*both(args, work[0]))


def test_graph_at_80_columns(tmp_path):
    assert_fits_80(*both(["graph", "llama", "--layers", "2"], tmp_path))


@needs_planner
def test_check_at_80_columns(work):
    assert_fits_80(*both(["check", "m.json"], work[0]))


@needs_planner
def test_export_at_80_columns(work):
    narrow, wide = both(["export", "m.json", "m.ckpt.json"], work[0])
    assert "load it with mindspore.set_auto_parallel_context(" in narrow
    # plain lines (no table): the terminal wraps them, nothing is cut
    assert words(narrow) == words(wide)


@needs_planner
def test_long_commands_in_a_pipe_write_no_progress_and_no_ansi(work):
    folder = work[0]
    runs = [["graph", "mlp", "--batch", "64"],
            ["plan", "mlp", "--batch", "64", "--out", "q.json"],
            ["check", "m.json"],
            ["export", "m.json", "n.ckpt.json"],
            ["compare", "mlp", "--devices", "8", "--batch", "64", "--planners",
             "data_parallel"]]
    for args in runs:
        proc = smsg(args, folder)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        for stream in (proc.stdout, proc.stderr):
            assert not ANSI.search(stream), (args, stream[-2000:])
        assert not SPINNER.search(proc.stderr), (args, proc.stderr[-2000:])
        for label in ("capturing ", "compiling ", "… "):
            assert label not in proc.stderr, (args, proc.stderr[-2000:])


@needs_planner
def test_export_json_is_the_whole_stdout(work):
    folder = work[0]
    proc = smsg(["export", "m.json", "j.ckpt.json", "--json"], folder)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    ckpt = json.loads((folder / "j.ckpt.json").read_text())
    plan = json.loads((folder / "m.json").read_text())
    # every primitive the plan gives a strategy is either in the file or listed as not written
    planned = {d["name"] for d in plan["decisions"] if d["shardable"] and d["strategy"]}
    assert sorted(doc["written"] + doc["not_written"]) == sorted(planned)
    # the MLP (networks/mlp.py): three Dense layers read their weight and bias, the ReLUs none
    assert doc["not_written"] == ["relu1.relu", "relu2.relu"]
    assert doc["context"]["strategy_ckpt_config"] == {"load_file": "j.ckpt.json"}
    assert doc["file"] == "j.ckpt.json" and ckpt


def test_pipeline_rows_name_whole_and_selective_recompute_and_largest_stage():
    """A made-up record of 3 stages over 6 blocks: stage 0 recomputes layers.0–1 whole, stage 1
    recomputes layers.3 selectively (layers.2 is in both lists: whole wins, as
    integration/pipeline.py marks the cell), stage 2 none; the largest stage is 1 (5 GiB, not
    the first's 4 GiB)."""
    from types import SimpleNamespace

    from smsg_ms.report.plan_notes import largest_stage
    from smsg_ms.report.tables import pipeline_rows

    gib = 2 ** 30
    record = {"stages": 3, "stage_of_block": {f"layers.{i}": i // 2 for i in range(6)},
              "recompute": {"layers.0": True, "layers.1": True, "layers.2": True},
              "selective_recompute": ["layers.2", "layers.3"],
              "stage_seconds": [1.0, 1.0, 1.0],
              "stage_memory_bytes": [4 * gib, 5 * gib, 3 * gib]}
    plan = SimpleNamespace(pipeline=record)
    rows = pipeline_rows(plan)
    assert [r[1] for r in rows] == ["layers.0–1 (2)", "layers.2–3 (2)", "layers.4–5 (2)"]
    assert [r[2] for r in rows] == ["whole layers.0–1", "whole layers.2; selective layers.3",
                                    "-"]
    assert [r[4] for r in rows] == ["4.000 GiB", "5.000 GiB", "3.000 GiB"]
    assert largest_stage(plan) == (1, 5.0 * gib)
    assert largest_stage(SimpleNamespace(pipeline=None)) is None


def test_progress_steps_draw_a_bar_on_a_terminal_and_nothing_in_a_pipe():
    """``compare``'s bar (:func:`smsg_ms.cli_output.progress_steps`) in a child process: with
    stderr on a pseudo-terminal it shows the step and ``1/2``; with stderr a pipe, nothing."""
    import os
    import subprocess
    import sys
    import threading

    from test_cli import ROOT
    from test_cli_output import _drain

    code = ("import time\nfrom smsg_ms.cli_output import progress_steps\n"
            "with progress_steps('compiling mlp', 2) as step:\n"
            "    step('smsg'); time.sleep(0.3); step('data_parallel'); time.sleep(0.3)\n"
            "print('done')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    master, slave = os.openpty()
    seen: list = []
    reader = threading.Thread(target=lambda: _drain(master, seen), daemon=True)
    reader.start()
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=slave, text=True, timeout=120)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    drawn = b"".join(seen).decode(errors="replace")
    assert proc.stdout == "done\n"
    assert "compiling mlp: data_parallel" in drawn and "1/2" in drawn, drawn
    piped = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    assert piped.stdout == "done\n" and piped.stderr == ""


def test_dryrun_collectives_table_at_80_columns():
    """``dryrun``'s and ``check STRATEGY.json``'s table (:func:`smsg_ms.integration.
    strategy_check.collectives_table`) with a title longer than 80 columns holding a path: the
    title wraps between words (before, the table was as narrow as its columns and the path was
    folded inside ``plain_training.py``); an empty table says MindSpore inserted none. The wide
    reference is the same table at 200 columns."""
    import io

    from rich.console import Console

    from smsg_ms.integration.strategy_check import collectives_table

    title = ("/work/a/long/folder/of/scripts/plain_training.py, rank 0 of 8: collectives "
             "MindSpore inserted")
    rows = [{"type": "AllReduce", "grad_sync": True, "pass": "backward", "group_size": 8},
            {"type": "ReduceScatter", "grad_sync": False, "pass": "forward", "group_size": 4}]
    for collectives in (rows, []):
        text = []
        for width in (80, 200):
            out = io.StringIO()
            Console(file=out, width=width).print(collectives_table(collectives, title))
            text.append(out.getvalue())
        assert_fits_80(*text)
        assert ("MindSpore inserted none" in text[0]) == (not collectives)


def test_compare_table_at_80_columns():
    """``compare``'s markdown table (12 columns, wider than 80) read at 80 columns: a block per
    planner, every word of the wide table's cells and headers whole, no line over 80. The run
    is one ``compare`` result's shape written out here (two planners, one failed), not a
    capture: only the layout is under test."""
    from smsg_ms.compare.report import fit_to_width, markdown

    measures = {"collective_bytes": {"forward": {"AllGather": 3 * 2**20}, "backward": {},
                                     "grad_sync": {"AllReduce": 5 * 2**30}},
                "flops": {"total": 1.25e12}, "memory": {"total": 7 * 2**30},
                "step_seconds": 0.125}
    run = {"network": "llama", "devices": 8, "options": {"layers": 2}, "hardware": "a",
           "spearman": None,
           "rows": [{"planner": "smsg", "ok": True, "planning_seconds": 1.5,
                     "measures": measures, "smsg_score": {"step_seconds": 0.12},
                     "fidelity": {"matched": 9, "predicted": 9, "inserted": 9}},
                    {"planner": "recursive_programming", "ok": False,
                     "error": "MindSpore rejected the plan: " + "strategy of MatMul " * 6}]}
    wide = markdown([run])
    assert fit_to_width(wide, 200) == wide
    narrow = fit_to_width(wide, 80)
    lines = narrow.splitlines()
    assert max(len(line) for line in lines) <= 80, narrow
    # every word of the wide table whole in the narrow view (a label there ends with ':')
    def bare(text):
        return {w.removesuffix(":") for w in words(text) if set(w) - set("|-")}

    assert bare(wide) <= bare(narrow), narrow
    assert "smsg:" in lines and "  step s: 0.125" in lines
