"""A side tensor crossing a pipeline stage boundary beside the activation (mindformers' MoE
layers pass the router's auxiliary loss ``extra_loss`` from layer to layer) gets its own
Send/Receive, predicted as MindSpore inserts them.

Network: ``smsg_ms.networks.side_tensor:build``, 2 blocks on 2 stages of 4 devices, global
batch 32 in 2 micro-batches (16 each), hidden 32. Each block returns ``(ReLU(x @ w), aux +
mean((x @ w)², axis 0))``; the network returns ``x + aux``. By hand: the activation's
per-device slice is at most ``(16, 32)`` and the side tensor's ``(32,)`` (a reduction over the
batch leaves no cut dimension), both float32; per micro-batch stage 0 Sends each forward and
Receives each gradient backward, stage 1 the reverse: 2 of each row per stage. MindSpore's
own compile (the dry-run) is the oracle for the rows.
"""
from __future__ import annotations

import functools

import pytest

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage
from integration_support import assert_border_rows

SPEC = "smsg_ms.networks.side_tensor:build"
NET = {"layers": 2, "hidden": 32}


@functools.lru_cache(maxsize=None)
def _checked():
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined(SPEC, 8, global_batch=32, stages=2, micro_batches=2, **NET)
    return plan, check_plan(plan, ranks_per_stage(8, 2))


def test_side_tensor_recorded():
    plan, _ = _checked()
    assert plan.pipeline["boundary_extra"] == [{"shape": [32], "dtype": "float32"}]
    assert plan.pipeline["boundary_dtype"] == "float32"


def test_side_tensor_send_receive_match_mindspore():
    """Every Send/Receive row agrees, the side tensor's ``(32,)`` rows among them (before the
    record had ``boundary_extra`` they were inserted, 2 each, and not predicted)."""
    _, report = _checked()
    assert_border_rows(report, (32,), "float32", 2)


def test_side_tensor_priced_as_its_own_send():
    """The border's transfers are one Send per tensor: with a latency-only link (bandwidth
    infinite), the block's output costs two latencies per direction, not one."""
    from smsg_ms.cost.pipeline import LayerCost, Links, border_seconds

    links = Links(bandwidth=float("inf"), latency=1.0)
    one = LayerCost(0, 0, 0, 0, 2176.0)
    two = LayerCost(0, 0, 0, 0, 2176.0, output_sizes=(2048.0, 128.0))
    last = LayerCost(0, 0, 0, 2176.0, 0)
    assert border_seconds([one, last], 0, 1, links) == pytest.approx(2.0)
    assert border_seconds([two, last], 0, 1, links) == pytest.approx(4.0)
