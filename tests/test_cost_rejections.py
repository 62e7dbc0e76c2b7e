"""Strategy rejection: ``CostModel.check`` raises exactly when MindSpore's parallel compiler
refuses the strategy (CPU dry-run on 8 devices is the oracle).

One bank network holds one operator per family; each compile sets the strategy of one operator
only (the others keep MindSpore's default), since one refusal aborts the whole compile.
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun

SPEC = "smsg_ms.networks.testnets:build"
OPS = [
    {"type": "MatMul", "init": {}, "inputs": [["act", [64, 32]], ["param", [32, 16]]], "args": []},
    {"type": "BatchMatMul", "init": {},
     "inputs": [["act", [8, 8, 16, 32]], ["act", [8, 8, 32, 16]]], "args": []},
    {"type": "Softmax", "init": {"axis": -1}, "inputs": [["act", [16, 8, 32]]], "args": []},
    {"type": "LayerNorm", "init": {"begin_norm_axis": -1, "begin_params_axis": -1},
     "inputs": [["act", [64, 32]], ["param", [32]], ["param", [32]]], "args": []},
    {"type": "Gather", "init": {}, "inputs": [["param", [128, 32]], ["index", [64], 128]],
     "args": [0]},
]
#: (operator index, strategy, why it is informative)
CASES = [
    (0, [[2, 2], [2, 2]], "valid mixed cut"),
    (0, [[2, 4], [2, 1]], "shared dimension cut differently"),
    (0, [[4, 4], [4, 1]], "product 16 exceeds 8 devices"),
    (0, [[3, 1], [1, 1]], "cut does not divide"),
    (1, [[2, 1, 1, 2], [1, 1, 2, 1]], "batch dimension cut differently"),
    (2, [[2, 1, 4]], "softmax axis cut"),
    (2, [[2, 4, 1]], "valid softmax"),
    (3, [[2, 4], [4], [4]], "normalised axis cut"),
    (4, [[4, 1], [2]], "row split with index cut"),
    (4, [[2, 2], [1]], "row split, repeated calculation, column cut"),
    (4, [[2, 4], [1]], "row and column split using every device"),
    (4, [[1, 4], [2]], "column split with index cut"),
]

#: cases where the model knowingly differs (docs/known-differences.md D5); the test fails when
#: one of them starts to agree.
KNOWN = {"row split with index cut"}  # MindSpore's SHARD_BATCH_AND_AXIS mode, not modelled


@pytest.fixture(scope="module")
def bank():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC, cases=[{"ops": [op]} for op in OPS])


def _pre(i, strat):
    return {f"cases.{i}.steps.0.pre{k}": [s, s] for k, (inp, s) in
            enumerate(zip(OPS[i]["inputs"], strat)) if inp[0] == "act"}


@pytest.mark.parametrize("i,strategy,why", CASES, ids=[c[2] for c in CASES])
def test_check_raises_iff_mindspore_rejects(bank, i, strategy, why):
    path = f"cases.{i}.steps.0.op"
    op = next(o for o in bank.ops if o.prim_path == path)
    try:
        CostModel(bank, 8).check(op, tuple(tuple(s) for s in strategy))
        model_rejects = None
    except StrategyError as exc:
        model_rejects = str(exc)
    strategies = {path: strategy, **_pre(i, strategy)}
    try:
        dryrun.run_child({"job": "compile", "spec": SPEC,
                          "options": {"cases": [{"ops": [o]} for o in OPS]},
                          "strategies": strategies}, devices=8)
        ms_rejects = None
    except dryrun.DryRunError as exc:
        if exc.kind in ("timeout", "crash"):
            raise
        ms_rejects = str(exc).splitlines()[0]
    if why in KNOWN:
        assert (model_rejects is None) != (ms_rejects is None), f"{why} now agrees: drop KNOWN"
        return
    assert (model_rejects is None) == (ms_rejects is None), (
        f"{why}: model {model_rejects or 'accepts'}; MindSpore {ms_rejects or 'accepts'}")
