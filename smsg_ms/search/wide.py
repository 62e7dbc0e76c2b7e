"""Problems too wide for variable elimination, solved within a work limit.

When a segment's elimination would need a table over :data:`.solve.TABLE_LIMIT` entries the
search falls back to the integer program (:mod:`.ilp`). That program can be far too large for the
time limit (at 256 devices per stage the LLaMA-2-70B shape's edge tables hold tens of millions of
entries), so here it runs only within :class:`.effort.Effort` (its size is checked *before* it is
built, its branch-and-bound nodes are limited), and otherwise the plan is the best one a
deterministic local search finds, with a proven lower bound:

* the plan: every variable starts at its cheapest option (lowest index on ties), and again at
  the exact optimum over each variable's few most promising options
  (:func:`restricted_optimum`), then coordinate descent (iterated conditional modes; Besag,
  "On the statistical analysis of dirty pictures", JRSS B 48(3), 1986) moves each variable, in index order, to its cheapest option given the
  others until no move lowers the cost; the integer program's incumbent, when it has one, is the
  start instead;
* the bound: each edge's cost is charged to its first variable at its cheapest partner,
  ``L = Σ_v min_i (unary_v[i] + Σ_{(v, w)} min_j E_vw[i, j])``; every plan ``x`` costs
  ``Σ_v (unary_v[x_v] + Σ_{(v, w)} E_vw[x_v, x_w]) >= L`` term by term (derivation), and the
  integer program's dual bound, when it ran, is also a bound: the larger is kept.

Everything depends only on the problem and the work limit, never on a clock, so every rank gets
the same plan and bound.
"""
from __future__ import annotations

import numpy as np

from .chain import Problem
from .effort import Effort
from .problem import NoFeasiblePlan


def edge_floor_bound(p: Problem) -> float:
    """Proven lower bound ``L`` (seconds) on the cost of every plan of ``p`` (see the module)."""
    local = [np.asarray(u, dtype=float).copy() for u in p.unary]
    for (u, _v), mat in p.edges.items():
        local[u] += np.min(mat, axis=1)
    return float(sum(np.min(x) for x in local))


def plan_cost(p: Problem, choice: list[int]) -> float:
    """Σ unary + Σ edge costs of ``choice`` (seconds; ``inf`` with a forbidden pair)."""
    return float(sum(u[c] for u, c in zip(p.unary, choice))
                 + sum(m[choice[u], choice[v]] for (u, v), m in p.edges.items()))


def descend(p: Problem, choice: list[int]) -> list[int]:
    """Coordinate descent from ``choice``: each variable in index order moved to its cheapest
    option given the others (lowest index on ties, only on a strict decrease), until none
    moves. Deterministic; never raises the cost."""
    choice = list(choice)
    incident: list[list[tuple[int, int, np.ndarray]]] = [[] for _ in p.sizes]
    for (u, v), mat in p.edges.items():
        incident[u].append((0, v, mat))
        incident[v].append((1, u, mat))
    moved = True
    while moved:
        moved = False
        for x in range(len(p.sizes)):
            local = np.asarray(p.unary[x], dtype=float).copy()
            for side, other, mat in incident[x]:
                local += mat[:, choice[other]] if side == 0 else mat[choice[other], :]
            j = int(np.argmin(local))
            if local[j] < local[choice[x]]:
                choice[x] = j
                moved = True
    return choice


#: options kept per variable by :func:`restricted_optimum`, tried in this order
KEEP_COUNTS = (16, 8, 4, 2)


def restricted_optimum(p: Problem, exact) -> list[int] | None:
    """Exact optimum over each variable's ``k`` most promising options (its unary cost plus
    each incident edge at its cheapest partner, the terms of :func:`edge_floor_bound`; lowest
    index on ties), for the largest ``k`` of :data:`KEEP_COUNTS` whose variable elimination
    fits (:mod:`.chain`); ``None`` when none fits. A start for :func:`descend`: far better
    than the cheapest options alone when edges (redistributions) dominate, as in a large
    stage where every operator's cheapest compute disagrees with its neighbours' layouts.
    ``exact``: the chain elimination (``Problem -> choice``, raising :class:`.chain.TooWide`)."""
    from .chain import TooWide

    score = [np.asarray(u, dtype=float).copy() for u in p.unary]
    for (u, v), mat in p.edges.items():
        score[u] += np.min(mat, axis=1)
        score[v] += np.min(mat, axis=0)
    for k in KEEP_COUNTS:
        if all(n <= k for n in p.sizes):
            continue     # nothing removed: the full problem, already too wide
        keep = [np.sort(np.argsort(sc, kind="stable")[:k]) for sc in score]
        sub = Problem([len(x) for x in keep],
                      [np.asarray(u, dtype=float)[x] for u, x in zip(p.unary, keep)],
                      {(u, v): m[np.ix_(keep[u], keep[v])] for (u, v), m in p.edges.items()})
        try:
            local = exact(sub)
        except TooWide:
            continue
        return [int(keep[i][c]) for i, c in enumerate(local)]
    return None


def solve_wide(p: Problem, effort: Effort, exact=None) -> tuple[list[int], float | None]:
    """``(choice, bound)`` of a problem too wide to eliminate: the integer program's proven
    optimum (``bound`` ``None``) when it finishes within ``effort``, else the best plan found
    and a proven lower bound on the optimum (seconds).

    Raises:
        NoFeasiblePlan: the integer program proved every plan uses a forbidden pair, or, stopped,
            neither it nor the descent found a plan without one.
    """
    from .ilp import WorkLimitReached, run_unconstrained

    start, bound = None, edge_floor_bound(p)
    try:
        choice, dual = run_unconstrained(p, effort)
        if dual is None:
            return choice, None
        start, bound = choice, max(bound, dual)
    except WorkLimitReached as stopped:
        bound = max(bound, stopped.bound)
    starts = [start] if start is not None else []
    restricted = restricted_optimum(p, exact) if exact is not None else None
    starts += [s for s in (restricted, [int(np.argmin(u)) for u in p.unary])
               if s is not None]
    choice, cost = None, np.inf
    for s in starts:     # the first of the cheapest descents (a fixed order: deterministic)
        c = descend(p, s)
        if choice is None or plan_cost(p, c) < cost:
            choice, cost = c, plan_cost(p, c)
    if not np.isfinite(cost):
        raise NoFeasiblePlan("no plan without a forbidden (infinite-cost) pair was found within "
                             "the work limit (the problem is too wide to search exactly)")
    return choice, min(bound, cost)
