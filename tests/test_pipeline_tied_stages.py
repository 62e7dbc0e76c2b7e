"""A parameter read on two pipeline stages (an embedding table tied to the output head, GPT-2's
layout; mindformers' DeepSeek-V3 MTP layer on the last stage reads stage 0's table) is sent
between them once per step, as MindSpore's ``PipelineTransformer::HandleSharedParameter``
(``pipeline_transformer.cc``) does: predicted rows and price.

Network: ``smsg_ms.networks.tied_stages:build``, 2 blocks on 2 stages of 4 devices, global
batch 32 in 2 micro-batches, vocab 64, hidden 32; the embedding runs on stage 0, the head on
stage 1. MindSpore's own compile (the dry-run) is the oracle for the rows: stage 0 Sends the table's slice forward and Receives its gradient once
per step, stage 1 the reverse; the activation's rows stay 2 each (per micro-batch).
"""
from __future__ import annotations

import functools

import pytest

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage
from integration_support import assert_border_rows

SPEC = "smsg_ms.networks.tied_stages:build"


@functools.lru_cache(maxsize=None)
def _checked():
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined(SPEC, 8, global_batch=32, stages=2, micro_batches=2)
    return plan, check_plan(plan, ranks_per_stage(8, 2))


def test_shared_table_recorded():
    plan, _ = _checked()
    (prm,) = plan.pipeline["shared_parameters"]
    assert prm["stages"] == [0, 1] and prm["dtype"] == "float32"
    assert prm["name"].endswith("table")


def test_shared_table_send_receive_match_mindspore():
    """Every Send/Receive row agrees with MindSpore's compile, the table's once-per-step rows
    among them (before ``shared_parameters`` they were inserted, 1 each, and not predicted)."""
    plan, report = _checked()
    table = tuple(plan.pipeline["shared_parameters"][0]["shape"])
    assert_border_rows(report, table, "float32", 1)


def test_shared_parameter_priced_once_per_step():
    """Hand derivation: a latency-only link (bandwidth infinite, latency 1 s): a 8192-byte
    parameter read by layers 0 and 1 costs each of the two stages one Send and one Receive
    (2 s) once per step, in ``grad_sync_seconds``; on one stage holding both readers, none."""
    from smsg_ms.cost.pipeline import LayerCost, Links, chunks_cost, shared_parameter_seconds

    links = Links(bandwidth=float("inf"), latency=1.0)
    plain = [LayerCost(0, 0, 0, 0, 0), LayerCost(0, 0, 0, 0, 0)]
    tied = [LayerCost(0, 0, 0, 0, 0, shared=(("table", 8192.0),)),
            LayerCost(0, 0, 0, 0, 0, shared=(("table", 8192.0),))]
    assert shared_parameter_seconds(tied, [(0, 1)], links) == pytest.approx(2.0)
    assert shared_parameter_seconds(tied, [(1, 2)], links) == pytest.approx(2.0)
    assert shared_parameter_seconds(tied, [(0, 2)], links) == 0.0
    for stage, chunk in enumerate([(0, 1), (1, 2)]):
        base = chunks_cost(plain, [chunk], stage, 2, recompute=[False], sharding=False,
                           links=links, micro_batches=2)
        got = chunks_cost(tied, [chunk], stage, 2, recompute=[False], sharding=False,
                          links=links, micro_batches=2)
        assert got.grad_sync_seconds - base.grad_sync_seconds == pytest.approx(2.0)
        assert got.micro_seconds == base.micro_seconds
