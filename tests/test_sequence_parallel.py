"""Sequence parallel on the built-in ``llama`` (issue #17 item 2).

Oracles: MindSpore's parallel compiler in the dry-run (``check``'s ReduceScatter and AllGather
rows), a hand derivation of their sizes, and a brute force over the sequence-parallel switch of
the row-parallel MatMuls priced by the cost model, written here independently of the search.

Hand derivation for the case (2 layers, batch 4, seq 512, hidden 2048, heads 16, ffn 5632, 8
devices, float32): the plan cuts the attention output and MLP down projections ``wo``, ``w2``
Megatron-style, in_strategy ``((a, b), (b, 1))`` with ``a·b = 8``, ``b > 1`` (tokens ``a``-way,
contracting axis ``b``-way). Their partial sums are ``(batch·seq / a, hidden) = (2048 / a,
2048)`` per device: ``16 / a`` MiB. With the out_strategy ``((8, 1),)`` MindSpore
reduce-scatters them over the ``b`` devices of the contracting cut
(``MatMul::CheckOutputStrategy``, ``ops_info/matmul_info.cc``) instead of all-reducing them,
and the bprop is an AllGather of the same tensor: per layer two forward ReduceScatters and two
backward AllGathers, each of ``16 / a`` MiB over the ``b`` devices of its MatMul (the search may
cut attention and MLP differently: one row per group size).
"""
from __future__ import annotations

from integration_support import search_fixtures

OPTS = dict(layers=2, batch=4, seq=512, hidden=2048, heads=16, ffn=5632, vocab=1024)
DEVICES = 8
ROW_PARALLEL = ("attention.wo.matmul", "feed_forward.w2.matmul")
MIB = 1 << 20
planned, checked = search_fixtures("llama", DEVICES, OPTS)


def test_row_parallel_matmuls_reduce_scatter(planned):
    plan = planned[3]
    want = {f"layers.{i}.{name}" for i in range(OPTS["layers"]) for name in ROW_PARALLEL}
    assert set(plan.out_strategies) == want, plan.out_strategies
    for name in want:
        (a, b), (b2, c) = plan.strategies[name]
        assert a * b == DEVICES and b == b2 > 1 and c == 1
        assert plan.out_strategies[name] == [[8, 1]]
    assert plan.to_dict()["out_strategies"] == plan.out_strategies


def test_sequence_parallel_collectives_predicted_equal_inserted(planned, checked):
    from collections import Counter

    plan = planned[3]
    count, nbytes = Counter(), Counter()
    for name in plan.out_strategies:                          # by hand (module doc)
        (a, b), _ = plan.strategies[name]
        count[b] += 1
        nbytes[b] += (16 // a) * MIB
    assert checked.ok, [(r.key, r.predicted, r.inserted) for rc in checked.ranks
                        for r in rc.rows if not r.ok]
    rows = {r.key: r for rc in checked.ranks for r in rc.rows}
    for b in count:
        for key in (("ReduceScatter", "forward", b), ("AllGather", "backward", b)):
            row = rows[key]
            assert row.predicted == row.inserted == count[b]
            assert row.predicted_bytes == row.inserted_bytes == nbytes[b]
        assert ("AllReduce", "forward", b) not in rows       # no AllReduce left in the layers
    assert sum(count.values()) == 4                           # 2 layers × (wo, w2)


def test_search_choice_equals_brute_force_over_sequence_parallel(planned):
    """Every row-parallel MatMul keeps its in_strategy and takes the AllReduce option (off) or
    the out_strategy one (on); every other variable the cheapest option given those
    (``fill_choice``). The cheaper switch must be the search's, and neither may beat the
    search's total."""
    from smsg_ms.compare.score import fill_choice

    problem, variables, searched, plan = planned
    totals = {}
    for on in (False, True):
        choice = [None] * len(variables)
        for vi, var in enumerate(variables):
            if var.name.endswith(ROW_PARALLEL):
                chosen = var.options[searched[vi]][0].strategy
                choice[vi] = next(i for i, opts in enumerate(var.options)
                                  if opts[0].strategy == chosen
                                  and (opts[0].out_strategy is not None) == on)
        totals[on] = float(problem.total(fill_choice(problem, choice)))
    assert totals[True] != totals[False], totals
    assert min(totals, key=totals.get) == bool(plan.out_strategies), totals
    assert float(problem.total(searched)) <= min(totals.values()) * (1 + 1e-9), totals


def test_explain_and_mindformers_name_sequence_parallel(planned):
    from smsg_ms.integration.mindformers_run import run_settings
    from smsg_ms.report.explain_view import chosen_degrees

    plan = planned[3]
    cuts = [plan.strategies[name][0][1] for name in plan.out_strategies]
    assert chosen_degrees(plan)["sp"] == max(cuts)            # the contracting cut of wo, w2
    config = {"num_attention_heads": OPTS["heads"]}
    assert run_settings(plan, config)["parallel_config"]["use_seq_parallel"] is True


def test_norms_save_their_token_slice(planned):
    """Sequence parallel's memory: every decoder norm works on ``1/8`` of the tokens, so the
    activations it keeps for the backward pass (RmsNorm keeps its input ``(tokens, hidden)``
    and its ``rstd`` ``(tokens, 1)``) are, per device and float32, ``(2048/8)·2048·4 +
    (2048/8)·4`` bytes, by hand from the shapes."""
    plan = planned[3]
    tokens = OPTS["batch"] * OPTS["seq"] // DEVICES
    for d in plan.decisions:
        if d.op_type == "RmsNorm" and d.name.startswith("layers."):
            assert d.strategy[0] == [DEVICES, 1], d.name
            assert d.breakdown["activation_bytes"] == tokens * OPTS["hidden"] * 4 + tokens * 4
