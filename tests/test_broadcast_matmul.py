"""BatchMatMul with broadcast batch axes (mindformers LLaMA's default RoPE, ``x (B, N, S, D)`` by
``swap_mask (D, D)``), which MindSpore refuses on CPU/GPU, captured and compiled through its
stand-in (``smsg_ms/graph/broadcast_matmul.py``: ``MatMulExt``, the same ``MatMul`` operator
info in ``ops_info/matmul_info.cc``) against MindSpore's parallel compiler (8 devices).

Accepted strategies compiled as one bank (one compile), collectives compared per case
(``assert_bank_matches``); a strategy whose batch cut of the 2-D weight side cannot exist, or
whose ``k`` cuts disagree, is refused by the model exactly when MindSpore refuses it. All
compiles in one dry-run child (``compile_each``).
"""
from __future__ import annotations

import pytest

from test_cost_families import DEVICES, act, capture_bank, case_op, compile_job, param, strategies
from test_cost_vs_mindspore import assert_bank_matches

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun


X, W = act(8, 4, 16, 16), param(16, 16)  # x BNSD, a 2-D weight (D, D) broadcast over B, N
X3, W3 = act(4, 16, 16), param(16, 32)   # a 3-D x by a 2-D weight, n = 32
BMM = ("BatchMatMul", {})
ACCEPTED = [
    ("batch cut", *BMM, [X, W], [[8, 1, 1, 1], [1, 1]]),
    ("batch and heads cut", *BMM, [X, W], [[2, 4, 1, 1], [1, 1]]),
    ("rows (sequence) cut", *BMM, [X, W], [[2, 1, 4, 1], [1, 1]]),
    ("contracting cut: forward AllReduce", *BMM, [X, W], [[2, 1, 1, 4], [4, 1]]),
    ("columns cut: the weight cut", *BMM, [X, W], [[2, 1, 1, 1], [1, 4]]),
    ("3-D by 2-D, batch and columns cut", *BMM, [X3, W3], [[4, 1, 1], [1, 2]]),
    ("half the devices (repeated)", *BMM, [X, W], [[4, 1, 1, 1], [1, 1]]),
]
#: (rejected case, index of the accepted case with the same operator and shapes); MindSpore:
#: "the shard num of first input's column is 4, but the shard num of second input's row is 2"
REJECTED = [
    (("contracting cuts differ", *BMM, [X, W], [[2, 1, 1, 4], [2, 1]]), 3),
]


@pytest.fixture(scope="module")
def bank():
    return capture_bank(ACCEPTED)


@pytest.fixture(scope="module")
def compiled():
    """One dry-run child for every compile of the module: the bank of accepted cases (first),
    then each rejected case alone."""
    jobs = [compile_job(ACCEPTED)] + [compile_job([case]) for case, _ in REJECTED]
    return dryrun.run_child({"job": "compile_each", "jobs": jobs}, devices=DEVICES)["results"]


def test_captured_as_the_users_batch_matmul(bank):
    """The stand-in is invisible in the capture: the operator is the network's BatchMatMul,
    with its flags, and MindSpore's broadcast shape ``(8, 4, 16, 16)``."""
    for i, case in enumerate(ACCEPTED):
        op = case_op(bank, i)
        assert op.type == "BatchMatMul", case[0]
        assert op.attrs.get("transpose_a") is False and op.attrs.get("transpose_b") is False
        assert "smsg_stands_for" not in op.attrs
    assert bank.tensors[case_op(bank, 0).outputs[0]].shape == (8, 4, 16, 16)
    assert bank.tensors[case_op(bank, 5).outputs[0]].shape == (4, 16, 32)


def test_collectives_equal_mindspore(bank, compiled):
    """What MindSpore inserts for the stand-in equals the model's BatchMatMul prediction, case
    by case: the ``k`` cut's forward AllReduce, the 2-D weight's gradient AllReduce over the
    devices that hold the same slice of it (every device but its own cut)."""
    result = compiled[0]
    assert result["ok"], result.get("error")
    assert_bank_matches([c[0] for c in ACCEPTED], result["collectives"], bank,
                        CostModel(bank, DEVICES), strategies(ACCEPTED), set())


def test_flops_by_hand(bank):
    """(8, 4, 16, 16) · (16, 16) cut (2, 1, 1, 4)(4, 1): local (4, 4, 16, 4) · (4, 16): 2·m·k·n
    per batch element = 2·16·4·16 = 2048, times 16 local batch elements = 32768 forward."""
    cost = CostModel(bank, DEVICES).check(case_op(bank, 3), ((2, 1, 1, 4), (4, 1)))
    assert cost.flops_fwd == 2 * 16 * 4 * 16 * 4 * 4


@pytest.mark.parametrize("i", range(len(REJECTED)), ids=[c[0][0] for c in REJECTED])
def test_check_raises_iff_mindspore_rejects(bank, compiled, i):
    case, same = REJECTED[i]
    assert ACCEPTED[same][1:4] == case[1:4]
    with pytest.raises(StrategyError):
        CostModel(bank, DEVICES).check(case_op(bank, same), tuple(tuple(s) for s in case[4]))
    assert compiled[1 + i]["ok"] is False, f"MindSpore accepted {case[0]}"
    assert "cannot be broadcast" not in compiled[1 + i]["error"], compiled[1 + i]["error"]
