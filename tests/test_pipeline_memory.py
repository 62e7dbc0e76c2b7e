"""The per-device memory limit inside a pipeline's stage plan (:mod:`smsg_ms.planner.stage_memory`).

Derived case: the built-in LLaMA (2 blocks, hidden 512, sequence 256) on 8 devices, 2 stages of
4 devices, 2 micro-batches, no recompute and no optimizer sharding. The first stage holds its
block, the embedding and the stored activations of ``p − 0 = 2`` micro-batches in flight (1F1B).
With the limit at 80 % of what the fastest stage plan needs there, that plan cannot be used; the
stage plan is solved again under the first stage's memory row and must fit. Its memory is
recomputed here from the plan's own decisions, independently of the search's rows: every
parameter element costs 16 bytes (mixed-precision Adam: fp16 weight and gradient, fp32 master and
two moments, ZeRO §3; the LLaMA weights are fp32, 4 bytes per element in the decisions) and every
stored activation byte counts once per micro-batch in flight.
"""
from __future__ import annotations

import pytest

from smsg_ms.planner import plan_network_pipelined
from smsg_ms.planner.pipelined import stage_of_decision

NET = {"layers": 2, "seq": 256, "hidden": 512, "heads": 4, "ffn": 1024, "vocab": 1024}
RUN = dict(stages=2, micro_batches=2, optimizer_sharding=False, recompute=False, global_batch=8,
           **NET)


@pytest.fixture(scope="module")
def capture(capture_of):
    """The network's captures, shared by every plan of this module."""
    return capture_of("llama", **NET)


@pytest.fixture(scope="module")
def plans(capture):
    free = plan_network_pipelined("llama", 8, capture=capture, **RUN)
    # below stage 0's free plan, so its stage plan must be solved again within the limit; not
    # so far below that no stage plan fits (under the machine model with launch latency and
    # overlap the free stage plans are leaner than before: 0.8 left none)
    limit = 0.85 * free.pipeline["stage_memory_bytes"][0]
    tight = plan_network_pipelined("llama", 8, memory_gib=limit / 2**30, capture=capture, **RUN)
    return free, tight, limit


def _stage_bytes(plan) -> list[float]:
    where = stage_of_decision(plan)
    p = plan.pipeline["stages"]
    out = [0.0] * p
    for d in plan.decisions:
        s = where[d.name]
        out[s] += (p - s) * d.breakdown.get("activation_bytes", 0.0)
        out[s] += d.breakdown.get("parameter_bytes", 0.0) / 4 * 16
    return out


def test_free_plan_does_not_fit_the_limit(plans):
    free, _, limit = plans
    assert "stage_plan_memory_limit" not in free.pipeline
    assert _stage_bytes(free)[0] == pytest.approx(free.pipeline["stage_memory_bytes"][0])
    assert _stage_bytes(free)[0] > limit


def test_stage_plan_solved_within_the_limit(plans):
    free, tight, limit = plans
    assert tight.pipeline["stage_plan_memory_limit"] == pytest.approx(limit)
    assert list(tight.pipeline["stage_of_block"].values()) == [0, 1]
    need = _stage_bytes(tight)
    assert all(n <= limit for n in need), (need, limit)
    assert need == pytest.approx(tight.pipeline["stage_memory_bytes"])
    # a constraint cannot make the optimum faster; it changed the first block's strategies
    assert tight.pipeline["step_seconds"] >= free.pipeline["step_seconds"]
    first = sorted(k for k in free.strategies if k.startswith("layers.0."))
    assert any(free.strategies[k] != tight.strategies[k] for k in first)


def test_nothing_fits_names_the_limit(capture):
    from smsg_ms.search.pipeline import NoFeasiblePipeline

    with pytest.raises(NoFeasiblePipeline, match="GiB per device"):
        plan_network_pipelined("llama", 8, memory_gib=1e-4, capture=capture, **RUN)


def test_tiny_time_limit_still_fits(plans, capture):
    """With almost no search work allowed, the memory-limited stage solves keep their best
    fitting plan: still within the limit, and no faster than the exact one."""
    _, tight, limit = plans
    bounded = plan_network_pipelined("llama", 8, memory_gib=limit / 2**30, time_limit=1e-9,
                                     capture=capture, **RUN)
    assert all(n <= limit for n in _stage_bytes(bounded))
    assert bounded.pipeline["step_seconds"] >= tight.pipeline["step_seconds"] * (1 - 1e-12)
