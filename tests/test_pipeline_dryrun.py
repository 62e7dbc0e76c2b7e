"""Pipelined plans of the built-in LLaMA compiled by MindSpore's parallel compiler (CPU dry-run).

The pipeline record comes from the outer search (identical synthetic layer costs, stage count
forced), is written back with :mod:`smsg_ms.integration.pipeline`, and every stage's first rank
(``s × devices / p``) is compiled. MindSpore is the oracle for the Send/Receive it inserts:
per boundary and micro-batch one forward Send/Receive and one backward (gradient) pair, of the
per-device slice of the hidden state. With no strategy set, MindSpore gives the un-annotated
operators a batch-parallel strategy over the stage's devices (``shared/docs/mindspore-notes.md``),
so the slice is ``(micro_batch · seq / (devices / p), hidden)``.
"""
from __future__ import annotations

import functools
from collections import Counter

import pytest

from smsg_ms.cost.pipeline import LayerCost, Links, ParamSlice
from smsg_ms.dryrun.runner import run_child
from smsg_ms.integration.pipeline import (PipelineWriteBackError, check_pipeline,
                                          predicted_point_to_point, ranks_per_stage)
from smsg_ms.search.pipeline import plan_pipeline

DEVICES, LAYERS, SEQ, HIDDEN, MICRO_BATCH = 8, 4, 16, 64, 2
NET = {"seq": SEQ, "layers": LAYERS, "hidden": HIDDEN, "heads": 4, "ffn": 128, "vocab": 256}


def _record(stages: int, sharding: bool) -> dict:
    def costs(d, b):
        return [LayerCost(1.0 * b / d, 2.0 * b / d, 100.0 * b, 10.0 * b, 10.0 * b,
                          (ParamSlice(64, 64, d),), f"layers.{i}") for i in range(LAYERS)]
    plan = plan_pipeline(costs, DEVICES, MICRO_BATCH * stages, memory_limit=1e12,
                         links=Links(1e9), stages=[stages], micro_batches=[stages],
                         optimizer_sharding=[sharding])
    record = plan.as_plan_dict()
    record["recompute"] = {"layers.1": True}      # exercise Cell.recompute() as well
    return record


@functools.lru_cache(maxsize=None)
def _compile(stages: int, sharding: bool, rank: int) -> dict:
    return run_child({"job": "pipeline_compile", "spec": "llama",
                      "options": dict(NET, batch=MICRO_BATCH),
                      "pipeline": _record(stages, sharding)}, devices=DEVICES, rank=rank)


@pytest.mark.parametrize("stages,sharding", [(2, True), (4, False)])
def test_send_receive_match_prediction(stages, sharding):
    record = _record(stages, sharding)
    assert record["stages"] == stages
    assert list(record["stage_of_block"].values()) == [s for s in range(stages)
                                                       for _ in range(LAYERS // stages)]
    slice_rows = MICRO_BATCH * SEQ // (DEVICES // stages)
    want = predicted_point_to_point(record, [slice_rows, HIDDEN], "float32")
    for stage, rank in enumerate(ranks_per_stage(DEVICES, stages)):
        result = _compile(stages, sharding, rank)
        got = Counter((c["type"], c["pass"], tuple(c["out_shape"]), c["dtype"])
                      for c in result["collectives"] if c["type"] in ("Send", "Receive"))
        expect = Counter({(w["type"], w["pass"], tuple(w["shape"]), w["dtype"]): w["count"]
                          for w in want[stage]})
        assert got == expect, f"stage {stage} (rank {rank})"
        peers = {c["attrs"].get("dest_rank", c["attrs"].get("src_rank"))
                 for c in result["collectives"] if c["type"] in ("Send", "Receive")}
        neighbours = {r for r in (rank - DEVICES // stages, rank + DEVICES // stages)
                      if 0 <= r < DEVICES}
        assert peers == neighbours


def test_check_pipeline_names_the_culprit():
    with pytest.raises(PipelineWriteBackError, match="micro_batches 2 < stages 4"):
        check_pipeline({"stages": 4, "micro_batches": 2}, 8)
    with pytest.raises(PipelineWriteBackError, match="does not divide 8"):
        check_pipeline({"stages": 3, "micro_batches": 4}, 8)
    with pytest.raises(PipelineWriteBackError, match="decreases"):
        check_pipeline({"stages": 2, "micro_batches": 2,
                        "stage_of_block": {"a": 1, "b": 0}}, 8)
