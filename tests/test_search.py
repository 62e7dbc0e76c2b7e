"""Exact search against independent oracles: brute force (itertools.product) and HiGHS (milp)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smsg_ms.search import (Edge, NoFeasiblePlan, SearchProblem, Variable, solve,
                            solve_brute_force, solve_ilp)
from smsg_ms.search.chain import frontiers
from smsg_ms.search.solve import solve_chain, to_problem
from smsg_ms.search.synthetic import transformer_problem

#: option counts seen for 2, 4, 8 and 24 devices (divisor-count-like patterns)
PATTERNS = {2: [1, 2], 4: [1, 2, 3], 8: [1, 2, 3, 4], 24: [1, 2, 3, 4, 5, 6]}
VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]  # coarse: many ties; inf forbids


@st.composite
def problems(draw, max_vars=7):
    """DAG-ish problems: chains, branches, residual (skip) edges, ties, forbidden entries."""
    pattern = PATTERNS[draw(st.sampled_from(sorted(PATTERNS)))]
    n = draw(st.integers(1, max_vars))
    sizes = [draw(st.sampled_from(pattern)) for _ in range(n)]
    variables = []
    for i, m in enumerate(sizes):
        cost = draw(st.lists(st.sampled_from(VALUES[:-1]), min_size=m, max_size=m))
        mem = draw(st.lists(st.integers(0, 4), min_size=m, max_size=m))
        variables.append(Variable(f"v{i}", [i], list(range(m)), cost, mem))
    edges = []
    for v in range(1, n):
        preds = draw(st.sets(st.integers(0, v - 1), max_size=min(3, v)))
        for u in sorted(preds):
            mat = draw(st.lists(st.sampled_from(VALUES), min_size=sizes[u] * sizes[v],
                                max_size=sizes[u] * sizes[v]))
            edges.append(Edge(u, v, np.reshape(mat, (sizes[u], sizes[v]))))
    return SearchProblem(variables, edges)


def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def _brute_or_none(problem, limit=None):
    try:
        return solve_brute_force(problem, limit)
    except NoFeasiblePlan:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_solve_equals_brute_force(problem):
    want = _brute_or_none(problem)
    if want is None:
        with pytest.raises(NoFeasiblePlan):
            solve(problem)
        return
    got = solve(problem)
    assert _close(got.cost, want.cost)
    assert _close(problem.total(got.choice), got.cost)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_any_cuts_give_the_optimum(problem, data):
    """Exactness does not depend on where the chain is cut (min-plus product of segments)."""
    n = len(problem.variables)
    cuts = data.draw(st.lists(st.integers(0, max(0, n - 2)), max_size=n)) if n > 1 else []
    want = _brute_or_none(problem)
    p = to_problem(problem)
    if want is None:
        with pytest.raises(NoFeasiblePlan):
            solve_chain(p, cuts)
        return
    choice = solve_chain(p, cuts)
    assert _close(problem.total(choice), want.cost)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6), st.integers(0, 12))
def test_memory_limited_solve_equals_brute_force(problem, limit):
    want = _brute_or_none(problem, limit)
    if want is None:
        with pytest.raises(NoFeasiblePlan):
            solve(problem, limit)
        return
    got = solve(problem, limit)
    assert got.memory <= limit
    assert _close(got.cost, want.cost)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_vars=6))
def test_ilp_equals_brute_force(problem):
    want = _brute_or_none(problem)
    if want is None:
        with pytest.raises(NoFeasiblePlan):
            solve_ilp(problem)
        return
    assert _close(solve_ilp(problem).cost, want.cost)


def test_frontier_of_a_residual_chain():
    """0→1→2, 0→2 (residual), 2→3: after 0 and 1 the frontier holds 0 (and 1); after 2 only 2."""
    assert frontiers(4, [(0, 1), (1, 2), (0, 2), (2, 3)]) == [(), (0,), (0, 1), (2,), ()]


@pytest.mark.parametrize("options,inf_rate", [([2, 3, 1, 4], 0.0), ([3, 2, 4], 0.3)])
def test_transformer_blocks_equal_ilp(options, inf_rate):
    problem, repeated = transformer_problem(3, options, seed=7, inf_rate=inf_rate)
    want = solve_ilp(problem)
    got = solve(problem, repeated=repeated)
    assert _close(got.cost, want.cost)
    assert _close(problem.total(got.choice), got.cost)


@pytest.mark.parametrize("layers", [1, 2, 5, 8, 13])
def test_repeated_blocks_equal_unrolled(layers):
    """Squaring a run of identical blocks = solving the same problem with no block hint."""
    problem, repeated = transformer_problem(layers, [3, 2, 4, 1, 3], seed=layers, tie_rate=1.0)
    hinted = solve(problem, repeated=repeated)
    unrolled = solve(problem)
    assert _close(hinted.cost, unrolled.cost)
    one_layer_cuts = solve_chain(to_problem(problem), cuts=[])  # a single segment, no squaring
    assert _close(problem.total(one_layer_cuts), hinted.cost)


def test_wrong_block_hint_costs_nothing():
    problem, repeated = transformer_problem(4, [2, 3], seed=3)
    problem.variables[30].cost[0] -= 5.0  # layer 1 no longer identical to the others
    bogus = [[list(range(1, 26)), list(range(26, 51)), list(range(51, 76)), [200, 3]]]
    assert _close(solve(problem, repeated=bogus).cost, solve_ilp(problem).cost)


def _hoist(problem, repeated, name="cast1"):
    """Move every layer's ``name`` variable to the front (blocks become non-contiguous)."""
    n = len(problem.variables)
    hoisted = [v for v in range(n) if problem.variables[v].name.endswith("." + name)]
    order = hoisted + [v for v in range(n) if v not in hoisted]
    new = {v: i for i, v in enumerate(order)}
    moved = SearchProblem([problem.variables[v] for v in order],
                          [Edge(new[e.u], new[e.v], e.cost) for e in problem.edges])
    return moved, [[[new[v] for v in block] for block in group] for group in repeated]


def test_non_contiguous_blocks_are_reordered_and_reused(monkeypatch):
    import importlib

    solve_mod = importlib.import_module("smsg_ms.search.solve")  # the package exports solve()

    problem, repeated = _hoist(*transformer_problem(6, [2, 3, 2, 4], seed=5))
    calls = []
    real = solve_mod.transfer
    monkeypatch.setattr(solve_mod, "transfer", lambda *a: calls.append(1) or real(*a))
    got = solve(problem, repeated=repeated)
    assert len(calls) < 6  # the six layers were not solved one by one
    assert _close(got.cost, solve_ilp(problem).cost)
    assert _close(problem.total(got.choice), got.cost)


def test_variable_shared_by_all_layers(monkeypatch):
    """A 2-option mask feeding every layer's scores stays in every frontier; layers still repeat."""
    import importlib

    solve_mod = importlib.import_module("smsg_ms.search.solve")
    base, repeated = transformer_problem(10, [2, 3, 2], seed=9)
    mask = Variable("mask", [], [0, 1], [0.3, 0.0], [0.0, 0.0])
    variables = [mask] + base.variables
    edges = [Edge(e.u + 1, e.v + 1, e.cost) for e in base.edges]
    rng = np.random.default_rng(0)
    scores = [i for i, v in enumerate(variables) if v.name.endswith(".scores")]
    mat = rng.uniform(0, 1, (2, len(variables[scores[0]].keys)))
    edges += [Edge(0, s, mat.copy()) for s in scores]
    problem = SearchProblem(variables, edges)
    hint = [[[v + 1 for v in block] for block in repeated[0]]]
    calls = []
    real = solve_mod.transfer
    monkeypatch.setattr(solve_mod, "transfer", lambda *a: calls.append(1) or real(*a))
    got = solve(problem, repeated=hint)
    # first layer (mask is near), middle run, last layer (mask leaves the frontier), ends
    assert len(calls) <= 5
    assert _close(got.cost, solve_ilp(problem).cost)


def _hub_problem(spokes: int = 40) -> SearchProblem:
    """Variable 0 (2 options) and the last one (2 options) joined through ``spokes`` variables
    of one option each (as a MoE layer's per-expert operators with one strategy): every frontier
    between them holds all the spokes seen so far."""
    last = spokes + 1
    variables = [Variable("a", [0], [0, 1], [1.0, 0.0], [0, 0])]
    variables += [Variable(f"x{i}", [i], [0], [0.5], [0]) for i in range(1, last)]
    variables.append(Variable("b", [last], [0, 1], [0.0, 1.0], [0, 0]))
    edges = [Edge(0, i, np.array([[0.0], [0.1]])) for i in range(1, last)]
    edges += [Edge(i, last, np.array([[0.05, 0.0]])) for i in range(1, last)]
    return SearchProblem(variables, edges)


def test_single_option_variables_do_not_widen_the_tables():
    """Regression: 40 single-option variables between two free ones made an elimination table
    of 41 axes ("maximum supported dimension for an ndarray is 32, found ..."). By hand, with 40
    spokes: a = 0 costs 1, a = 1 costs 40 · 0.1 = 4; b = 0 costs 40 · 0.05 = 2, b = 1 costs 1;
    the spokes 40 · 0.5 = 20 whatever the choice: the optimum is a = 0, b = 1, total 22."""
    from smsg_ms.search.solve import lagrangian_marginals

    problem = _hub_problem(40)
    got = solve(problem)
    assert got.choice == [0] + [0] * 40 + [1]
    assert _close(got.cost, 22.0)
    # min-marginals: a = 1 forces 4 + 20 + 1 = 25; a spoke's only option, the optimum 22
    marg = lagrangian_marginals(problem, 0.0)
    assert _close(float(marg[0][0]), 22.0) and _close(float(marg[0][1]), 25.0)
    assert _close(float(marg[5][0]), 22.0)
    assert _close(float(marg[41][0]), 2.0 + 1.0 + 20.0)
