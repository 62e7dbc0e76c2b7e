"""Pipelined plans built for each stage's devices (issue #14): with ``p`` stages on ``n``
devices MindSpore's compile builds the network with ``pipeline_stages = p`` on ``n`` devices,
and a network that reads the world size (mindformers' ``data_parallel = n / p``) sees a stage
of ``n / p`` devices; the capture is built for that stage size, per distinct size, and only for
networks that read it.

Network: ``smsg_ms.networks.world_blocks:build``, 2 blocks, hidden 32; each reshapes its
``(16, 32)`` micro-batch to ``(dp, -1)`` rows for a Softmax, ``dp`` = world size / stages.
On 8 devices in 2 stages (global batch 32, 2 micro-batches) ``dp = 4``: built for the stage's 4
devices the rows are ``(4, 128)`` and the plan can cut them 4 ways; captured on one device they
are ``(1, 512)`` and it cannot. MindSpore's own compile (the dry-run) is the oracle.
"""
from __future__ import annotations

import functools

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage

SPEC = "smsg_ms.networks.world_blocks:build"
NET = {"layers": 2, "hidden": 32}


@functools.lru_cache(maxsize=None)
def _planned(stages, build_for_devices=True, spec=SPEC):
    from smsg_ms.planner import plan_network_pipelined

    stats: dict = {}
    plan = plan_network_pipelined(spec, 8, global_batch=32, stages=stages, micro_batches=2,
                                  stats=stats, build_for_devices=build_for_devices, **NET)
    return plan, stats


def _strategies(plan, op_type):
    return [d.strategy for d in plan.decisions if d.op_type == op_type]


def test_two_stages_built_for_the_stage_and_checked_by_mindspore():
    plan, stats = _planned(2)
    assert plan.built_for == 4 and '"built_for": 4' in plan.to_json()
    assert stats["stage_sizes_built_for"] == [4] and stats["captures"] == 1
    # the (4, 128) rows cut 4 ways: a strategy the one-device capture's (1, 512) rows refuse
    assert _strategies(plan, "Softmax") == [[[4, 1]], [[4, 1]]]
    unbuilt, _ = _planned(2, False)
    assert unbuilt.built_for is None and _strategies(unbuilt, "Softmax") == [[[1, 1]], [[1, 1]]]
    # check captures as the plan did (its built_for: same fingerprint) and MindSpore's compile
    # of 2 stages on 8 devices (dp = 8 / 2) inserts what the plan predicts
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    assert report.ok, [(r.key, r.predicted, r.inserted) for rk in report.ranks for r in rk.rows]


def test_pipeline_auto_captures_per_stage_size():
    """``--pipeline auto`` on 8 devices with 2 blocks: 1 or 2 stages, stages of 8 or 4 devices,
    each captured built for its size; the plan records the chosen stage's."""
    plan, stats = _planned("auto")
    assert stats["stage_sizes_built_for"] == [4, 8]
    stages = int(plan.pipeline["stages"])
    assert plan.built_for == 8 // stages


def test_a_network_that_does_not_read_the_world_size_is_captured_once():
    """The side-tensor chain reads no world size: one family of captures for every stage
    size, and the same plan, byte for byte, as built for the capture's one device."""
    spec = "smsg_ms.networks.side_tensor:build"
    built, stats = _planned("auto", True, spec)
    unbuilt, before = _planned("auto", False, spec)
    assert built.built_for is None and stats["stage_sizes_built_for"] == []
    assert stats["captures"] == before["captures"]
    assert built.to_json() == unbuilt.to_json()
