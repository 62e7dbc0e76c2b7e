"""The FlashAttentionScore family against MindSpore's parallel compiler (dry-run, 8 devices).

Accepted strategies (BNSD and BSH layouts, grouped and single KV heads) compiled once as a bank,
collectives compared per case and phase; rejections: ``CostModel.check`` raises exactly when
MindSpore refuses; what the model refuses although MindSpore accepts (query sequence cut,
repeated calculation, a query-sequence cut of masked or banded attention) is refused with its
reason; the query-sequence cut of full attention (context parallel) is an accepted case.
"""
from __future__ import annotations

from collections import Counter

import pytest

from test_cost_families import (DEVICES, SPEC, act, capture_bank, capture_cache, case_op,
                                compile_job, refused_by_both, strategies)
from test_cost_vs_mindspore import _key, mirror, observed, predicted

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun

NONES = [None] * 7  # real_shift, drop_mask, padding_mask, attn_mask, prefix, actual lengths


def fa(name, layout, q, kv, strategy):
    return (name, "FlashAttentionScore", {"head_num": 4, "input_layout": layout},
            [act(*q), act(*kv), act(*kv)], [strategy[0], strategy[1], strategy[1]], NONES)


GQA = ((4, 4, 16, 8), (4, 2, 16, 8))     # BNSD: 4 query heads, 2 KV heads, D 8
MQA = ((8, 4, 16, 8), (8, 1, 16, 8))     # one KV head
BSH = ((8, 16, 32), (8, 16, 16))         # BSH: H1 = 4·8, H2 = 2·8
ACCEPTED = [
    fa("BNSD batch 4 heads 2", "BNSD", *GQA, [[4, 2, 1, 1], [4, 2, 1, 1]]),
    fa("BNSD batch 2 heads 4, MQA", "BNSD", *MQA, [[2, 4, 1, 1], [2, 1, 1, 1]]),
    fa("BNSD batch 8, MQA", "BNSD", *MQA, [[8, 1, 1, 1], [8, 1, 1, 1]]),
    fa("BSH batch 4 heads 2", "BSH", *BSH, [[4, 1, 2], [4, 1, 2]]),
    # context parallel: full attention, queries cut 4-way along their sequence, keys whole
    fa("BNSD batch 2, query sequence 4", "BNSD", *GQA, [[2, 1, 4, 1], [2, 1, 1, 1]]),
]
REJECTED = [
    fa("key sequence cut", "BNSD", *GQA, [[4, 2, 1, 1], [4, 2, 1, 1]][:1] + [[4, 1, 2, 1]]),
    fa("head dimension cut", "BNSD", *GQA, [[4, 1, 1, 2], [4, 1, 1, 2]]),
    fa("MQA key head cut", "BNSD", *MQA, [[2, 4, 1, 1], [2, 4, 1, 1]]),
    fa("KV head cut differs from query's", "BNSD", *GQA, [[4, 2, 1, 1], [4, 1, 1, 1]]),
]


@pytest.fixture(scope="module")
def accepted_bank():
    return capture_bank(ACCEPTED)


def test_collectives_equal_mindspore(accepted_bank):
    """Forward and gradient-sync collectives equal MindSpore's case by case. Backward: the model
    predicts none inside the cases; MindSpore's backward holds only bprops of the wrapper's
    AllGathers (outputs gathered into its Square), not of all of them: softmax_max/sum get no
    gradient, so their gathers have no bprop (``assert_bank_matches`` expects one for each)."""
    strats = strategies(ACCEPTED)
    result = dryrun.run_child(compile_job(ACCEPTED), devices=DEVICES)
    colls = result["collectives"]
    model = CostModel(accepted_bank, DEVICES)
    for i, case in enumerate(ACCEPTED):
        want, got = observed(colls, i), predicted(accepted_bank, model, i, strats)
        for phase in ("forward", "grad_sync"):
            assert sorted((k, v) for k, v in want.items() if k[1] == phase) == \
                sorted((k, v) for k, v in got.items() if k[1] == phase), (case[0], phase)
        assert not [k for k in got if k[1] == "backward"], case[0]
    seen = Counter(_key(c) for c in colls if c["pass"] == "backward" and not c["grad_sync"])
    wrapper = Counter(_key(c) for c in colls if c["pass"] == "forward"
                      and "cases-CellList" not in c["scope"] and c["in_shape"])
    assert not seen - mirror(wrapper), seen - mirror(wrapper)


def test_flops_derivation(accepted_bank):
    """Independent derivation (Dao et al. 2022): QKᵀ and PV over the local batch 1 and heads 2:
    4·1·2·16·16·8 = 16384 FLOPs forward; backward 2.5× that over three gradients."""
    cost = CostModel(accepted_bank, DEVICES).check(case_op(accepted_bank, 0),
                                                   ((4, 2, 1, 1), (4, 2, 1, 1), (4, 2, 1, 1)))
    assert cost.flops_fwd == 4 * 1 * 2 * 16 * 16 * 8
    assert cost.flops_bwd == pytest.approx(2.5 * cost.flops_fwd, rel=0.01)


def test_grouped_kv_memory_at_their_own_heads(accepted_bank):
    """GQA key/value are counted at their N2 heads, not the query's N1 (float32, 4 bytes).
    Case 0, BNSD, batch 4 heads 2: query (1, 2, 16, 8) = 256 elements per device, key and value
    (1, 1, 16, 8) = 128 each (2 KV heads cut 2), softmax_max/sum (1, 2, 16, 8) = 256 each,
    attention_out 256: (256 + 2·128 + 3·256)·4 = 5120 bytes. Case 3, BSH, batch 4 heads 2:
    query (2, 16, 16) = 512, key and value (2, 16, 8) = 256 each (H2 = 16 cut 2), attention_out
    512, softmax_max/sum (B, N1, S1, 8) = (8, 4, 16, 8) in every layout (MindSpore's
    ``FlashAttentionScoreInfo::InferTensorMap``: tensor map (batch, n1, s1, -1)), here cut
    (4, 2, 1, 1): (2, 2, 16, 8) = 512 each: (512 + 2·256 + 2·512 + 512)·4 = 10240 bytes."""
    model = CostModel(accepted_bank, DEVICES)
    cost = model.check(case_op(accepted_bank, 0), ((4, 2, 1, 1),) * 3)
    assert cost.memory["activation"] == (256 + 2 * 128 + 3 * 256) * 4
    cost = model.check(case_op(accepted_bank, 3), ((4, 1, 2),) * 3)
    assert cost.memory["activation"] == (512 + 2 * 256 + 2 * 512 + 512) * 4


def test_bsh_softmax_statistics_follow_the_query_sequence_cut(accepted_bank):
    """BSH softmax_max/sum are (B, N1, S1, 8) float32 whatever the layout, cut by the query's
    batch, heads and sequence (tensor map (batch, n1, s1, -1), ``InferTensorMap``). Case 3
    (query (8, 16, 32), key/value (8, 16, 16), 4 heads) cut batch 2, S1 2, heads 2: query
    (4, 8, 16) = 512 elements, key and value (4, 16, 8) = 512 each (S2 whole), attention_out
    512, softmax_max/sum (4, 2, 8, 8) = 512 each: (512 + 2·512 + 2·512 + 512)·4 = 12288 bytes;
    their layouts slice (8, 4, 16, 8) to (4, 2, 8, 8)."""
    model = CostModel(accepted_bank, DEVICES)
    op = case_op(accepted_bank, 3)
    cost = model.check(op, ((2, 2, 2), (2, 1, 2), (2, 1, 2)))
    assert cost.memory["activation"] == (512 + 2 * 512 + 2 * 512 + 512) * 4
    shape = tuple(accepted_bank.tensors[op.outputs[0]].shape)
    assert shape == (8, 4, 16, 8)
    assert cost.out_layouts[0].slice_shape(shape) == (4, 2, 8, 8)
    assert cost.out_layouts[1].slice_shape(shape) == (4, 2, 8, 8)


@pytest.mark.parametrize("strategy, attrs, reason", [
    (((2, 2, 2, 1), (2, 2, 1, 1), (2, 2, 1, 1)), {"sparse_mode": 4}, "sequence"),
    (((2, 2, 2, 1), (2, 2, 1, 1), (2, 2, 1, 1)), {"next_tokens": 0}, "sequence"),
    (((2, 1, 1, 1), (2, 1, 1, 1), (2, 1, 1, 1)), {}, "repeated calculation"),
])
def test_model_refuses_what_it_does_not_model(accepted_bank, strategy, attrs, reason):
    """Case 0 with its attributes changed (a band sparse mode, a band by tokens): a query-sequence cut
    is refused there, while the same cut of case 0's full attention is accepted."""
    import dataclasses

    op = case_op(accepted_bank, 0)
    changed = dataclasses.replace(op, attrs=dict(op.attrs, **attrs))
    with pytest.raises(StrategyError, match=reason):
        CostModel(accepted_bank, DEVICES).check(changed, strategy)
    if attrs:
        CostModel(accepted_bank, DEVICES).check(op, strategy)


@pytest.mark.parametrize("mode", [2, 3])
def test_causal_query_cut_costs_the_slowest_split(accepted_bank, mode):
    """Case 0 (S1 = S2 = 16, D 8) made causal (``sparse_mode`` 2 or 3, the same mask when S1 =
    S2) and cut batch 2, heads 2, queries 2: rank 1 of the query cut holds rows 8..15, which
    see 9..16 keys (row i sees keys 0..i): (9 + 16)·8/2 = 100 pairs, against rank 0's
    (1 + 8)·8/2 = 36. MindSpore does not rebalance them (``enable_flash_attention_load_balance``
    off), so the split costs rank 1's: 4·(batch 2)·(heads 2)·(D 8)·100 FLOPs forward. Uncut, the
    whole mask: 16·17/2 = 136 pairs over the local batch 1 and heads 2."""
    import dataclasses

    op = case_op(accepted_bank, 0)
    causal = dataclasses.replace(op, attrs=dict(op.attrs, sparse_mode=mode))
    model = CostModel(accepted_bank, DEVICES)
    cut = model.check(causal, ((2, 2, 2, 1), (2, 2, 1, 1), (2, 2, 1, 1)))
    assert cut.flops_fwd == 4 * 2 * 2 * 8 * 100
    assert not cut.collectives
    whole = model.check(causal, ((4, 2, 1, 1), (4, 2, 1, 1), (4, 2, 1, 1)))
    assert whole.flops_fwd == 4 * 1 * 2 * 8 * 136


@pytest.fixture(scope="module")
def one_case_graph():
    """The rejected cases' one-case networks, each captured once (they share shapes)."""
    return capture_cache(SPEC)


@pytest.mark.parametrize("i", range(len(REJECTED)), ids=[c[0] for c in REJECTED])
def test_check_raises_iff_mindspore_rejects(one_case_graph, i):
    refused_by_both(one_case_graph(REJECTED[i:i + 1]), REJECTED[i])
