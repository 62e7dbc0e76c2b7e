"""Expert parallelism on the built-in ``moe`` (issue #17 item 1).

Oracles: MindSpore's parallel compiler in the dry-run (the AlltoAll rows of ``check``), a hand
derivation of the dispatch/combine AlltoAll sizes, and a brute force over the expert-parallel
degree priced by the cost model, written here independently of the search.

Hand derivation for the case (2 layers, 8 experts, top-2, batch 8, seq 32, hidden 256,
capacity factor 1.25, 8 devices): capacity ``C = ceil(2·32·1.25 / 8) = 10`` slots per expert
and sequence, so the dispatched tokens ``(E, batch·C, h) = (8, 80, 256)`` float32 are
655,360 bytes, 81,920 per device when cut 8-way. Expert parallel of degree 8 moves that cut
from the batch axis to the expert axis before the experts (dispatch) and back after them
(combine): per layer one forward AlltoAll of 8 each way, each exchanging the 81,920-byte
per-device buffer, and its bprop, another AlltoAll, in the backward pass.
"""
from __future__ import annotations

import math

import pytest

from smsg_ms.cost.layout import operator_layout
from smsg_ms.cost.redistribution import redistribute

OPTS = dict(layers=2, experts=8, top_k=2, batch=8, seq=32, hidden=256, heads=4, ffn=1024,
            vocab=1000)
DEVICES = 8
#: the per-layer primitives whose strategies carry the expert axis (batched expert weights)
EXPERT_OPS = ("experts.gate", "experts.up", "experts.down", "experts.silu", "experts.mul")
#: the layout changes around the experts, left to the cost model's cheapest fill
AROUND = ("to_experts", "from_experts", "split_reshape", "in_reshape", "back_reshape",
          "merge_reshape")


@pytest.fixture(scope="module")
def planned():
    """(graph, cost model, problem, variables, the search's choice, its plan) of the case,
    searched once (the search of ``plan_graph``: no memory limit binds this small case)."""
    from integration_support import searched_plan
    from smsg_ms.graph.capture import capture_network

    graph = capture_network("moe", **OPTS)
    return (graph, *searched_plan(graph, DEVICES, "moe", OPTS))


@pytest.fixture(scope="module")
def checked(planned):
    from smsg_ms.integration.check import check_plan

    return check_plan(planned[5], [0])


def _expert_degree(plan) -> int:
    (gate,) = [d for d in plan.decisions if d.name == "layers.0.moe.experts.gate"]
    return gate.strategy[1][0]   # the weight (E, h, f): its expert-axis cut


def test_moe_graph_enables_alltoall_and_the_plan_records_it(planned):
    graph, model, _, _, _, plan = planned
    assert model.enable_alltoall            # 3-D expert weights found in the graph
    assert plan.enable_alltoall
    assert plan.to_dict()["enable_alltoall"] is True


def test_expert_parallel_alltoalls_predicted_equal_inserted(planned, checked):
    plan = planned[5]
    assert _expert_degree(plan) == DEVICES, "the search keeps the experts replicated"
    assert checked.ok, [(r.key, r.predicted, r.inserted) for rc in checked.ranks
                        for r in rc.rows if not r.ok]
    rows = {r.key: r for rc in checked.ranks for r in rc.rows}
    for phase in ("forward", "backward"):
        row = rows[("AlltoAll", phase, DEVICES)]
        # by hand (module doc): 2 layers × (dispatch + combine), 81,920 bytes each
        assert row.predicted == row.inserted == 2 * 2
        assert row.predicted_bytes == row.inserted_bytes == 4 * 81920
    assert not any(k[0] == "AllGather" for k in rows)   # no gather in place of an AlltoAll


def test_search_choice_equals_brute_force_over_expert_degree(planned):
    """For each expert-parallel degree ``ep`` dividing the experts and devices, the expert
    operators take ``(ep, 8/ep, 1)`` (experts cut ``ep``-way, their tokens ``8/ep``-way, the
    weights whole otherwise), the layout changes around them the cheapest option given their
    neighbours, everything else the search's choice; each assignment is priced by the cost
    model (``problem.total``). The cheapest degree must be the search's, and no degree may beat
    the search's total."""
    from smsg_ms.compare.score import fill_choice

    graph, model, problem, variables, searched, plan = planned

    def option(var, strategy):
        return next(i for i, opts in enumerate(var.options)
                    if [list(s) for s in opts[0].strategy] == strategy)

    totals = {}
    for ep in (1, 2, 4, 8):
        tokens, weight = [ep, DEVICES // ep, 1], [ep, 1, 1]
        want = {"experts.gate": [tokens, weight], "experts.up": [tokens, weight],
                "experts.down": [tokens, weight], "experts.silu": [tokens],
                "experts.mul": [tokens, tokens]}
        choice = list(searched)
        for vi, var in enumerate(variables):
            suffix = var.name.split(".moe.")[-1]
            if suffix in AROUND:
                choice[vi] = None
            elif suffix in want:
                choice[vi] = option(var, want[suffix])
        totals[ep] = float(problem.total(fill_choice(problem, choice)))
    best = min(totals, key=totals.get)
    assert len(set(totals.values())) == len(totals), totals   # the degree matters here
    assert best == _expert_degree(plan), totals
    assert float(problem.total(searched)) <= totals[best] * (1 + 1e-9), totals


def test_alltoall_moves_a_cut_within_a_dimension():
    """``(E, B, C, h) = (4, 8, 40, 128)`` float32 cut ``(1, 8, 1, 1)`` into ``(4, 2, 1, 1)``: in
    the dry-run (enable_alltoall, the moe's dispatch with experts cut 4 and tokens 2) MindSpore
    inserts an AlltoAll of 4 (the major part of B's cut to E) and one of 2 (B's minor cut to
    its major position), each on the per-device buffer 4·8·40·128·4/8 = 81,920 bytes; no
    AllGather. With AlltoAll off the same move is AllGathers (the default)."""
    src = operator_layout([8], [None, 0, None, None], DEVICES)
    dst = operator_layout([4, 2], [0, 1, None, None], DEVICES)
    got = redistribute((4, 8, 40, 128), 4, src, dst, "t", enable_alltoall=True)
    forward = sorted((c.kind, c.group, c.full_bytes) for c in got if c.phase == "forward")
    assert forward == [("AlltoAll", 2, 81920), ("AlltoAll", 4, 81920)]
    off = redistribute((4, 8, 40, 128), 4, src, dst, "t", enable_alltoall=False)
    assert {c.kind for c in off if c.phase == "forward"} == {"AllGather"}


def test_capacity_is_gshards():
    from smsg_ms.networks.moe import capacity

    assert capacity(2, 32, 8, 1.25) == 10            # ceil(80 / 8)
    assert capacity(8, 4096, 256, 1.0) == 128        # DeepSeek-V3 shape: 8·4096/256
    assert capacity(1, 3, 8, 1.0) == math.ceil(3 / 8)


def test_moe_presets_build_with_the_builtin_moe():
    """Mixtral 8x7B (Jiang et al. 2024, Table 1: 8 experts, top-2, expert width 14336) and
    DeepSeek-V3 (technical report §4.2: 256 routed + 1 shared expert of width 2048, top-8) are
    the built-in moe's options; DeepSeek-V3's latent attention is not, and the note says so."""
    from smsg_ms.networks import check_options
    from smsg_ms.networks.presets import resolve_shape, shape_note

    mixtral = resolve_shape("moe", "mixtral-8x7b", {"layers": 2})
    assert (mixtral["experts"], mixtral["top_k"], mixtral["ffn"], mixtral["layers"]) == \
        (8, 2, 14336, 2)
    deepseek = resolve_shape("moe", "deepseek-v3", {})
    assert (deepseek["experts"], deepseek["top_k"], deepseek["expert_ffn"],
            deepseek["shared_experts"], deepseek["layers"]) == (256, 8, 2048, 1, 61)
    for options in (mixtral, deepseek):
        check_options("moe", options)   # every option is one the moe takes
    assert "latent attention" in shape_note("moe", "deepseek-v3")
    assert shape_note("moe", "mixtral-8x7b") is None


def test_routing_families_refuse_what_mindspore_refuses():
    """TopK's last dimension and CumSum's axis cannot be cut (``TopKInfo::CheckStrategy``: "Now
    we can not support to split last dimension"; ``CumOpBase``: "The axis can not be split");
    their other dimensions can, with no collective (checked in the dry-run by the moe plan
    above, which writes both back)."""
    from types import SimpleNamespace

    from smsg_ms.cost.api import StrategyError
    from smsg_ms.cost.operators import routing
    from smsg_ms.cost.operators.base import enumerate_cuts, letter_cuts

    topk = routing.describe(SimpleNamespace(type="TopK", attrs={}), [(64, 8), ()],
                            [(64, 2), (64, 2)])
    assert [c for c in enumerate_cuts(topk, 8)] == [{"a": d} for d in (1, 2, 4, 8)]
    with pytest.raises(StrategyError, match="last dimension"):
        letter_cuts(topk, ((1, 8),), 8, "topk")
    cumsum = routing.describe(SimpleNamespace(type="CumSum", attrs={"axis": 1}),
                              [(8, 64, 8), ()], [(8, 64, 8)])
    with pytest.raises(StrategyError, match="CumSum axis"):
        letter_cuts(cumsum, ((1, 8, 1),), 8, "cumsum")
    assert letter_cuts(cumsum, ((8, 1, 1),), 8, "cumsum") == {"a": 8, "b": 1, "c": 1}


def test_router_dispatches_each_choice_to_one_free_slot():
    """The router's masks from their definition (GShard §2.2), run in PyNative on random inputs:
    every (token, choice) within capacity occupies exactly one slot of its expert, slots are
    given in sequence order (first come, first served), no slot holds two tokens, the choices
    past the capacity are dropped, and the combine weight of a slot is its token's router
    probability for that expert."""
    import mindspore as ms
    import numpy as np

    from smsg_ms.networks import build_network

    ms.set_context(mode=ms.PYNATIVE_MODE)
    batch, seq, experts, top_k, hidden = 2, 6, 4, 2, 8
    built = build_network("moe", batch=batch, seq=seq, layers=1, hidden=hidden, heads=2,
                          ffn=16, vocab=32, experts=experts, top_k=top_k, capacity_factor=0.5)
    router = built.net.layers[0].moe.router
    cap = 2                                            # ceil(2·6·0.5 / 4) = ceil(1.5)
    x = np.random.default_rng(0).standard_normal((batch * seq, hidden)).astype(np.float32)
    dispatch, combine = (t.asnumpy() for t in router(ms.Tensor(x)))
    w = router.dense.weight.asnumpy()
    logits = x @ w
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    want = np.zeros((batch, seq, experts, cap), np.float32)
    weight = np.zeros_like(want)
    for b in range(batch):
        used = [0] * experts
        for s in range(seq):
            for j in range(top_k):
                e = chosen[b * seq + s, j]
                if used[e] < cap:
                    want[b, s, e, used[e]] = 1.0
                    weight[b, s, e, used[e]] = probs[b * seq + s, e]
                used[e] += 1
    assert 0 < want.sum() < batch * seq * top_k        # some choices are dropped here
    assert dispatch.shape == (batch, seq, experts * cap)
    np.testing.assert_array_equal(dispatch.reshape(want.shape), want)
    np.testing.assert_allclose(combine.reshape(weight.shape), weight, rtol=1e-5, atol=1e-6)
