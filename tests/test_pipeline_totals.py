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
    assert "step (stage plan) / micro-batch, with gradient sync" in text, text
    assert re.search(r"time / micro-batch.*\n.*\(no gradient sync\)", text), text


def test_two_stages_headline_is_the_super_step(capture_of):
    """8 devices, p = 2, m = 2, global batch 4: micro-batch 2 on a stage's 4 devices. The
    super-step spans (m + p − 1) = 3 slots of the slowest stage, so it exceeds the stage
    plan's one-micro-batch step; totals show it first, the rest per micro-batch, and the
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
    assert "step = 1F1B super-step" in text
    assert "step (stage plan) / micro-batch, with gradient sync" in text, text
    assert "(no gradient sync)" in text, text
    assert "compute / micro-batch" in text or "computation / micro-batch" in text, text
    assert "parameters (stage plan)" in text and "parameters / micro-batch" not in text, text
    assert "not divisible by 4 devices of a stage" in text, text
    assert "step / pure data parallel" not in text
