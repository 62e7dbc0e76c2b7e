"""Optimizer-state sharding levels (#17 item 4): MindSpore 2.10's ``optimizer_level``.

Dry-run: a pipelined built-in LLaMA (the network of ``tests/test_pipeline_check.py``: every weight
replicated on the stage's 4 devices, 7 of them per block above the 64 KB threshold) planned at
level 2 and level 3 is checked by MindSpore's compiler: the optimizer collectives it inserts must
equal the plan's prediction, row by row. Counts derived here (``m = 4`` micro-batches): level 2
ReduceScatters each sharded gradient once per micro-batch (its accumulator is sharded) and gathers
the weight once per step; level 3 also gathers the weight twice per micro-batch.

Search: the level the outer search picks equals a brute force over levels × contiguous cuts ×
recompute flags, each priced with :func:`smsg_ms.cost.pipeline.stage_cost`.
"""
from __future__ import annotations

import copy
import functools
import itertools

import pytest

from smsg_ms.cost.pipeline import (LayerCost, Links, ParamSlice, parameter_memory, stage_cost,
                                   super_step_seconds)
from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import pipeline_context, ranks_per_stage
from smsg_ms.search.pipeline import plan_pipeline

NET = {"layers": 4, "seq": 256, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 256}
MICRO = 4


@pytest.fixture(scope="module")
def level2_plan(capture_of):
    """The network planned at level 2 (its captures shared with tests/test_pipeline_check.py's
    plans of the same network)."""
    from smsg_ms.planner import plan_network_pipelined

    return plan_network_pipelined("llama", 8, global_batch=64, stages=2, micro_batches=MICRO,
                                  optimizer_sharding="level2", capture=capture_of("llama", **NET),
                                  **NET)


@pytest.fixture(scope="module")
def checked(level2_plan):
    """``checked(level)``: the level-2 plan (the stage plan does not depend on the level: every
    weight replicated), its record at ``level``, checked on the first stage (level 2: the
    embedding table) or the last (level 3: the head): one compile each."""
    @functools.lru_cache(maxsize=None)
    def run(level: str):
        plan = copy.deepcopy(level2_plan)
        plan.pipeline = dict(plan.pipeline, optimizer_level=level)
        plan.seal()
        return plan, check_plan(plan, ranks_per_stage(8, 2)[:1] if level == "level2" else
                                ranks_per_stage(8, 2)[1:])
    return run


@pytest.mark.parametrize("level,matmul_gathers,lookup_gathers,scatters", [
    ("level2", 1, 1, MICRO), ("level3", 2 * MICRO, MICRO, MICRO)])
def test_level_collectives_match_mindspore(checked, level, matmul_gathers, lookup_gathers,
                                          scatters):
    """Per stage 2 blocks of 7 sharded MatMul weights plus the embedding table (stage 0, read
    by a Gather: at level 3 not gathered again for the backward pass) or the head (stage 1)."""
    plan, report = checked(level)
    assert plan.pipeline["optimizer_level"] == level
    for r in report.ranks:
        assert r.error is None, r.error
        bad = [row for row in r.rows if not row.ok] + [row for row in r.p2p if not row.ok]
        assert not bad, f"stage {r.stage}: {bad}"
        got = {row.key: row.inserted for row in r.rows if row.planned}
        matmuls, lookups = (14, 1) if r.stage == 0 else (15, 0)
        assert got[("AllGather", "forward", 4)] == (matmuls * matmul_gathers
                                                    + lookups * lookup_gathers)
        assert got[("ReduceScatter", "backward", 4)] == (matmuls + lookups) * scatters
    assert report.ok


def test_level_written_as_mindspore_config():
    assert pipeline_context({"stages": 2, "micro_batches": 2, "optimizer_sharding": True,
                             "optimizer_level": "level2"}) == {
        "enable_parallel_optimizer": True, "pipeline_stages": 2,
        "parallel_optimizer_config": {"optimizer_level": "level2"}}
    # level 1 is MindSpore's default: old plan files write what they wrote before
    assert "parallel_optimizer_config" not in pipeline_context(
        {"stages": 2, "micro_batches": 2, "optimizer_sharding": True})


def test_level2_memory_by_hand():
    # 1000 elements on 4 replicas, 2 + 2 + 12 bytes: level 1 divides weight and state by 4,
    # level 2 the gradient too
    prm = [ParamSlice(1000, 8, 4)]
    assert parameter_memory(prm, "level1") == {"parameter": 500.0, "gradient": 2000.0,
                                               "optimizer": 3000.0}
    assert parameter_memory(prm, "level2") == {"parameter": 500.0, "gradient": 500.0,
                                               "optimizer": 3000.0}


LEVELS = (False, "level1", "level2", "level3")


def _layers(d, b):
    # big weights, small activations: memory decides how much to shard
    return [LayerCost(1e-3 * b / d, 2e-3 * b / d, 4e6 * b / d, 1e5 * b / d, 1e5 * b / d,
                      (ParamSlice(4_000_000 // 1, 4096, d),), f"layers.{i}") for i in range(4)]


def _brute_force(devices, batch, limit, links):
    best = None
    for p in (1, 2, 4):
        for m in (x for x in (1, 2, 4, 8) if x >= p and batch % x == 0):
            layers = _layers(devices // p, batch // m)
            for level, cut in itertools.product(LEVELS, itertools.combinations(range(1, 4),
                                                                               p - 1)):
                bounds = (0,) + cut + (4,)
                for flags in itertools.product((False, True), repeat=4):
                    costs = [stage_cost(layers, bounds[s], bounds[s + 1], s, p,
                                        recompute=flags[bounds[s]:bounds[s + 1]],
                                        sharding=level, links=links) for s in range(p)]
                    if any(c.memory_bytes > limit for c in costs):
                        continue
                    step = super_step_seconds(costs, m)
                    if best is None or step < best[0] - 1e-15:
                        best = (step, level or None)
    return best


@pytest.mark.parametrize("limit_mb", [300, 110, 40])    # off, level1, level2 win
def test_search_level_equals_brute_force(limit_mb):
    links = Links(1e10, 1e-5)
    limit = limit_mb * 1e6
    want = _brute_force(8, 8, limit, links)
    got = plan_pipeline(_layers, 8, 8, memory_limit=limit, links=links, stages=[1, 2, 4],
                        micro_batches=[1, 2, 4, 8], optimizer_sharding=LEVELS)
    assert got.step_seconds == pytest.approx(want[0], rel=1e-12)
    assert got.optimizer_level == want[1]
