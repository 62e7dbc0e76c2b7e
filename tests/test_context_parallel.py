"""Context parallel on FlashAttentionScore (issue #17 item 2): the built-in ``llama`` with
``attention="flash-causal"`` (``FlashAttentionScore``, layout BSH, ``sparse_mode`` 2).

Oracles: MindSpore's parallel compiler in the dry-run (``check``'s rows), a hand derivation of
the keys' and values' gathers, and a brute force over the query-sequence (S1) cut of the
attention, written here apart from the search.

The case (1 layer, batch 1, seq 2048, hidden 1024, 2 heads, ffn 1024, 8 devices, float32):
batch 1 cannot be cut and the 2 heads cut at most 2-way, so the attention uses all 8 devices
only by cutting its queries along the sequence. With the query cut ``(1, cp, n)`` (BSH:
batch, S1, heads) MindSpore takes the keys and values ``(1, 1, n)``: whole along their
sequence (``flash_attention_score_info.cc``, ``InitExpectedStrategies``: S2 never cut), and
inserts nothing inside the operator (the causal mask is rewritten per split,
``ReplaceNodeInputOrAttrs``). Where ``wk``/``wv`` cut their tokens ``cp``-way, the
redistribution into the attention gathers each of keys and values over the ``cp`` devices:
forward one AllGather per tensor of ``2048·(1024/n)·4`` bytes (its gathered size per device),
backward a ReduceScatter of the same size.
"""
from __future__ import annotations

import math

import pytest

from integration_support import search_fixtures

OPTS = dict(layers=1, batch=1, seq=2048, hidden=1024, heads=2, ffn=1024, vocab=1024,
            attention="flash-causal")
DEVICES = 8
FLASH = "layers.0.attention.flash"

planned, checked = search_fixtures("llama", DEVICES, OPTS)


def _s1_cut(strategy) -> int:
    return strategy[0][1]                     # BSH query: (batch, S1, H)


def test_plan_cuts_the_query_sequence(planned):
    plan = planned[3]
    b, cp, n = plan.strategies[FLASH][0]
    assert cp > 1 and b * cp * n == DEVICES, plan.strategies[FLASH]
    assert plan.strategies[FLASH][1] == plan.strategies[FLASH][2] == [b, 1, n]
    assert plan.options["attention"] == "flash-causal"


def test_context_parallel_collectives_predicted_equal_inserted(planned, checked):
    plan = planned[3]
    b, cp, n = plan.strategies[FLASH][0]
    assert checked.ok, [(r.key, r.predicted, r.inserted) for rc in checked.ranks
                        for r in rc.rows if not r.ok]
    rows = {r.key: r for rc in checked.ranks for r in rc.rows}
    for name in ("wk", "wv"):                  # their tokens cut cp-way (b = 1), columns n-way
        assert plan.strategies[f"layers.0.attention.{name}.matmul"] == [[b * cp, 1], [1, n]]
    gathered = 2 * OPTS["seq"] * (OPTS["hidden"] // n) * 4     # keys and values, by hand
    for key in (("AllGather", "forward", cp), ("ReduceScatter", "backward", cp)):
        row = rows[key]
        assert row.predicted == row.inserted >= 2, key
        assert row.predicted_bytes == row.inserted_bytes, key
        assert row.inserted_bytes >= gathered, (key, row.inserted_bytes, gathered)
    predicted_kv = [c for d in plan.decisions for c in d.collectives
                    if c["kind"] == "AllGather" and c["phase"] == "forward" and c["group"] == cp]
    assert sum(c["bytes"] for c in predicted_kv) == rows[("AllGather", "forward", cp)].inserted_bytes
    assert not [d for d in plan.decisions if d.name == FLASH and d.collectives]


def test_search_choice_equals_brute_force_over_the_query_cut(planned):
    """For every query-sequence cut the FlashAttentionScore can take (1, 2, 4, 8), the best
    plan holding the attention to that cut (every other variable solved exactly, the
    attention's options with another cut forbidden); the cheapest cut must be the search's,
    with its total. Batch 1 and 2 heads leave the attention only cuts 4 and 8 that use all
    8 devices (the model refuses repeated calculation), and they must be priced apart."""
    import numpy as np

    from smsg_ms.search.solve import solve_exact

    problem, variables, searched, plan = planned
    fa = next(vi for vi, var in enumerate(variables) if var.name == FLASH)
    cost0 = np.array(problem.variables[fa].cost, dtype=float)
    totals = {}
    try:
        for cp in (1, 2, 4, 8):
            allowed = [i for i, calls in enumerate(variables[fa].options)
                       if _s1_cut(calls[0].strategy) == cp]
            if not allowed:
                continue
            cost = np.full_like(cost0, math.inf)
            cost[allowed] = cost0[allowed]
            problem.variables[fa].cost = cost
            choice = solve_exact(problem)
            problem.variables[fa].cost = cost0
            totals[cp] = float(problem.total(choice))
    finally:
        problem.variables[fa].cost = cost0
    best = min(totals, key=totals.get)
    assert best == _s1_cut(plan.strategies[FLASH]), totals
    assert float(problem.total(searched)) == pytest.approx(totals[best], rel=1e-9), totals
    assert sorted(totals) == [4, 8] and totals[4] != totals[8], totals


GQA_OPTS = dict(OPTS, heads=4, kv_heads=2)


def test_grouped_kv_gathers_priced_at_their_own_heads(shared_capture):
    """GQA (4 query heads, 2 KV heads, head_dim 1024/4 = 256): keys and values are
    ``(1, 2048, 2·256)``, half the query's width. Batch 1 and a head cut dividing the 2 KV heads
    (``flash_attention_score_info.cc``) leave the attention all 8 devices only with an S1 cut
    ``cp >= 4``. By hand, with the head cut ``n`` (``n·cp = 8``): each of keys and values is
    gathered to ``2048·(512/n)·4`` bytes per device forward (a ReduceScatter of that size
    backward), i.e. ``2·2048·512/n·4`` for the two; the compiler's rows must equal the
    prediction in count and bytes (seen: n 2, cp 4, 2·2048·256·4 = 4 MiB)."""
    from integration_support import searched_plan

    from smsg_ms.integration.check import check_plan

    *_, plan = searched_plan(shared_capture("llama", **GQA_OPTS), DEVICES, "llama", GQA_OPTS)
    b, cp, n = plan.strategies[FLASH][0]
    assert cp >= 4 and b * cp * n == DEVICES and 2 % n == 0, plan.strategies[FLASH]
    checked = check_plan(plan, [0])
    assert checked.ok, [(r.key, r.predicted, r.inserted) for rc in checked.ranks
                        for r in rc.rows if not r.ok]
    rows = {r.key: r for rc in checked.ranks for r in rc.rows}
    gathered = 2 * GQA_OPTS["seq"] * (2 * 256 // n) * 4
    for key in (("AllGather", "forward", cp), ("ReduceScatter", "backward", cp)):
        row = rows[key]
        assert row.predicted == row.inserted >= 2, key
        # only keys and values move over the cp devices: at N2 heads, not the query's N1
        assert row.predicted_bytes == row.inserted_bytes == gathered, key


def test_explain_reads_dp_tp_cp_from_the_flash_attention(planned):
    """``explain``'s degrees line: the query of the BSH attention is cut ``(b, cp, n)`` (batch,
    S1, heads), so the plan is ``dp b, tp n, cp cp``; its MatMuls cut their merged tokens
    ``b·cp`` ways, which is not the data-parallel degree."""
    import io

    from rich.console import Console

    from smsg_ms.report.explain_view import chosen_degrees, print_explain

    plan = planned[3]
    b, cp, n = plan.strategies[FLASH][0]            # BSH: the network's layout (OPTS)
    assert cp > 1
    wq = plan.strategies["layers.0.attention.wq.matmul"][0][0]
    assert wq == b * cp                              # the tokens' cut spans dp and cp
    degrees = chosen_degrees(plan)
    assert (degrees["dp"], degrees["tp"], degrees["cp"]) == (b, n, cp)
    assert "repeated" not in degrees                 # b·cp·n = 8 devices
    out = io.StringIO()
    print_explain(plan, Console(file=out, width=200))
    text = " ".join(out.getvalue().split())
    assert f"chosen: dp {b}, tp {n}, " in text and f", cp {cp}, " in text
