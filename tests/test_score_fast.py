"""Scoring a configuration prices only the options it needs (``ShapeScorer``'s default: the
problem cut by :func:`smsg_ms.planner.problem.restrict_options`) and gets the step of the whole
search problem (``ShapeScorer(full_problem=True)``, every option pair of every edge priced) to
the last bit.

Oracle: the whole problem, which the search builds and ``tests/test_plans_unchanged.py``
guards; both paths price with the same :func:`smsg_ms.planner.build_problem`, each entry
depending only on its own pair of options, and sum in the same order, so the steps are equal
(``==``), not merely close.
"""
from __future__ import annotations

import pytest

from smsg_ms.compare.configs import parse_config
from smsg_ms.compare.score_configs import ShapeScorer
from smsg_ms.graph.batch_scale import BatchFamily

CONFIGS = ["dp=2,tp=4,pp=1,micro_batch=1,global_batch=2",
           "dp=8,tp=1,pp=1,micro_batch=1,global_batch=8",
           "dp=2,tp=2,pp=1,micro_batch=1,global_batch=8,optimizer_shard=1",
           "dp=1,tp=4,pp=2,micro_batch=1,global_batch=4,recompute=1",
           "dp=2,tp=2,pp=2,micro_batch=2,global_batch=16,optimizer_shard=1"]

NETWORKS = [("gpt", dict(layers=2, seq=64, hidden=128, heads=8, vocab=1024)),
            # mindformers' LLaMA: the layout leaves its decomposed RmsNorm open (completion)
            ("mf-llama", dict(layers=2, hidden=256, heads=8, ffn=512, seq=64))]


@pytest.mark.parametrize("spec, options", NETWORKS, ids=[n for n, _ in NETWORKS])
def test_fast_score_equals_whole_problem(spec, options, capture_of):
    fast = ShapeScorer(spec, options=dict(options))
    # the scorer's own capture (capture_network(spec, batch=b, **options)) from the session
    # cache, shared with the suite's other captures of the network (gpt: test_score_configs)
    fast.family = BatchFamily(capture_of(spec, **options))
    whole = ShapeScorer(spec, options=dict(options), full_problem=True)
    whole.family = fast.family                      # one capture for both
    for text in CONFIGS:
        config = parse_config(text)
        got, want = fast.score(config), whole.score(config)
        assert got["step_seconds"] == want["step_seconds"], text
        assert got["memory_bytes"] == want["memory_bytes"], text
        assert (got["pinned"], got["filled"]) == (want["pinned"], want["filled"])
        _, cut = fast.choice(config)
        _, full = whole.choice(config)
        assert cut.full_choice == full.choice, text
        # the cut problem prices one option per variable, hence one entry per edge
        assert all(len(v.keys) == 1 for v in cut.problem.variables)
        assert all(e.cost.shape == (1, 1) for e in cut.problem.edges)
        assert len(cut.problem.edges) == len(full.problem.edges)
    # some completion took place: variables the layout left open
    assert any(len(p.full_choice) > p.pinned for p in fast.choices.values())
