"""Memory limit with a duality gap: min-marginals and reduced-cost fixing against brute force."""
from __future__ import annotations

import itertools
import math
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smsg_ms.search import NoFeasiblePlan, solve, solve_brute_force
from smsg_ms.search.marginals import min_marginals
from smsg_ms.search.solve import lagrangian_marginals, solve_gap, to_problem
from smsg_ms.search.synthetic import transformer_problem
from test_search import problems


def _brute_marginals(problem, lam=0.0):
    """min over all assignments with x_v = i of cost + lam * memory, by enumeration."""
    out = [np.full(len(v.keys), math.inf) for v in problem.variables]
    for choice in itertools.product(*[range(len(v.keys)) for v in problem.variables]):
        c = problem.total(list(choice)) + lam * problem.memory(list(choice))
        for v, i in enumerate(choice):
            out[v][i] = min(out[v][i], c)
    return out


def _same(a, b) -> bool:
    return all(np.allclose(x, y, rtol=1e-12, atol=1e-12, equal_nan=False) or
               np.array_equal(x, y) for x, y in zip(a, b))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6), st.data())
def test_min_marginals_equal_enumeration(problem, data):
    n = len(problem.variables)
    cuts = data.draw(st.lists(st.integers(0, max(0, n - 2)), max_size=n)) if n > 1 else []
    lam = data.draw(st.sampled_from([0.0, 0.25, 1.0]))
    got = min_marginals(to_problem(problem, lam), cuts)
    assert _same(got, _brute_marginals(problem, lam))


def test_min_marginals_of_repeated_layers_equal_enumeration():
    """Identical layers share their elimination tables; the marginals still differ per layer."""
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    assert math.prod(len(v.keys) for v in problem.variables) == 2 ** 10
    got = lagrangian_marginals(problem, 0.5 / 2 ** 20, repeated)
    want = _brute_marginals(problem, 0.5 / 2 ** 20)
    assert _same(got, want)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6), st.integers(0, 12), st.sampled_from([0.0, 0.1, 0.5, 2.0]),
       st.data())
def test_gap_search_equals_brute_force_for_any_multiplier(problem, limit, lam, data):
    """Reduced-cost fixing is exact for every λ >= 0 and every fitting incumbent."""
    try:
        want = solve_brute_force(problem, limit)
    except NoFeasiblePlan:
        return
    fitting = [list(c) for c in itertools.product(*[range(len(v.keys))
                                                      for v in problem.variables])
               if problem.memory(list(c)) <= limit and math.isfinite(problem.total(list(c)))]
    incumbent = data.draw(st.sampled_from(fitting))
    got, bound = solve_gap(problem, limit, None, incumbent, lam)
    assert bound is None                     # no work limit: proven optimal
    assert problem.memory(got) <= limit
    assert math.isclose(problem.total(got), want.cost, rel_tol=1e-12, abs_tol=1e-12)


def test_binding_limits_on_layers_equal_brute_force(monkeypatch):
    """Two identical layers; every memory level below the unconstrained optimum's as the limit.
    Same cost as enumeration, and the gap search (not only the certified Lagrangian) ran."""
    solve_module = sys.modules["smsg_ms.search.solve"]
    calls = []
    real = solve_module.solve_gap
    monkeypatch.setattr(solve_module, "solve_gap",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    free = solve(problem, repeated=repeated)
    levels = sorted({problem.memory(list(c)) for c in itertools.product(
        *[range(len(v.keys)) for v in problem.variables])})
    for limit in [m for m in levels if m < free.memory]:
        want = solve_brute_force(problem, limit)
        got = solve(problem, limit, repeated=repeated)
        assert got.memory <= limit
        assert math.isclose(got.cost, want.cost, rel_tol=1e-12)
    assert len(calls) >= 5


def test_too_wide_for_marginals_falls_back_to_the_whole_integer_program(monkeypatch):
    solve_module = sys.modules["smsg_ms.search.solve"]
    monkeypatch.setattr(solve_module, "TABLE_LIMIT", 1)   # every segment is too wide
    problem, _ = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    incumbent = [len(v.keys) - 1 for v in problem.variables]
    limit = problem.memory(incumbent)
    want = solve_brute_force(problem, limit)
    got, bound = solve_gap(problem, limit, None, incumbent, 1e-6)
    assert bound is None
    assert math.isclose(problem.total(got), want.cost, rel_tol=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6), st.integers(0, 12), st.data())
def test_improved_incumbent_fits_and_costs_no_more(problem, limit, data):
    from smsg_ms.search.solve import improve_fitting

    fitting = [list(c) for c in itertools.product(*[range(len(v.keys))
                                                      for v in problem.variables])
               if problem.memory(list(c)) <= limit and math.isfinite(problem.total(list(c)))]
    if not fitting:
        return
    start = data.draw(st.sampled_from(fitting))
    got = improve_fitting(problem, start, limit)
    assert problem.memory(got) <= limit
    assert problem.total(got) <= problem.total(start)
    assert improve_fitting(problem, start, limit) == got     # deterministic
