"""Memory limit, infeasibility message, determinism and the progress bar of the exact search."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smsg_ms.search import (Edge, NoFeasiblePlan, SearchProblem, Variable, solve,
                            solve_brute_force, solve_ilp)
from smsg_ms.search import progress as progress_mod
from smsg_ms.search.synthetic import transformer_problem

GIB = 2.0 ** 30


def _three_variables():
    """a: {4, 2.5} GiB, b: {3, 5} GiB, c: {1} GiB; the pair (a=1, b=0) is forbidden.

    Fitting plans by hand: (0,0,0) = 8 GiB, (0,1,0) = 10 GiB, (1,1,0) = 8.5 GiB, so the smallest
    needs 8 GiB, i.e. 2 GiB = 2147483648 bytes over a 6 GiB limit, led by a (4 GiB) then b (3 GiB).
    """
    a = Variable("a", [0], ["a0", "a1"], [1.5, 0.0], [4 * GIB, 2.5 * GIB])
    b = Variable("b", [1], ["b0", "b1"], [0.0, 1.0], [3 * GIB, 5 * GIB])
    c = Variable("c", [2], ["c0"], [0.0], [1 * GIB])
    return SearchProblem([a, b, c], [Edge(0, 1, [[0.0, 0.0], [math.inf, 0.0]]),
                                     Edge(1, 2, [[0.0], [0.0]])])


def test_no_feasible_plan_says_by_how_much_and_who():
    problem = _three_variables()
    with pytest.raises(NoFeasiblePlan) as err:
        solve(problem, memory_limit=6 * GIB)
    msg = str(err.value)
    assert "2147483648 bytes (2.000 GiB) over" in msg
    assert "8589934592 bytes (8.000 GiB)" in msg
    assert msg.index("a 4.000 GiB") < msg.index("b 3.000 GiB") < msg.index("c 1.000 GiB")


def test_memory_limit_changes_the_plan():
    """By hand: (0,0,0) costs 1.5 (8 GiB), (1,1,0) costs 1 (8.5 GiB), (0,1,0) costs 2.5 (10 GiB).
    Unconstrained the answer is (1,1,0); with the limit at 8 GiB it must be (0,0,0)."""
    problem = _three_variables()
    assert solve(problem).choice == [1, 1, 0]
    got = solve(problem, memory_limit=8 * GIB)
    assert got.choice == [0, 0, 0] and got.cost == 1.5 and got.memory == 8 * GIB


def test_every_plan_forbidden():
    a = Variable("a", [0], [0, 1], [0.0, 0.0], None)
    b = Variable("b", [1], [0, 1], [0.0, 0.0], None)
    problem = SearchProblem([a, b], [Edge(0, 1, np.full((2, 2), math.inf))])
    with pytest.raises(NoFeasiblePlan, match="forbidden"):
        solve(problem)


def test_bad_input_names_the_culprit():
    a = Variable("attn.q", [0], [0, 1], [0.0, float("nan")], None)
    with pytest.raises(ValueError, match="attn.q"):
        solve(SearchProblem([a]))
    b = Variable("b", [1], [0], [0.0], None)
    with pytest.raises(ValueError, match="edge 0->1"):
        solve(SearchProblem([a.__class__("a", [0], [0, 1], [0, 0], None), b],
                            [Edge(0, 1, np.zeros((3, 1)))]))


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_memory_limited_transformer_equals_ilp(fraction):
    """A limit between the smallest-memory plan and the unconstrained optimum's memory."""
    problem, repeated = transformer_problem(2, [3, 2, 4], seed=11, tie_rate=0.0)
    free = solve(problem)
    low = solve_ilp(SearchProblem([Variable(v.name, [], v.keys, v.memory, v.memory)
                                   for v in problem.variables],
                                  [Edge(e.u, e.v, np.where(np.isinf(e.cost), np.inf, 0.0))
                                   for e in problem.edges])).memory
    limit = low + fraction * (free.memory - low)
    want = solve_ilp(problem, limit)
    got = solve(problem, limit, repeated=repeated)
    assert got.memory <= limit
    assert math.isclose(got.cost, want.cost, rel_tol=1e-9)


def _shuffled(problem: SearchProblem, rng) -> SearchProblem:
    """Same problem: edges permuted, some reversed (transposed), one split into two halves."""
    edges = []
    for e in problem.edges:
        if rng.random() < 0.5:
            edges.append(Edge(e.v, e.u, e.cost.T.copy()))
        else:
            edges.append(Edge(e.u, e.v, e.cost.copy()))
    if edges:
        e = edges.pop(0)
        edges += [Edge(e.u, e.v, e.cost / 2), Edge(e.u, e.v, e.cost / 2)]  # exact halves
    order = rng.permutation(len(edges))
    return SearchProblem(problem.variables, [edges[i] for i in order])


@pytest.mark.parametrize("seed", range(4))
def test_same_choice_every_time_and_for_a_shuffled_build(seed):
    problem, repeated = transformer_problem(3, [3, 2, 4, 2], seed=seed, tie_rate=1.0)
    first = solve(problem, repeated=repeated)
    assert solve(problem, repeated=repeated).choice == first.choice
    again = solve(_shuffled(problem, np.random.default_rng(seed)), repeated=repeated)
    assert again.choice == first.choice and again.cost == first.cost


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000))
def test_ties_are_resolved_the_same_way(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    sizes = rng.integers(1, 4, n)
    variables = [Variable(f"v{i}", [i], list(range(m)), np.zeros(m), np.ones(m))
                 for i, m in enumerate(sizes)]  # all costs 0: everything ties
    edges = [Edge(i - 1, i, rng.choice([0.0, math.inf], (sizes[i - 1], sizes[i]), p=[.8, .2]))
             for i in range(1, n)]
    problem = SearchProblem(variables, edges)
    try:
        solve_brute_force(problem)
    except NoFeasiblePlan:
        return
    a = solve(problem)
    b = solve(_shuffled(problem, rng))
    assert a.choice == b.choice and a.cost == 0.0


def test_progress_bar_waits_for_the_delay(monkeypatch):
    quiet = progress_mod.LazyProgress(True, "planning")
    quiet.advance()
    assert quiet.bar is None  # fast planning draws nothing
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.0)
    with progress_mod.LazyProgress(True, "planning") as slow:
        slow.total(3)
        slow.advance()
        assert slow.bar is not None
    assert slow.bar is None
    off = progress_mod.LazyProgress(None, "planning")  # pytest's stderr is not a terminal
    assert not off.enabled
