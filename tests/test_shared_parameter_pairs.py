"""The price of a parameter read on three or more pipeline stages, by MindSpore's rule
(``PipelineTransformer::HandleSharedParameter``, ``pipeline_transformer.cc``): the first stage
reading it Sends it once per step to each other stage reading it and Receives each one's
gradient (one Send/Receive pair per other stage); every other reading stage pays one pair.
The rows of that rule are checked against MindSpore's compile in
``tests/test_pipeline_tied_stages.py``.

Hand derivation on a latency-only link (bandwidth infinite, latency 1 s: every transfer costs
1 s, a pair 2 s), one layer per stage, a parameter ``table`` of 8192 bytes:

* read by layers 0, 1, 2 on stages 0, 1, 2: stage 0 sends to 2 stages, 2 pairs = 4 s; stages
  1 and 2 one pair each, 2 s;
* read by layers 0 and 2 on stages 0, 1, 2: stage 0 and 2 one pair each (2 s), stage 1 none;
* read by layers 0, 1, 3 on 4 stages: 4 s, 2 s, 0, 2 s;
* read by layers 0, 2 with layers 0-1 on stage 0 and 2 on stage 1: 2 s each (two stages).

Dry-run (:func:`test_four_stages_match_mindspore`): ``smsg_ms.networks.tied_stages`` with 4
blocks on 4 stages of 2 devices, block 1 reading the table too (``tied_block=1``): the table is
read on stages 0, 1 and 3. MindSpore's compile inserts its slice 2 + 2 times on stage 0 (a
forward Send and a backward Receive per other reading stage), 1 + 1 on stages 1 and 3, none on
stage 2: the transfers the price counts.
"""
from __future__ import annotations

import pytest

import functools

from smsg_ms.cost.pipeline import LayerCost, Links, chunks_cost, shared_parameter_seconds

LINKS = Links(bandwidth=float("inf"), latency=1.0)


def _chain(n: int, readers: set[int]) -> list[LayerCost]:
    return [LayerCost(0, 0, 0, 0, 0, shared=(("table", 8192.0),) if i in readers else ())
            for i in range(n)]


@pytest.mark.parametrize("n, readers, stage_of, want", [
    (3, {0, 1, 2}, [0, 1, 2], [4.0, 2.0, 2.0]),
    (3, {0, 2}, [0, 1, 2], [2.0, 0.0, 2.0]),
    (4, {0, 1, 3}, [0, 1, 2, 3], [4.0, 2.0, 0.0, 2.0]),
    (3, {0, 2}, [0, 0, 1], [2.0, 2.0]),
])
def test_one_pair_per_other_reading_stage(n, readers, stage_of, want):
    layers = _chain(n, readers)
    for stage, seconds in enumerate(want):
        at = [i for i, s in enumerate(stage_of) if s == stage]
        chunk = [(at[0], at[-1] + 1)]
        assert shared_parameter_seconds(layers, chunk, LINKS, stage_of) == pytest.approx(seconds)
        base = chunks_cost(_chain(n, set()), chunk, stage, len(want), recompute=[False] * len(at),
                           sharding=False, links=LINKS, micro_batches=2, stage_of=stage_of)
        got = chunks_cost(layers, chunk, stage, len(want), recompute=[False] * len(at),
                          sharding=False, links=LINKS, micro_batches=2, stage_of=stage_of)
        assert got.grad_sync_seconds - base.grad_sync_seconds == pytest.approx(seconds)


def test_interleaved_stage_holding_two_readers():
    """Two stages, two virtual stages: layers 0..3 on stages 0, 1, 0, 1; readers 0 and 2 both on
    stage 0 (nothing sent), readers 1 and 3 both on stage 1 likewise; readers 0 and 3: a pair
    each."""
    stage_of = [0, 1, 0, 1]
    same = _chain(4, {0, 2})
    assert shared_parameter_seconds(same, [(0, 1), (2, 3)], LINKS, stage_of) == 0.0
    assert shared_parameter_seconds(same, [(1, 2), (3, 4)], LINKS, stage_of) == 0.0
    apart = _chain(4, {0, 3})
    assert shared_parameter_seconds(apart, [(0, 1), (2, 3)], LINKS, stage_of) == 2.0
    assert shared_parameter_seconds(apart, [(1, 2), (3, 4)], LINKS, stage_of) == 2.0


@functools.lru_cache(maxsize=None)
def _four_stages():
    from smsg_ms.integration.check import check_plan
    from smsg_ms.integration.pipeline import ranks_per_stage
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined("smsg_ms.networks.tied_stages:build", 8, global_batch=16,
                                  stages=4, micro_batches=4, layers=4, tied_block=1)
    return plan, check_plan(plan, ranks_per_stage(8, 4))


def test_four_stages_match_mindspore():
    plan, report = _four_stages()
    (prm,) = plan.pipeline["shared_parameters"]
    assert prm["stages"] == [0, 1, 3]
    assert list(plan.pipeline["stage_of_block"].values()) == [0, 1, 2, 3]
    table = tuple(prm["shape"])
    layers = _chain(4, {0, 1, 3})
    for r in report.ranks:
        assert r.error is None, r.error
        assert all(row.ok for row in r.p2p), r.p2p
        inserted = sum(row.inserted for row in r.p2p if row.key[2] == table)
        priced = shared_parameter_seconds(layers, [(r.stage, r.stage + 1)], LINKS, [0, 1, 2, 3])
        assert inserted == priced == [4, 2, 0, 2][r.stage], (r.stage, inserted, priced)
    assert report.ok
