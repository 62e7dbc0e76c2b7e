"""``explain``'s per-operator memory under optimizer sharding (a new user's trial): each
operator's optimizer state is divided as the pipeline's stage memory divides it, so the rows add
up to the totals' sharded optimizer state.

Derivation, not read from the planner: the built-in LLaMA at the width of
``tests/test_pipeline_check.py`` (hidden 128, FFN 256, sequence 256) has a data-parallel stage
plan, so every weight is whole on each of a stage's 4 devices and MindSpore shards it 4-way when
its whole size is at least the 64 KB ``parallel_optimizer_threshold`` (the RMSNorm weights, 512 B,
are not). Adam keeps two fp32 moments, 8 bytes per element, so the optimizer state of the whole
network on one device of each stage is ``Σ 8·numel / (4 if numel·4 B ≥ 64 KB else 1)`` over the
trained parameters of the captured graph.
"""
from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

NET = {"layers": 4, "seq": 256, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 256}
UNITS = {"B": 1.0, "KiB": 2.0 ** 10, "MiB": 2.0 ** 20, "GiB": 2.0 ** 30}


@pytest.fixture(scope="module")
def sharded(capture_of):
    from smsg_ms.planner import plan_network_pipelined

    return plan_network_pipelined("llama", 8, global_batch=64, stages=2, micro_batches=4,
                                  optimizer_sharding=True, capture=capture_of("llama", **NET),
                                  **NET)


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * UNITS[unit]


def test_per_operator_optimizer_state_adds_up_to_the_sharded_total(sharded, captured):
    from smsg_ms.graph.model import DTYPE_BYTES
    from smsg_ms.report.explain_view import print_explain
    from smsg_ms.report.tables import stage_plan_rows

    plan = sharded
    graph = captured("llama", batch=16, **NET)
    trained = [t for t in graph.parameters() if t.requires_grad and t.numel]
    big = {t.name for t in trained if t.numel * DTYPE_BYTES.get(t.dtype, 4) >= 64 * 1024}
    # the premise: a data-parallel stage plan, every weight above the threshold sharded 4-way
    assert plan.pipeline["devices_per_stage"] == 4
    assert plan.pipeline["optimizer_sharded"] == {name: 4 for name in big}
    want = sum(8 * t.numel / (4 if t.name in big else 1) for t in trained)
    assert want < plan.totals["optimizer_bytes"]        # the stage plan's, unsharded

    out = io.StringIO()
    print_explain(plan, Console(file=out, width=200), show_all=True)
    rows = re.findall(r"optimizer state (\d[\d.]* [KMG]?i?B)", out.getvalue())
    assert len(rows) >= len(trained) - 1, rows       # an operator per weight, printed
    assert sum(_bytes(r) for r in rows) == pytest.approx(want, rel=1e-3)
    assert "(sharded 4-way)" in out.getvalue()

    (total,) = [v for label, v in stage_plan_rows(plan)
                if label.startswith("optimizer state, optimizer-sharded")]
    assert _bytes(total) == pytest.approx(want, rel=1e-3)
