"""Integer program (scipy.optimize.milp, HiGHS): the independent oracle and the wide-graph fallback.

Binary ``x[v, i]`` = variable v takes option i; continuous ``y[e, i, j] >= 0`` for each finite
entry of an edge matrix, tied to ``x`` by the local marginal constraints
``sum_j y[e, i, j] = x[u, i]`` and ``sum_i y[e, i, j] = x[v, j]`` (with binary x they force y to
be the product indicator; Wainwright & Jordan, "Graphical models, exponential families, and
variational inference", 2008, §8.4). Forbidden (infinite) entries get no y, so they cannot be chosen.
Solved with ``mip_rel_gap = 0`` (proven optimum).
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from .effort import UNBOUNDED, Effort
from .problem import NoFeasiblePlan, SearchProblem, Solution


def _build(sizes, unary, edges, memory=None, memory_limit=None):
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    nx = int(offs[-1])
    c = [np.where(np.isinf(u), 0.0, u) for u in unary]
    upper = [np.where(np.isinf(u), 0.0, 1.0) for u in unary]
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0
    for v, m in enumerate(sizes):          # one option per variable
        rows += [r] * m
        cols += list(range(offs[v], offs[v] + m))
        vals += [1.0] * m
        lo.append(1.0), hi.append(1.0)
        r += 1
    col = nx
    for (u, v), mat in edges.items():
        ii, jj = np.nonzero(np.isfinite(mat))
        ycols = col + np.arange(len(ii))
        c.append(mat[ii, jj])
        upper.append(np.ones(len(ii)))
        for side, idx, var in ((0, ii, u), (1, jj, v)):
            for k in range(sizes[var]):
                sel = ycols[idx == k]
                rows += [r] * (len(sel) + 1)
                cols += list(sel) + [offs[var] + k]
                vals += [1.0] * len(sel) + [-1.0]
                lo.append(0.0), hi.append(0.0)
                r += 1
        col += len(ii)
    if memory_limit is not None:
        rows += [r] * nx
        cols += list(range(nx))
        vals += list(np.concatenate(memory))
        lo.append(-np.inf), hi.append(float(memory_limit))
        r += 1
    a = coo_matrix((vals, (rows, cols)), shape=(r, col)).tocsr()
    integrality = np.r_[np.ones(nx), np.zeros(col - nx)]
    return np.concatenate(c), a, np.array(lo), np.array(hi), integrality, np.concatenate(upper), offs


def nonzeros(sizes, edges, memory_limit=None) -> int:
    """Non-zeros of the constraint matrix :func:`_build` would make, counted without building it
    (one-option rows: Σ sizes; per edge, two marginal families: 2 per finite entry plus one per
    option of each end; the memory row: Σ sizes)."""
    nx = int(sum(sizes))
    total = nx + (nx if memory_limit is not None else 0)
    for (u, v), mat in edges.items():
        total += 2 * int(np.count_nonzero(np.isfinite(mat))) + sizes[u] + sizes[v]
    return total


class WorkLimitReached(Exception):
    """The integer program was not started, or stopped, at its work limit without a plan.

    Attributes:
        bound: HiGHS's proven lower bound on the optimum (``-inf`` when it never started)."""

    def __init__(self, message: str, bound: float = -np.inf):
        super().__init__(message)
        self.bound = bound


def _run(sizes, unary, edges, memory=None, memory_limit=None, effort: Effort = UNBOUNDED
         ) -> tuple[list[int], float | None]:
    """``(choice, bound)``: ``bound`` is ``None`` when HiGHS proved ``choice`` optimal, else its
    dual bound (it stopped at ``effort``'s node limit).

    Raises:
        NoFeasiblePlan: infeasible. WorkLimitReached: too large for ``effort``, or stopped
            before any feasible plan."""
    size = nonzeros(sizes, edges, memory_limit)
    if not effort.allows(size):    # checked before building: a wide program is GBs of lists
        raise WorkLimitReached(f"integer program of {size} non-zeros is over the work limit")
    c, a, lo, hi, integ, upper, offs = _build(sizes, unary, edges, memory, memory_limit)
    options = {"mip_rel_gap": 0.0}
    nodes = effort.node_limit(size)
    if nodes is not None:
        options["node_limit"] = nodes
    res = milp(c, constraints=LinearConstraint(a, lo, hi), integrality=integ,
               bounds=Bounds(np.zeros(len(c)), upper), options=options)
    if res.status == 2:
        raise NoFeasiblePlan("the integer program is infeasible (memory limit or forbidden pairs)")
    bound = getattr(res, "mip_dual_bound", None)
    if res.x is None:
        if nodes is not None and res.status != 0:
            raise WorkLimitReached(f"integer program stopped at {nodes} nodes without a plan",
                                   -np.inf if bound is None else float(bound))
        raise RuntimeError(f"HiGHS failed: {res.message}")
    choice = [int(np.argmax(res.x[offs[v]:offs[v + 1]])) for v in range(len(sizes))]
    return choice, (None if res.status == 0 or bound is None else float(bound))


def run_unconstrained(p, effort: Effort) -> tuple[list[int], float | None]:
    """``(choice, bound)`` of a solver-form problem (:class:`.chain.Problem`), no memory limit,
    within ``effort`` (``bound``: ``None`` when proven optimal, else HiGHS's dual bound).

    Raises:
        NoFeasiblePlan: infeasible. WorkLimitReached: as :func:`_run`."""
    return _run(p.sizes, p.unary, p.edges, effort=effort)


def solve_ilp_problem(p) -> list[int]:
    """Optimal choice of a solver-form problem (:class:`.chain.Problem`), no memory limit."""
    return _run(p.sizes, p.unary, p.edges)[0]


def solve_ilp(problem: SearchProblem, memory_limit: float | None = None,
              effort: Effort = UNBOUNDED) -> Solution:
    """Exact optimum by integer programming (HiGHS through ``scipy.optimize.milp``).

    Args:
        problem: the search problem (costs in seconds, memory in bytes per device).
        memory_limit: bytes per device the chosen options' memory may sum to.
        effort: the work limit (:mod:`.effort`); unbounded by default (the oracle of tests).
    Returns:
        the optimum; or, stopped at ``effort``'s node limit, the best plan found with HiGHS's
        dual bound in :attr:`Solution.bound`.
    Raises:
        NoFeasiblePlan: no assignment fits (or all use a forbidden pair).
        WorkLimitReached: the program is over ``effort``, or stopped before a feasible plan.
    """
    from .problem import merged_edges, validate

    validate(problem)
    sizes = [len(v.keys) for v in problem.variables]
    choice, bound = _run(sizes, [v.cost for v in problem.variables], merged_edges(problem),
                         [v.memory for v in problem.variables], memory_limit, effort)
    return Solution(choice, problem.total(choice), problem.memory(choice), bound)
