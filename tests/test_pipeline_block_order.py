"""Pipelined plans of networks with more than ten blocks survive a plan file.

A plan file sorts keys as strings (``layers.10`` before ``layers.2``); the block-to-stage map must
come back in the chain's order, or MindSpore's rule "stages never decrease along the data flow"
looks broken and ``check`` and the training-script path refuse a valid plan. Expected values: the
in-memory plan (the search's own order, ``layers.0`` .. ``layers.N-1``), and MindSpore's parallel
compiler for ``check``.
"""
from __future__ import annotations

import functools

import pytest

from smsg_ms.integration.pipeline import check_pipeline, ranks_per_stage
from smsg_ms.integration.plan_io import load_plan, save_plan
from smsg_ms.plan import OpDecision, in_chain_order

NET = {"seq": 32, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 128}


@functools.lru_cache(maxsize=None)
def _planned(layers: int, devices: int, stages: int):
    from smsg_ms.planner import plan_network_pipelined

    return plan_network_pipelined("llama", devices, global_batch=8, stages=stages,
                                  micro_batches=stages, layers=layers, workers=1, **NET)


def _reloaded(tmp_path, layers, devices, stages):
    plan = _planned(layers, devices, stages)
    return plan, load_plan(save_plan(plan, tmp_path / "p.plan.json"))


@pytest.mark.parametrize("layers,devices,stages", [(12, 16, 2), (80, 16, 4)])
def test_reloaded_map_is_in_block_order(tmp_path, layers, devices, stages):
    plan, loaded = _reloaded(tmp_path, layers, devices, stages)
    names = [f"layers.{i}" for i in range(layers)]
    assert list(plan.pipeline["stage_of_block"]) == names
    assert list(loaded.pipeline["stage_of_block"]) == names
    assert list(loaded.pipeline["recompute"]) == names
    assert loaded.pipeline == plan.pipeline and loaded.content_hash == plan.content_hash
    stages_along = list(loaded.pipeline["stage_of_block"].values())
    assert stages_along == sorted(stages_along) and set(stages_along) == set(range(stages))
    check_pipeline(loaded.pipeline, devices)


def test_chain_order_comes_from_the_graph_not_the_names():
    """Blocks whose names sort the other way round (decoder before encoder) keep graph order."""
    decisions = [OpDecision(name=n, op_type="MatMul", strategy=None) for n in
                 ("embed", "encoder.block.0.mm", "encoder.block.1.mm", "decoder.block.0.mm")]
    record = {"stages": 2, "stage_of_block": {"decoder.block.0": 1, "encoder.block.0": 0,
                                              "encoder.block.1": 0}}
    ordered = in_chain_order(record, decisions)
    assert list(ordered["stage_of_block"]) == ["encoder.block.0", "encoder.block.1",
                                               "decoder.block.0"]
    # a block with no decision follows the others, digit runs compared as numbers
    record["stage_of_block"].update({"extra.10": 1, "extra.9": 1})
    assert list(in_chain_order(record, decisions)["stage_of_block"])[-2:] == ["extra.9",
                                                                              "extra.10"]


def test_training_script_path_marks_every_block(tmp_path):
    """``apply_plan`` of the reloaded 12-block plan marks each block with its stage."""
    import mindspore as ms

    from smsg_ms.integration.annotate import apply_plan
    from smsg_ms.networks import build_network

    plan, loaded = _reloaded(tmp_path, 12, 16, 2)
    built = build_network("llama", no_init=True, **loaded.build_options())
    saved = ms.get_auto_parallel_context("pipeline_stages")
    try:
        ms.set_auto_parallel_context(pipeline_stages=2)
        apply_plan(built.net, tmp_path / "p.plan.json", devices=16, set_context=False)
        cells = dict(built.net.cells_and_names())
        assert {f"layers.{i}": cells[f"layers.{i}"].pipeline_stage for i in range(12)} == \
            plan.pipeline["stage_of_block"]
    finally:
        ms.set_auto_parallel_context(pipeline_stages=saved)


@pytest.mark.slow
def test_check_passes_on_the_reloaded_12_block_plan(tmp_path):
    """MindSpore compiles each stage's first rank of the reloaded plan; every compared
    collective and every Send/Receive agrees."""
    from smsg_ms.integration.check import check_plan

    _, loaded = _reloaded(tmp_path, 12, 16, 2)
    report = check_plan(loaded, ranks_per_stage(16, 2))
    for r in report.ranks:
        assert r.error is None, r.error
        assert all(row.ok for row in r.rows) and all(row.ok for row in r.p2p)
    assert report.ok
