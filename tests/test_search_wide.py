"""Problems too wide for variable elimination under a work limit (#17 item 5): the search ends
with a valid plan and a proven lower bound, checked against brute-force enumeration."""
from __future__ import annotations

import itertools
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from smsg_ms.search import solve, solve_brute_force
from smsg_ms.search.effort import Effort
from smsg_ms.search.synthetic import transformer_problem
from test_search import problems

TINY = Effort(1e-9)        # no integer program may start: the local search and its bound


@pytest.fixture
def too_wide(monkeypatch):
    """Every segment is too wide for elimination (the 256-devices-per-stage situation)."""
    monkeypatch.setattr(sys.modules["smsg_ms.search.solve"], "TABLE_LIMIT", 1)


def _fitting_costs(problem, limit=math.inf):
    return [problem.total(list(c)) for c in itertools.product(
        *[range(len(v.keys)) for v in problem.variables]) if problem.memory(list(c)) <= limit]


def test_tiny_bound_on_a_too_wide_problem_states_its_gap(too_wide):
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    optimum = solve_brute_force(problem).cost
    got = solve(problem, repeated=repeated, effort=TINY)
    assert got.bound is not None                      # stopped: the bound is stated
    assert got.bound <= optimum * (1 + 1e-12) <= got.cost * (1 + 1e-12)
    assert got.cost == pytest.approx(problem.total(got.choice), rel=1e-12)   # a real plan
    assert math.isfinite(got.cost)
    assert got.gap == pytest.approx((got.cost - got.bound) / got.cost)
    assert solve(problem, repeated=repeated, effort=TINY).choice == got.choice  # deterministic


def test_too_wide_without_a_bound_is_exact(too_wide):
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    got = solve(problem, repeated=repeated, effort=Effort(math.inf))
    assert got.bound is None
    assert got.cost == pytest.approx(solve_brute_force(problem).cost, rel=1e-12)


def test_tiny_bound_too_wide_with_a_binding_memory_limit(too_wide):
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    free = solve_brute_force(problem)
    limit = max(m for m in {problem.memory(list(c)) for c in itertools.product(
        *[range(len(v.keys)) for v in problem.variables])} if m < free.memory)
    optimum = min(_fitting_costs(problem, limit))
    got = solve(problem, limit, repeated=repeated, effort=TINY)
    assert got.memory <= limit
    assert got.bound is not None
    assert got.bound <= optimum * (1 + 1e-12) <= got.cost * (1 + 1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6))
def test_wide_bound_never_exceeds_the_enumerated_optimum(problem):
    """Any problem, forced too wide with no integer program allowed: either a finite plan whose
    cost is enumerated and a bound below the enumerated optimum, or no plan was found."""
    from smsg_ms.search import NoFeasiblePlan

    mod = sys.modules["smsg_ms.search.solve"]
    saved, mod.TABLE_LIMIT = mod.TABLE_LIMIT, 0
    try:
        costs = [c for c in _fitting_costs(problem) if math.isfinite(c)]
        try:
            got = solve(problem, effort=TINY)
        except NoFeasiblePlan:
            return
        assert costs and got.cost == pytest.approx(problem.total(got.choice), rel=1e-12)
        assert got.bound is None or got.bound <= min(costs) + 1e-12 * max(1.0, abs(min(costs)))
    finally:
        mod.TABLE_LIMIT = saved


def test_restricted_start_is_the_optimum_over_the_most_promising_options():
    """restricted_optimum: the exact optimum over each variable's k most promising options
    (unary + each edge at its cheapest partner), for the largest k the elimination takes; an
    elimination that takes only 4 options per variable is stood in for by brute force."""
    import numpy as np

    from smsg_ms.search.chain import Problem, TooWide
    from smsg_ms.search.wide import plan_cost, restricted_optimum

    rng = np.random.default_rng(7)
    sizes = [9, 7, 9, 6]
    unary = [rng.random(n) for n in sizes]
    edges = {(u, u + 1): 3 * rng.random((sizes[u], sizes[u + 1])) for u in range(3)}
    edges[(0, 3)] = 3 * rng.random((sizes[0], sizes[3]))
    p = Problem(sizes, unary, edges)

    def brute(sub):
        if max(sub.sizes) > 4:
            raise TooWide("stand-in elimination takes 4 options per variable")
        return list(min(itertools.product(*[range(n) for n in sub.sizes]),
                        key=lambda c: plan_cost(sub, list(c))))

    score = [u.copy() for u in unary]
    for (u, v), m in edges.items():
        score[u] += m.min(axis=1)
        score[v] += m.min(axis=0)
    kept = [sorted(np.argsort(s, kind="stable")[:4].tolist()) for s in score]
    best = min(itertools.product(*kept), key=lambda c: plan_cost(p, list(c)))
    got = restricted_optimum(p, brute)
    assert got == list(best)
    assert restricted_optimum(p, lambda sub: (_ for _ in ()).throw(TooWide("never"))) is None
