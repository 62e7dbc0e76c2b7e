"""One step figure for pipelined plans.

Derivation (1F1B, ``smsg_ms.cost.pipeline``): super-step = max_s ((m + p − 1)·t_s + g_s). With
p = 1 and m = 1 the one stage is the whole network on all devices with the whole batch, so
t_0 = the plain plan's step minus its gradient synchronisation (the per-block sums, see
tests/test_pipeline_plan.py::test_layer_costs_add_up_to_the_stage_plan) and g_0 = that
synchronisation, if both models price the gradient AllReduce alike (parameter dtype: fp32 here):
super-step = 1·(step − sync) + sync = the plain plan's step.
"""
from __future__ import annotations

import io
import math
import re

import pytest
from rich.console import Console

from smsg_ms.planner import plan_network_pipelined
from smsg_ms.planner import plan_graph
from smsg_ms.report.tables import print_summary

OPTIONS = {"layers": 2, "seq": 64}
BATCH = 4


def _text(plan) -> str:
    out = io.StringIO()
    print_summary(plan, Console(file=out, width=200))
    return out.getvalue()


def test_one_stage_one_micro_batch_equals_plain_step(captured, capture_of):
    plain = plan_graph(captured("llama", batch=BATCH, **OPTIONS), 4, memory_gib=math.inf)
    # the case the two models disagreed on: the plan synchronises gradients (with one
    # micro-batch, no accumulation, both hide it behind the backward pass alike)
    assert any(c.get("phase") == "grad_sync" for d in plain.decisions for c in d.collectives)
    piped = plan_network_pipelined("llama", 4, stages=1, micro_batches=1,
                                   optimizer_sharding=False, global_batch=BATCH,
                                   capture=capture_of("llama", **OPTIONS), **OPTIONS)
    want = plain.totals["step_seconds"]
    assert piped.pipeline["step_seconds"] == pytest.approx(want, rel=1e-9)
    assert piped.totals["step_seconds"] == pytest.approx(want, rel=1e-9)
    assert piped.totals["micro_batch_step_seconds"] == pytest.approx(want, rel=1e-9)
    # t_0 = step − sync − update (module docstring): the pipeline table's time per micro-batch
    # is without the once-per-step gradient sync and optimizer update, the totals' stage-plan
    # step with them; each is labelled so
    sync = plain.totals["grad_sync"]       # the exposed part (0 s when fully hidden)
    sync += plain.totals["update"]         # the optimizer's update, once per step (g_s)
    assert piped.pipeline["stage_seconds"][0] == pytest.approx(want - sync, rel=1e-9)
    text = _text(piped)
    assert "step, with gradient sync and optimizer update" in text, text
    assert re.search(r"time / micro-batch.*\n.*\(no gradient sync\)", text), text


def test_two_stages_headline_is_the_super_step(capture_of):
    """8 devices, p = 2, m = 2, global batch 4: micro-batch 2 on a stage's 4 devices. The
    super-step spans (m + p − 1) = 3 slots of the slowest stage, so it exceeds the stage
    plan's one-micro-batch step; the chosen configuration's totals show it, the stage plan's
    table its one-micro-batch parts, and the
    missing data-parallel baseline names the stage's 4 devices (2 % 4 != 0)."""
    plan = plan_network_pipelined("llama", 8, stages=2, micro_batches=2,
                                  optimizer_sharding=False, global_batch=BATCH,
                                  capture=capture_of("llama", **OPTIONS), **OPTIONS)
    rec = plan.pipeline
    assert (rec["stages"], rec["micro_batches"], rec["devices_per_stage"]) == (2, 2, 4)
    assert plan.totals["step_seconds"] == rec["step_seconds"]
    slowest = max(rec["stage_seconds"])
    assert rec["step_seconds"] >= 3 * slowest
    text = _text(plan)
    assert "step (1F1B super-step)" in text
    assert "step, with gradient sync and optimizer update" in text, text
    assert "(no gradient sync)" in text, text
    assert "/ micro-batch" not in text.split("pipeline:")[0], text
    assert "not divisible by 4 devices of a stage" in text, text
    assert "step / pure data parallel" not in text


UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9,
         "B": 1.0, "KiB": 2.0 ** 10, "MiB": 2.0 ** 20, "GiB": 2.0 ** 30}


def _value(text: str) -> float:
    number, unit = text.split()
    return float(number) * UNITS[unit]


def _tables(text: str) -> list[tuple[str, dict[str, str]]]:
    """``(title, {quantity: value})`` of each two-column table printed by ``print_summary``."""
    out, title, rows = [], [], None
    for line in text.splitlines():
        if line.startswith("┏"):
            rows = {}
            out.append((" ".join(" ".join(title).split()), rows))
        elif line.startswith("└"):
            rows, title = None, []
        elif rows is not None and line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if len(cells) == 2:
                rows[cells[0]] = cells[1]
        elif rows is None and not line.startswith(("┃", "┡")):
            title = title[-3:] + [line]
    return out


def test_chosen_totals_are_the_recorded_configuration_s(tmp_path):
    """A 2-stage plan file (16 devices, 8 per stage, 2 micro-batches): the chosen
    configuration's table holds its step (the pipeline record's ``chosen`` step, the one the
    search minimised) and its memory per device (the largest of the record's per-stage memory)
    and nothing of the stage plan; the stage plan's table holds the stage plan's step, whose
    time parts (computation, collectives, exposed gradient sync, redistribution, optimizer
    update) add up to it."""
    from pathlib import Path

    from smsg_ms.integration.plan_io import load_plan

    plan = load_plan(Path(__file__).parent
                     / "data/plans_before_redesign/llama12-16dev-p2-mb2.plan.json")
    rec = plan.pipeline
    tables = _tables(_text(plan))
    (chosen_title, chosen), = [t for t in tables if "chosen configuration" in t[0]]
    (stage_title, stage), = [t for t in tables if t[0].startswith("stage plan")]
    assert "8 devices" in stage_title and f"micro-batch of {rec['micro_batch_size']}" in stage_title
    assert len(chosen) == 2, chosen
    step = next(v for k, v in chosen.items() if k.startswith("step"))
    assert _value(step) == pytest.approx(rec["chosen"]["step_seconds"], rel=1e-3)
    memory = next(v for k, v in chosen.items() if k.startswith("memory per device"))
    assert _value(memory) == pytest.approx(max(rec["stage_memory_bytes"]), rel=1e-3)
    # the stage plan's step is another number (one micro-batch, no bubble), shown apart
    stage_step = _value(next(v for k, v in stage.items() if k.startswith("step")))
    assert stage_step == pytest.approx(plan.totals["micro_batch_step_seconds"], rel=1e-3)
    assert abs(stage_step - rec["chosen"]["step_seconds"]) > 1e-3 * stage_step
    time_rows = [v for k, v in stage.items()
                 if not k.startswith(("step", "pure data parallel"))
                 and v.split()[-1] in ("s", "ms", "µs", "ns")]
    assert sum(_value(v) for v in time_rows) == pytest.approx(stage_step, rel=1e-3)
