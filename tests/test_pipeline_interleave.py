"""Interleaved (virtual) pipeline stages and uneven stage splits (#17 item 3).

Dry-run: the built-in LLaMA (4 blocks) on 8 devices, 2 stages × 2 virtual stages (blocks on
stages 0, 1, 0, 1: MindSpore's ``pipeline_interleave``), and an uneven split (1 block, then 3).
MindSpore is the oracle for the Send/Receive it inserts: per chunk boundary ``c → c + 1`` and
micro-batch a forward Send on stage ``c mod p`` and Receive on ``c + 1 mod p``, and the reverse
backward pair; with 2 × 2 chunks stage 0 sends forward at two boundaries and receives at one.

Search: the virtual-stage count and chunk cut the outer search picks equal a brute force over
``v`` and every cut into ``p·v`` chunks, priced with :func:`smsg_ms.cost.pipeline.chunks_cost`.
"""
from __future__ import annotations

import functools
import itertools
from collections import Counter

import pytest

from smsg_ms.cost.pipeline import (LayerCost, Links, ParamSlice, bubble_fraction, chunks_cost,
                                   step_slots)
from smsg_ms.dryrun.runner import run_child
from smsg_ms.integration.pipeline import (PipelineWriteBackError, check_pipeline,
                                          pipeline_context, predicted_point_to_point)
from smsg_ms.search.pipeline import plan_pipeline

NET = {"seq": 16, "layers": 4, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256}
RECORDS = {
    "interleaved": {"stages": 2, "micro_batches": 4, "virtual_stages": 2,
                    "stage_of_block": {"layers.0": 0, "layers.1": 1, "layers.2": 0,
                                       "layers.3": 1}},
    "uneven": {"stages": 2, "micro_batches": 2,
               "stage_of_block": {"layers.0": 0, "layers.1": 1, "layers.2": 1, "layers.3": 1}},
}


@functools.lru_cache(maxsize=None)
def _compile(case: str, rank: int) -> dict:
    return run_child({"job": "pipeline_compile", "spec": "llama",
                      "options": dict(NET, batch=2), "pipeline": RECORDS[case]},
                     devices=8, rank=rank)


@pytest.mark.parametrize("case", sorted(RECORDS))
def test_send_receive_match_prediction(case):
    record = RECORDS[case]
    want = predicted_point_to_point(record, [2 * 16 // 4, 64], "float32")
    # the uneven split on its 3-block stage only (its Send/Receive counts match an even split's)
    for stage, rank in ((0, 0), (1, 4)) if case == "interleaved" else ((1, 4),):
        got = Counter((c["type"], c["pass"], tuple(c["out_shape"]))
                      for c in _compile(case, rank)["collectives"]
                      if c["type"] in ("Send", "Receive"))
        expect = Counter()
        for w in want[stage]:         # one row per chunk boundary: equal keys add up
            expect[(w["type"], w["pass"], tuple(w["shape"]))] += w["count"]
        assert got == expect, f"{case}: stage {stage}"
    if case == "interleaved":      # derived by hand: 3 chunk boundaries, m = 4
        assert sum(w["count"] for w in want[0] if w["type"] == "Send"
                   and w["pass"] == "forward") == 2 * 4


def test_interleave_written_as_mindspore_config():
    ctx = pipeline_context(RECORDS["interleaved"])
    assert ctx["pipeline_config"] == {"pipeline_interleave": True, "pipeline_scheduler": "1f1b"}
    check_pipeline(RECORDS["interleaved"], 8)
    with pytest.raises(PipelineWriteBackError, match="not 2 rounds"):
        check_pipeline(dict(RECORDS["interleaved"], stage_of_block={"a": 0, "b": 1, "c": 1,
                                                                    "d": 0}), 8)


def test_interleaved_bubble_by_hand():
    # Narayanan et al. §2.2.2: bubble (p-1)/(v m) of the ideal time -> (p-1)/(v m + p - 1)
    assert bubble_fraction(4, 8, 2) == pytest.approx(3 / 19)
    assert step_slots(4, 8, 2) == pytest.approx(9.5)


def _layers(d, b):
    return [LayerCost(1e-3 * b / d * (1 + 0.5 * (i == 4)), 2e-3 * b / d, 1e6, 1e5, 1e5,
                      (ParamSlice(1000, 8, d),), f"layers.{i}") for i in range(6)]


def _brute_force(links):
    best = None
    for p, m in ((2, 2), (2, 4)):
        layers = _layers(4 // p, 8 // m)
        for v in (1, 2):
            for cut in itertools.combinations(range(1, 6), p * v - 1):
                bounds = (0,) + cut + (6,)
                costs = [chunks_cost(layers, [(bounds[c], bounds[c + 1])
                                              for c in range(s, p * v, p)], s, p,
                                     recompute=[False] * 6, sharding=False, links=links,
                                     virtual_stages=v) for s in range(p)]
                step = max(step_slots(p, m, v) * c.micro_seconds + c.grad_sync_seconds
                           for c in costs)
                if best is None or step < best[0] - 1e-15:
                    best = (step, v, bounds[:-1])
    return best


@pytest.mark.parametrize("send_latency", [1e-6, 1e-2])   # cheap sends: v = 2; dear: v = 1
def test_search_virtual_stages_equal_brute_force(send_latency):
    links = Links(1e12, send_latency)
    want = _brute_force(links)
    got = plan_pipeline(_layers, 4, 8, memory_limit=1e12, links=links, stages=[2],
                        micro_batches=[2, 4], optimizer_sharding=[False], recompute=False,
                        virtual_stages=(1, 2))
    assert got.step_seconds == pytest.approx(want[0], rel=1e-12)
    assert got.virtual_stages == want[1]
