"""Selective recompute (#17 item 4): per layer the search chooses nothing, the whole layer
(``Cell.recompute()``) or its cheap memory-heavy primitives (``Primitive.recompute()``),
priced against memory. The choice equals a brute force over every layer's three settings and
every contiguous cut, each priced with :func:`smsg_ms.cost.pipeline.stage_cost`.
"""
from __future__ import annotations

import itertools
from collections import Counter

import pytest

from smsg_ms.cost.pipeline import (SELECTIVE, LayerCost, Links, ParamSlice, stage_cost,
                                   stored_activation_bytes, super_step_seconds)
from smsg_ms.search.pipeline import plan_pipeline

SETTINGS = (False, True, SELECTIVE)


def _layers(d, b):
    # forward 1 ms, activations 10 MB of which the selective primitives store 6 MB for 0.1 ms
    return [LayerCost(1e-3, 2e-3, 10e6, 1e6, 1e6, (ParamSlice(1000, 8, d),), f"layers.{i}",
                      selective_seconds=1e-4, selective_bytes=6e6) for i in range(4)]


def test_selective_memory_by_hand():
    layer = _layers(1, 1)[0]
    # keeps 10 - 6 = 4 MB, holds the 6 MB once while recomputing them
    assert stored_activation_bytes([layer], [SELECTIVE]) == (4e6, 6e6)
    assert stored_activation_bytes([layer], [True]) == (1e6, 9e6)


def _brute_force(limit, links):
    best = None
    for p, m in ((1, 2), (2, 2), (2, 4), (4, 4)):
        layers = _layers(4 // p, 8 // m)
        for cut in itertools.combinations(range(1, 4), p - 1):
            bounds = (0,) + cut + (4,)
            for flags in itertools.product(SETTINGS, repeat=4):
                costs = [stage_cost(layers, bounds[s], bounds[s + 1], s, p,
                                    recompute=flags[bounds[s]:bounds[s + 1]], sharding=False,
                                    links=links) for s in range(p)]
                if any(c.memory_bytes > limit for c in costs):
                    continue
                step = super_step_seconds(costs, m)
                if best is None or step < best[0] - 1e-15:
                    best = (step, flags)
    return best


@pytest.mark.parametrize("limit_mb", [60, 35, 22])     # none, selective, whole layers needed
def test_search_recompute_equals_brute_force(limit_mb):
    links = Links(1e9, 1e-4)
    want = _brute_force(limit_mb * 1e6, links)
    got = plan_pipeline(_layers, 4, 8, memory_limit=limit_mb * 1e6, links=links,
                        stages=[1, 2, 4], micro_batches=[2, 4], optimizer_sharding=[False])
    assert got.step_seconds == pytest.approx(want[0], rel=1e-12)
    assert sorted(map(str, got.recompute)) == sorted(map(str, want[1]))
    record = got.as_plan_dict()
    assert record.get("selective_recompute", []) == [
        n for n, r in zip(got.layer_names, got.recompute) if r == SELECTIVE]


NET = {"seq": 16, "layers": 4, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256}
BASE = {"stages": 2, "micro_batches": 2, "optimizer_sharding": False,
        "stage_of_block": {f"layers.{i}": i // 2 for i in range(4)}, "recompute": {}}


def test_selective_recompute_compiles_as_predicted():
    """Dry-run, first stage (blocks 0 and 1, 2 micro-batches) of the built-in LLaMA with and
    without selective recompute of block 0. MindSpore runs every selective primitive of block 0
    once more per micro-batch (the copies carry forward scopes), so each forward count of a
    selective kind grows by half (one of the stage's two blocks); no backward primitive changes;
    and, as the cost model predicts for primitives without forward collectives (a
    data-parallel stage), the inserted collectives are the same."""
    from smsg_ms.dryrun.runner import run_child

    got = {}
    for name, record in (("plain", BASE), ("selective",
                                           dict(BASE, selective_recompute=["layers.0"]))):
        got[name] = run_child({"job": "pipeline_compile", "spec": "llama",
                               "options": dict(NET, batch=2), "pipeline": record},
                              devices=8, rank=0)
    plain, sel = got["plain"]["selective_ops"], got["selective"]["selective_ops"]
    assert set(plain) == set(sel) and any(k.endswith("forward") for k in plain)
    for key, n in plain.items():
        assert sel[key] == (n + n // 2 if key.endswith("forward") else n), key

    def rows(result):
        return Counter((c["type"], c["pass"], tuple(c["out_shape"]))
                       for c in result["collectives"])

    assert rows(got["plain"]) == rows(got["selective"])
