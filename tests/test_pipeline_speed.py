"""What makes ``plan --pipeline auto`` fast, checked against the slow way: the compute floor
bounds the layer costs it prunes by, pruning changes no plan, and the graphs of all micro-batch
sizes come from two captures."""
from __future__ import annotations

import json

import pytest

from smsg_ms.planner import plan_network_pipelined
from smsg_ms.planner.stage_costs import StageCosts

NET = {"layers": 4, "seq": 64, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 96}


def _capture(captured):
    return lambda b: captured("llama", batch=b, **NET)


@pytest.mark.parametrize("d,b", [(1, 4), (2, 2), (4, 1), (8, 4), (8, 1)])
def test_compute_floor_bounds_the_layer_costs(captured, d, b):
    costs = StageCosts("llama", "ascend910b", capture=_capture(captured))
    floor = costs.compute_floor(d, b)
    layers = costs(d, b)
    total = sum(x.forward_seconds + x.backward_seconds for x in layers)
    assert 0 < floor <= total * (1 + 1e-12)
    assert costs.solves == 1


def test_pruning_changes_no_plan(captured, monkeypatch):
    stats: dict = {}
    fast = plan_network_pipelined("llama", 8, global_batch=16, capture=_capture(captured),
                                  memory_gib=0.02, stats=stats, **NET)
    # 0 is also a floor (no pruning): the slow, exhaustive search
    monkeypatch.setattr(StageCosts, "compute_floor", lambda self, d, b: 0.0)
    slow_stats: dict = {}
    slow = plan_network_pipelined("llama", 8, global_batch=16, capture=_capture(captured),
                                  memory_gib=0.02, stats=slow_stats, **NET)
    a, b = json.loads(fast.to_json()), json.loads(slow.to_json())
    # the candidates list what each search evaluated (pruning evaluates fewer optimizer levels
    # and micro-batch counts), and the content hash covers them: everything else is the plan
    a["pipeline"].pop("candidates"), b["pipeline"].pop("candidates")
    a.pop("content_hash"), b.pop("content_hash")
    assert a == b
    assert stats["stage_solves"] <= slow_stats["stage_solves"]
    # p ∈ {1, 2, 4} (≤ 4 blocks), m | 16 with m ≥ p: at most 5 + 4 + 3 distinct (d, b)
    assert slow_stats["stage_solves"] <= 12
    assert stats["captures"] == slow_stats["captures"] == 2
