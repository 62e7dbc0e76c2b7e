"""A bounded search: stopped by its work limit, it returns a fitting plan and a proven lower bound.

Expected values come from enumeration (:func:`solve_brute_force`): the plan must fit, cost no less
than the true optimum, and the bound must not exceed it.
"""
from __future__ import annotations

import itertools
import math

import pytest

from smsg_ms.search import solve, solve_brute_force
from smsg_ms.search.effort import UNBOUNDED, Effort
from smsg_ms.search.synthetic import transformer_problem

#: so small that no integer program may start: the Lagrangian's plan and bound are all there is
TINY = Effort(1e-9)


def _binding_limits(problem, free_memory):
    levels = sorted({problem.memory(list(c)) for c in itertools.product(
        *[range(len(v.keys)) for v in problem.variables])})
    return [m for m in levels if m < free_memory]


def test_tiny_limit_reports_a_gap_and_a_valid_plan():
    problem, repeated = transformer_problem(2, [2, 1, 1, 1, 1], seed=3, head=False)
    free = solve(problem, repeated=repeated)
    gaps = 0
    for limit in _binding_limits(problem, free.memory):
        want = solve_brute_force(problem, limit)
        got = solve(problem, limit, repeated=repeated, effort=TINY)
        assert got.memory <= limit
        assert got.cost >= want.cost - 1e-12
        if got.bound is None:            # the Lagrangian certified it: then it is the optimum
            assert math.isclose(got.cost, want.cost, rel_tol=1e-12)
            continue
        gaps += 1
        assert got.bound <= want.cost * (1 + 1e-12)
        assert got.gap == pytest.approx((got.cost - got.bound) / got.cost)
        # the same problem and limit give the same plan (the bound is on work, not time)
        again = solve(problem, limit, repeated=repeated, effort=TINY)
        assert (again.choice, again.bound) == (got.choice, got.bound)
        exact = solve(problem, limit, repeated=repeated, effort=UNBOUNDED)
        assert exact.bound is None and math.isclose(exact.cost, want.cost, rel_tol=1e-12)
    assert gaps >= 1, "no limit left a duality gap: the case does not exercise the work limit"


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "60"])
def test_effort_refuses_a_non_positive_limit(bad):
    with pytest.raises(ValueError, match="positive number of seconds"):
        Effort(bad)


def test_node_limit_shrinks_with_the_program_and_never_reaches_zero():
    e = Effort(10.0)
    assert e.allows(1000) and not e.allows(10 ** 9)
    assert e.node_limit(10) > e.node_limit(70_000) >= 1
    assert UNBOUNDED.allows(10 ** 12) and UNBOUNDED.node_limit(10 ** 12) is None
