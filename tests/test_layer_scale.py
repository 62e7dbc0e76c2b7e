"""A functional product whose first input is a weight (ConvNeXt's layer scale ``gamma * x``):
its semi-auto default and its pipeline stage, against MindSpore's compiler (CPU dry-run).

Network: :mod:`smsg_ms.networks.layer_scale` (4 blocks of Dense, ``gamma * h``, residual; batch
8, width 32). Expected values, derived here: MindSpore's batch-parallel default
(``GenerateBatchStrategiesBySplitFlag``, ``ops_info/operator_info.cc``) leaves the weight
``gamma`` whole and keeps ``h`` cut on its batch, so a data-parallel plan needs no AllGather and
every weight (per block: Dense weight and bias, gamma) is AllReduced once over the devices that
hold the same slice. Pipelined on 2 stages of 4 devices, each stage holds 2 blocks and their
2 gammas. Before the fix the model priced the product replicated (a gather of ``h``), so the
plan chose the propagate write-back, and it put the gammas of the first stage on the last
(stage 0: 4 gradient AllReduces predicted, 6 inserted).
"""
from __future__ import annotations

import copy

import pytest

from smsg_ms.integration.check import check_plan
from smsg_ms.integration.pipeline import ranks_per_stage
from smsg_ms.planner import plan_graph, plan_network_pipelined
from smsg_ms.planner.errors import PipelinePlanningError

SPEC = "smsg_ms.networks.layer_scale:build"


def _bad(rank):
    return [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]


def test_weight_first_product_keeps_batch_cut(captured, shared_capture):
    plan = plan_graph(captured(SPEC), 8, network=SPEC, progress=False)
    # the product's default costs nothing but the weight's gradient sync: no propagation needed
    assert plan.write_back == "shard"
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    assert not _bad(rank), f"(key, predicted, inserted): {_bad(rank)}"
    inserted = {row.key: row.inserted for row in rank.rows}
    assert not inserted.get(("AllGather", "forward", 8))


@pytest.fixture(scope="module")
def pipelined(capture_of, shared_capture):
    """The 2-stage plan (2 micro-batches), planned once for the module from the session's
    captures (``check_plan``'s fingerprint capture reuses them: ``shared_capture``)."""
    return plan_network_pipelined(SPEC, 8, global_batch=8, stages=2, micro_batches=2,
                                  capture=capture_of(SPEC))


def test_functional_weight_on_its_blocks_stage(pipelined):
    stages = 2
    plan = pipelined
    assert plan.pipeline["stages"] == stages
    # block 0 ends with a Reshape (its proj Dense): the only border is after block 1
    assert plan.pipeline["stage_of_block"] == {"blocks.0": 0, "blocks.1": 0, "blocks.2": 1,
                                               "blocks.3": 1}
    report = check_plan(plan, ranks_per_stage(8, stages))
    for rank in report.ranks:
        assert rank.error is None, rank.error
        assert not _bad(rank), f"stage {rank.stage}: {_bad(rank)}"
        got = {row.key: row.inserted for row in rank.rows}
        # the stage's two gammas at least (the product leaves them whole on its 4 devices)
        assert got.get(("AllReduce", "grad_sync", 8 // stages), 0) >= 4 // stages


def test_no_stage_border_after_a_reshape(pipelined, capture_of):
    """MindSpore refuses the border the planner avoids; a stage count needing it is refused
    with that reason."""
    plan = copy.deepcopy(pipelined)
    plan.pipeline["stage_of_block"] = {"blocks.0": 0, "blocks.1": 1, "blocks.2": 1,
                                       "blocks.3": 1}
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error and "Reshape op can't be a border" in rank.error
    with pytest.raises(PipelinePlanningError, match="Reshape op can't be a border"):
        plan_network_pipelined(SPEC, 8, global_batch=8, stages=4, micro_batches=4,
                               capture=capture_of(SPEC))
