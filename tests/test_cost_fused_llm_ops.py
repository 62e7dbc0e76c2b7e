"""LLM operators against MindSpore's parallel compiler (dry-run, 8 devices): Swiglu
(``SwigluInfo``, ``ops_info/activation_info.h``), RotaryPositionEmbedding
(``RotaryPositionEmbeddingInfo``; ``cos``/``sin`` ``11SD`` beside ``x`` BNSD, without gradient)
and Tile (``TileInfo``, ``ops_info/tile_info.cc``; mindformers GLM2's ``tile_kv`` repeats the
key/value heads ``(B, N_kv, 1, S·D)`` by ``(1, 1, rep, 1)``).

Accepted strategies compiled once as a bank (one compile), collectives compared per case and
phase (``assert_bank_matches``); rejections: ``CostModel.check`` raises exactly when MindSpore
refuses the strategy (each rejected case compiled alone; the bank and the rejected cases all
in one dry-run child: ``compile_each``).
"""
from __future__ import annotations

import pytest

from test_cost_families import DEVICES, act, capture_bank, case_op, compile_job, state, strategies
from test_cost_vs_mindspore import assert_bank_matches

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun


X = act(8, 16, 32)  # (batch, sequence, 2·F): F = 16
ROPE_X, COS = act(8, 4, 16, 8), state(1, 1, 16, 8)  # x BNSD, cos and sin 11SD
ROPE = ("RotaryPositionEmbedding", {}, [ROPE_X, COS, COS])
KV, KV3 = act(4, 8, 1, 16), act(8, 4, 16)  # GLM2's tile_kv input (B, N_kv, 1, S·D); a 3-D one
ACCEPTED = [
    ("swiglu batch cut", "Swiglu", {}, [X], [[8, 1, 1]], [-1]),
    ("swiglu batch and sequence cut", "Swiglu", {}, [X], [[2, 4, 1]], [-1]),
    ("swiglu half the devices (repeated)", "Swiglu", {}, [X], [[4, 1, 1]], [-1]),
    ("swiglu dim 1, last dimension cut", "Swiglu", {}, [X], [[1, 1, 8]], [1]),
    ("rope batch and heads cut", *ROPE, [[4, 2, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], [0]),
    ("rope batch and sequence cut", *ROPE, [[2, 1, 4, 1], [1, 1, 4, 1], [1, 1, 4, 1]], [0]),
    ("rope half the devices (repeated)", *ROPE, [[4, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]],
     [0]),
    ("tile batch and heads cut, copies whole", "Tile", {}, [KV], [[2, 4, 1, 1]], [[1, 1, 4, 1]]),
    ("tile copies cut", "Tile", {}, [KV], [[2, 1, 4, 1]], [[1, 1, 4, 1]]),
    ("tile 3-D copies and batch cut", "Tile", {}, [KV3], [[4, 2, 1]], [[1, 2, 1]]),
    ("tile copies whole, producer cuts them", "Tile", {}, [KV3], [[4, 1, 1]], [[1, 2, 1]]),
]
#: the producer's (``pre0``, an Add) strategy where it is not the case's own: Tile's input keeps
#: a dimension under a multiple whole (``tile_info.cc``, ``InferTensorMap``), so the Add cuts
#: it 1-way, or (last case) 2-way: the redistribution then gathers it (group 2)
PRE = {"tile copies cut": [[2, 1, 1, 1], [2, 1, 1, 1]],
       "tile 3-D copies and batch cut": [[4, 1, 1], [4, 1, 1]],
       "tile copies whole, producer cuts them": [[4, 2, 1], [4, 2, 1]],
       "tile copies cut 8-way, multiple 4": [[1, 1, 1, 1], [1, 1, 1, 1]]}
#: (rejected case, index of the accepted case with the same operator and shapes); MindSpore's
#: messages: Swiglu "The strategy corresponding to axis dimension is not 1"; RoPE "The
#: strategy for each input must be equal to strategies[0]" (for the D cut as well)
REJECTED = [
    (("swiglu dim cut", "Swiglu", {}, [X], [[1, 1, 8]], [-1]), 0),
    (("rope head dimension D cut", *ROPE, [[1, 1, 1, 8], [1, 1, 1, 8], [1, 1, 1, 8]], [0]), 4),
    (("rope sequence cut, cos not", *ROPE, [[2, 1, 4, 1], [1, 1, 1, 1], [1, 1, 1, 1]], [0]), 4),
    (("tile copies cut 8-way, multiple 4", "Tile", {}, [KV], [[1, 1, 8, 1]], [[1, 1, 4, 1]]), 7),
]


def case_strategies(cases):
    """:func:`strategies` with the producers of :data:`PRE` set to theirs."""
    out = strategies(cases)
    for i, case in enumerate(cases):
        if case[0] in PRE:
            out[f"cases.{i}.steps.0.pre0"] = PRE[case[0]]
    return out


@pytest.fixture(scope="module")
def bank():
    return capture_bank(ACCEPTED)


@pytest.fixture(scope="module")
def compiled():
    """One dry-run child (``compile_each``) for every compile of the module: the bank of
    accepted cases (first), then each rejected case alone."""
    jobs = [compile_job(ACCEPTED, case_strategies(ACCEPTED))]
    jobs += [compile_job([case], case_strategies([case])) for case, _ in REJECTED]
    return dryrun.run_child({"job": "compile_each", "jobs": jobs}, devices=DEVICES)["results"]


def test_collectives_equal_mindspore(bank, compiled):
    """What MindSpore inserts equals the model's prediction, case by case: with its ``Add``
    before it at the same strategy, a Swiglu adds no collective; the gradient of the ``Add``'s
    bias (8, 16, 32) is AllReduced over the devices that hold the same slice. A Tile adds
    none of its own; its input, kept whole under a multiple, is gathered from a producer that
    cuts it."""
    strats = case_strategies(ACCEPTED)
    result = compiled[0]
    assert result["ok"], result.get("error")
    model = CostModel(bank, DEVICES)
    assert_bank_matches([c[0] for c in ACCEPTED], result["collectives"], bank, model, strats,
                        set())


def test_rope_flops_by_hand(bank):
    """x (8, 4, 16, 8) cut (4, 2, 1, 1): local (2, 2, 16, 8) = 512 elements; forward 4 FLOPs
    each = 2048; backward 3 each per gradient (x only: cos and sin have none) = 1536."""
    cost = CostModel(bank, DEVICES).check(case_op(bank, 4), ((4, 2, 1, 1), (1, 1, 1, 1),
                                                          (1, 1, 1, 1)))
    assert cost.flops_fwd == 4 * 2 * 2 * 16 * 8
    assert cost.flops_bwd == 3 * 2 * 2 * 16 * 8


def test_output_is_half_of_dim_and_flops_by_hand(bank):
    """x (8, 16, 32) cut (8, 1, 1): local output (1, 16, 16) = 256 elements; forward 5 FLOPs
    each (sigmoid 3, two multiplies) = 1280; backward 8 each = 2048 per gradient."""
    op = case_op(bank, 0)
    assert bank.tensors[op.outputs[0]].shape == (8, 16, 16)  # MindSpore's own shape inference
    cost = CostModel(bank, DEVICES).check(op, ((8, 1, 1),))
    assert cost.flops_fwd == 5 * 1 * 16 * 16
    assert cost.flops_bwd == 8 * 1 * 16 * 16


@pytest.fixture(scope="module")
def refusals(compiled):
    """MindSpore's answer to each rejected case compiled alone."""
    return compiled[1:]


@pytest.mark.parametrize("i", range(len(REJECTED)), ids=[c[0][0] for c in REJECTED])
def test_check_raises_iff_mindspore_rejects(bank, refusals, i):
    """The model refuses the strategy on the bank's operator of the same shapes; MindSpore's
    compile of it alone fails (an error it raises: a crash or a timeout would fail the whole
    child, and with it the fixture)."""
    case, same = REJECTED[i]
    assert ACCEPTED[same][1:4] + ACCEPTED[same][5:] == case[1:4] + case[5:]
    with pytest.raises(StrategyError):
        CostModel(bank, DEVICES).check(case_op(bank, same), tuple(tuple(s) for s in case[4]))
    assert refusals[i]["ok"] is False, f"MindSpore accepted {case[0]}"
