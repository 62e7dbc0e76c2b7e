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
"""
from __future__ import annotations

import pytest

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
