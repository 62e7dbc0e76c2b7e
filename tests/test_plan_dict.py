"""``Plan.to_dict`` is ``dataclasses.asdict`` (the oracle), computed faster: same data, deep copy."""
from __future__ import annotations

import dataclasses
from collections import namedtuple

from smsg_ms.plan import OpDecision, Plan

Pair = namedtuple("Pair", "a b")


def _plan() -> Plan:
    d1 = OpDecision("layers.0.wq.matmul", "MatMul", [[2, 1], [1, 4]], seconds=1.5e-3,
                    breakdown={"compute": 1e-3, "AllReduce": 5e-4},
                    collectives=[{"kind": "AllReduce", "group": 4, "bytes": 2.0, "tensor": "x"}],
                    runner_up={"strategy": [[8, 1], [1, 1]], "extra_seconds": 2e-4},
                    block="layers.*", notes=["a note"])
    d2 = OpDecision("reshape_3", "Reshape", None, shardable=False,
                    breakdown={"shape": (2, 3), "pair": Pair(1, [2])})
    return Plan("llama", "f" * 64, 8, {"layers": 2, "seq": (128,)}, [[8, 128]], "ascend910b",
                [d1, d2], totals={"step_seconds": 0.25, "none": None},
                dataset_strategy=[[8, 1]], pipeline={"stages": 2, "stage_of_block": {"a": 0}})


def test_to_dict_equals_asdict():
    plan = _plan()
    got, want = plan.to_dict(), dataclasses.asdict(plan)
    assert want.pop("write_back") == "shard"     # the default is left out (older plans' hash)
    assert want.pop("enable_alltoall") is False  # likewise
    assert want.pop("out_strategies") == {}      # likewise
    assert want.pop("built_for") is None         # likewise
    assert got == want
    plan.write_back = "propagate"
    plan.enable_alltoall = True
    plan.out_strategies = {"layers.0.wq.matmul": [[8, 1]]}
    plan.built_for = 8
    assert plan.to_dict() == dataclasses.asdict(plan)
    assert type(got["decisions"][1]["breakdown"]["shape"]) is tuple
    assert type(got["decisions"][1]["breakdown"]["pair"]) is Pair


def test_to_dict_is_a_deep_copy():
    plan = _plan()
    got = plan.to_dict()
    got["decisions"][0]["strategy"][0][0] = 99
    got["decisions"][0]["breakdown"]["compute"] = 0.0
    got["options"]["seq"] = None
    got["decisions"][1]["breakdown"]["pair"].b.append(7)
    assert plan.decisions[0].strategy == [[2, 1], [1, 4]]
    assert plan.decisions[0].breakdown["compute"] == 1e-3
    assert plan.options["seq"] == (128,)
    assert plan.decisions[1].breakdown["pair"].b == [2]
    assert plan.to_json() == _plan().to_json()


def test_content_hash_is_the_sha256_of_asdict_json():
    """The hash is over ``asdict`` (a deep copy, not the shallow view the plan hashes) written
    as compact sorted-key JSON by orjson; that text parses back to the same data."""
    import hashlib
    import json

    import orjson

    plan = _plan()
    data = dataclasses.asdict(plan)
    data.pop("content_hash")
    assert data.pop("write_back") == "shard"  # the default is left out of the file and the hash
    assert data.pop("enable_alltoall") is False  # likewise
    assert data.pop("out_strategies") == {}      # likewise
    assert data.pop("built_for") is None         # likewise
    text = orjson.dumps(data, default=list, option=orjson.OPT_SORT_KEYS)  # namedtuple: array
    assert json.loads(text) == json.loads(json.dumps(data))
    assert plan.compute_hash() == hashlib.sha256(text).hexdigest()
    sealed = plan.seal()
    assert sealed.content_hash == hashlib.sha256(text).hexdigest()
    assert sealed.compute_hash() == sealed.content_hash   # the hash excludes itself


def test_non_json_values_fail_and_nan_never_reaches_a_file(tmp_path):
    """A value JSON cannot hold fails the hash (TypeError); NaN is refused where plans are
    written and read, not by the hash (orjson writes it as null)."""
    import pytest

    from smsg_ms.integration.plan_io import PlanError, plan_from_text

    plan = _plan()
    plan.totals["step_seconds"] = float("nan")
    with pytest.raises(ValueError):
        plan.seal().to_json()
    good = _plan().seal().to_json()
    assert plan_from_text(good).content_hash == _plan().seal().content_hash
    with pytest.raises(PlanError, match="NaN"):
        plan_from_text(good.replace('"compute": 0.001', '"compute": NaN', 1))
    plan = _plan()
    plan.decisions[0].notes = [object()]
    with pytest.raises(TypeError):
        plan.compute_hash()
    plan = _plan()
    plan.decisions[0].extra = 1       # an attribute beyond the fields is not hashed
    assert plan.compute_hash() == _plan().compute_hash()


def test_build_options_give_a_pipelined_plan_its_micro_batch():
    """Issue #14 item 4: a pipelined plan's options record the global batch (16 in 4
    micro-batches), the network is built at 16 / 4 = 4; a plan file written before (options
    holding the micro-batch, 4) builds the same; a single-stage plan builds with its options."""
    record = {"stages": 2, "micro_batches": 4, "global_batch": 16, "micro_batch_size": 4}
    piped = Plan("llama", "f" * 64, 8, {"layers": 2, "batch": 16}, [[4, 128]], "a", [],
                 pipeline=record)
    assert piped.build_options() == {"layers": 2, "batch": 4}
    assert piped.options == {"layers": 2, "batch": 16}     # not changed by the call
    older = dataclasses.replace(piped, options={"layers": 2, "batch": 4})
    assert older.build_options() == {"layers": 2, "batch": 4}
    single = _plan()
    assert single.build_options() == single.options and single.build_options() is not \
        single.options
