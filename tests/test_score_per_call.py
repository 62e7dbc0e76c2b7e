"""Scoring another planner's per-call strategies (``smsg_ms.score(..., per_call=...)``).

Oracle: ``twice:shared`` calls one ReLU primitive at two places, ``twice:distinct`` is the same
graph with two ReLU primitives. The cost model reads an operator's shapes and strategy, not which
primitive it belongs to, so the shared network scored with call 0 → A and call 1 → B must cost
exactly what the distinct network costs with ``relu_a`` → A and ``relu_b`` → B (a path the
planner's own scoring already covers). Keeping only the first call's strategy (the old rule)
scores the distinct network with B replaced by A, which differs when the layouts force a
redistribution.
"""
from __future__ import annotations

import pytest

from smsg_ms.compare.score import score

SHARED = "smsg_ms.networks.twice:shared"
DISTINCT = "smsg_ms.networks.twice:distinct"
MATMULS = {"mm1": [[8, 1], [1, 1]], "mm2": [[8, 1], [1, 1]]}
ROWS, COLS = [[8, 1]], [[1, 8]]


@pytest.mark.parametrize("a, b", [(ROWS, COLS), (COLS, ROWS), (ROWS, ROWS)])
def test_each_call_scored_with_its_own_strategy(captured, a, b):
    shared, distinct = captured(SHARED), captured(DISTINCT)
    got = score(SHARED, 8, dict(MATMULS, relu_a=a), graph=shared,
                per_call={"relu_a": [a, b]})
    want = score(DISTINCT, 8, dict(MATMULS, relu_a=a, relu_b=b), graph=distinct)
    assert got["split"] == ["relu_a"]
    assert got["pinned"] == 4 and got["unavailable"] == [] and got["unknown"] == []
    assert got["step_seconds"] == pytest.approx(want["step_seconds"], rel=1e-12)
    assert got["memory_bytes"] == pytest.approx(want["memory_bytes"], rel=1e-12)
    first_only = score(DISTINCT, 8, dict(MATMULS, relu_a=a, relu_b=a), graph=distinct)
    if a != b:
        # call 1 in columns between two row-cut MatMuls costs two redistributions more than
        # in rows, whichever of the two scorings puts it there
        cols_first = got if b == COLS else first_only
        rows_first = first_only if b == COLS else got
        assert cols_first["step_seconds"] > rows_first["step_seconds"]


def test_per_call_of_an_unknown_primitive_is_reported(captured):
    got = score(SHARED, 8, dict(MATMULS), graph=captured(SHARED),
                per_call={"nope": [ROWS, COLS]})
    assert got["unknown"] == ["nope"]
