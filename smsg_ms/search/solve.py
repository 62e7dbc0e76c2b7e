"""Exact strategy search: chain of segments (min-plus, repeated squaring) under a memory limit.

See :mod:`.chain` for the decomposition and why it is exact, :mod:`.memory` for the memory limit.
"""
from __future__ import annotations

import math

import numpy as np

from .chain import (Powers, Problem, Segment, TooWide, frontiers, minplus, plan_segment,
                    same_content, state_values, transfer)
from .effort import UNBOUNDED, Effort
from .progress import LazyProgress
from .problem import (Edge, NoFeasiblePlan, SearchProblem, Solution, Variable, merged_edges,
                      validate)

#: a cut is used only if its frontier has at most this many joint states (transfer matrix side)
STATE_LIMIT = 1024
#: a run of identical segments is squared only if its side is at most this (products cost side³)
SQUARE_LIMIT = 512
#: widest table (entries) variable elimination may build before the ILP takes over
TABLE_LIMIT = 20_000_000
#: automatic cuts (outside the given blocks): frontier states at most, segment length at least
AUTO_STATE, AUTO_MIN_LENGTH = 128, 16


def to_problem(problem: SearchProblem, lam: float = 0.0, memory_only: bool = False) -> Problem:
    """Solver form of ``problem``: unary = cost + lam * memory (or memory alone, edges 0/inf)."""
    validate(problem)
    edges = merged_edges(problem)
    if memory_only:
        unary = [np.where(np.isinf(v.cost), np.inf, v.memory) for v in problem.variables]
        edges = {k: np.where(np.isinf(m), np.inf, 0.0) for k, m in edges.items()}
    else:
        unary = [v.cost + lam * v.memory if lam else v.cost for v in problem.variables]
    return Problem([len(v.keys) for v in problem.variables], unary, edges)


def choose_cuts(p: Problem, repeated=None, fronts=None) -> list[int]:
    """Cut positions (cut after position k): block boundaries and small automatic frontiers.

    Block boundaries come from ``repeated`` (blocks whose variables form a contiguous range);
    elsewhere a cut is placed where the frontier has at most :data:`AUTO_STATE` states once the
    current segment holds :data:`AUTO_MIN_LENGTH` variables. Cuts whose frontier exceeds
    :data:`STATE_LIMIT` states are dropped (correctness never depends on the cuts).
    """
    n = len(p.sizes)
    fronts = fronts or frontiers(n, p.edges)
    states = [math.prod(p.sizes[v] for v in f) for f in fronts]
    cuts, in_block = set(), np.zeros(n, dtype=bool)
    for group in repeated or []:
        for block in group:
            b = sorted(block)
            if b and b == list(range(b[0], b[-1] + 1)) and 0 <= b[0] and b[-1] < n:
                cuts.update(k for k in (b[0] - 1, b[-1]) if 0 <= k < n - 1)
                in_block[b[0]:b[-1] + 1] = True
    start = 0
    for k in range(n - 1):
        if k in cuts:
            start = k + 1
        elif not in_block[k] and k + 1 - start >= AUTO_MIN_LENGTH and states[k + 1] <= AUTO_STATE:
            cuts.add(k)
            start = k + 1
    return sorted(k for k in cuts if states[k + 1] <= STATE_LIMIT)


def solve_chain(p: Problem, cuts: list[int], progress: LazyProgress | None = None,
                fronts=None) -> list[int]:
    """Optimal choice (option per variable) of ``p`` for the given cuts; exact for any cuts.

    Raises:
        TooWide: some segment's elimination needs a table larger than :data:`TABLE_LIMIT`.
        NoFeasiblePlan: every assignment has infinite cost.
    """
    n = len(p.sizes)
    fronts = fronts or frontiers(n, p.edges)
    bounds = [-1] + sorted(set(cuts)) + [n - 1]
    segs = [Segment(a + 1, b, fronts[a + 1], fronts[b + 1]) for a, b in zip(bounds, bounds[1:])]
    runs: list[list[Segment]] = []
    for s in segs:
        if runs and same_content(p, s, runs[-1][0]) and len(s.enter) == len(s.leave) and \
                math.prod(p.sizes[v] for v in s.enter) <= SQUARE_LIMIT:
            runs[-1].append(s)
        else:
            runs.append([s])
    planned = [plan_segment(p, run[0]) for run in runs]
    if max(pl[2] for pl in planned) > TABLE_LIMIT:
        raise TooWide(max(pl[2] for pl in planned))
    if progress:
        progress.total(len(runs) + sum(2 * len(r).bit_length() for r in runs if len(r) > 1))
    steps = []  # (vector before, matrix, transfer, powers or None, run)
    vec = np.zeros(1)
    for run, pl in zip(runs, planned):
        t = transfer(p, run[0], pl)
        if progress:
            progress.advance()
        powers = None
        if len(run) > 1:
            powers = Powers(t.matrix, progress.advance if progress else None)
            mat = powers.get(len(run))
        else:
            mat = t.matrix
        steps.append((vec, mat, t, powers, run))
        vec = minplus(vec[None, :], mat)[0]
    if not np.isfinite(vec[0]):
        raise NoFeasiblePlan("every assignment uses a forbidden (infinite-cost) pair")
    choice = [0] * n
    b = 0
    for vec, mat, t, powers, run in reversed(steps):
        a = int(np.argmin(vec + mat[:, b]))
        states = [a] + (powers.path(len(run), a, b) if powers else []) + [b]
        for s, x, y in zip(run, states, states[1:]):
            _decode(p, run[0], s, t, x, y, choice)
        b = a
    return choice


def _decode(p: Problem, template: Segment, s: Segment, t, x: int, y: int, choice: list[int]):
    """Write segment ``s``'s options into ``choice`` given its boundary states x and y."""
    assign = state_values(p, template.enter, x)
    assign.update(state_values(p, template.leave, y))
    for v, o in t.elim.decode(assign).items():
        w = s.translate(template, v)
        if s.lo <= w <= s.hi:
            choice[w] = o


def block_order(n: int, repeated) -> list[int] | None:
    """Variable order that makes every hinted block contiguous, or ``None`` if they already are.

    A block moves to the position of its first variable, its variables in the hint's order; the
    others keep their relative order. The chain decomposition is exact for any order (a worse
    order only widens frontiers), so this is safe even when it breaks the topological order.
    """
    owner: dict[int, tuple[int, int]] = {}
    for group in repeated or []:
        for block in group:
            if not block or any(v in owner or not 0 <= v < n for v in block) or \
                    len(set(block)) != len(block):
                continue
            first = min(block)
            owner.update((v, (first, r)) for r, v in enumerate(block))
    order = sorted(range(n), key=lambda v: owner.get(v, (v, -1)))
    return None if order == list(range(n)) else order


def _permuted(p: Problem, order: list[int]) -> Problem:
    """``p`` with variable ``order[i]`` renumbered ``i``."""
    new = {v: i for i, v in enumerate(order)}
    edges = {}
    for (u, v), m in p.edges.items():
        a, b = new[u], new[v]
        edges[(a, b) if a < b else (b, a)] = m if a < b else m.T
    return Problem([p.sizes[v] for v in order], [p.unary[v] for v in order], dict(sorted(edges.items())))


def fold_single_options(p: Problem) -> tuple[Problem, list[int], float]:
    """``(problem over the variables with two or more options, their original indices, constant)``.

    A variable with one option has no choice to make: its cost and its edges' costs at that
    option are folded into its neighbours' unary costs (an edge between two such variables into
    the constant), and it leaves the problem. Without this, every such variable still gave each
    elimination table and frontier state an axis of length 1: MoE layers with one strategy per
    expert operator made tables of 37 axes, past numpy's 32 ("maximum supported dimension for
    an ndarray is 32"). Every assignment of the folded problem costs the original's minus
    ``constant``; the search's answers are unchanged.
    """
    fixed = [s == 1 for s in p.sizes]
    if not any(fixed):
        return p, list(range(len(p.sizes))), 0.0
    free = [v for v, f in enumerate(fixed) if not f]
    new = {v: i for i, v in enumerate(free)}
    unary = [p.unary[v].copy() for v in free]
    constant = sum(float(p.unary[v][0]) for v, f in enumerate(fixed) if f)
    edges = {}
    for (u, v), m in p.edges.items():
        if fixed[u] and fixed[v]:
            constant += float(m[0, 0])
        elif fixed[u]:
            unary[new[v]] += m[0, :]
        elif fixed[v]:
            unary[new[u]] += m[:, 0]
        else:
            edges[(new[u], new[v])] = m
    return Problem([p.sizes[v] for v in free], unary, edges), free, constant


def _solver_form(problem: SearchProblem, repeated, lam: float = 0.0, memory_only: bool = False):
    """``(solver-form problem, order, hint, free, constant)``: single-option variables folded
    away (:func:`fold_single_options`: ``free[i]`` = original index of folded variable ``i``),
    then variables renumbered so that the hinted blocks are contiguous (``order[i]`` = folded
    index of variable ``i``; ``None``: unchanged)."""
    p, free, constant = fold_single_options(to_problem(problem, lam, memory_only))
    if not math.isfinite(constant):   # single-option variables that a forbidden pair joins
        raise NoFeasiblePlan("every assignment uses a forbidden (infinite-cost) pair")
    if len(free) != len(problem.variables):
        where = {v: i for i, v in enumerate(free)}
        repeated = [[[where[v] for v in b if v in where] for b in g] for g in repeated or []]
    order = block_order(len(p.sizes), repeated) if p.sizes else None
    if order is None:
        return p, None, repeated, free, constant
    new = {v: i for i, v in enumerate(order)}
    hint = [[[new[v] for v in b if v in new] for b in g] for g in repeated]
    return _permuted(p, order), order, hint, free, constant


def _unfolded(values: list, free: list[int], n: int, fill) -> list:
    """``values`` of the folded variables placed at their original indices among ``n``, the
    single-option ones given ``fill``."""
    out = [fill] * n
    for i, v in enumerate(free):
        out[v] = values[i]
    return out


def _unpermuted(values: list, order: list[int] | None) -> list:
    if order is None:
        return values
    out = [None] * len(order)
    for i, v in enumerate(order):
        out[v] = values[i]
    return out


def solve_exact(problem: SearchProblem, repeated=None, progress: bool | None = None,
                lam: float = 0.0, memory_only: bool = False) -> list[int]:
    """Unconstrained exact optimum of cost + lam * memory (or of memory alone); see :func:`solve`."""
    p, order, hint, free, _ = _solver_form(problem, repeated, lam, memory_only)
    if not p.sizes:
        return [0] * len(problem.variables)
    return _unfolded(_unpermuted(_solve_problem(p, hint, progress)[0], order), free,
                     len(problem.variables), 0)


def lagrangian_marginals(problem: SearchProblem, lam: float, repeated=None) -> list[np.ndarray]:
    """Min-marginals (:func:`.marginals.min_marginals`) of cost + lam * memory, per variable.

    Raises:
        TooWide: as :func:`solve_chain`."""
    from .marginals import min_marginals

    p, order, hint, free, constant = _solver_form(problem, repeated, lam)
    if not p.sizes:     # one assignment: its total is every marginal
        return [np.full(1, constant) for _ in problem.variables]
    folded = _unpermuted(min_marginals(p, choose_cuts(p, hint), TABLE_LIMIT), order)
    best = min(float(np.min(m)) for m in folded) + constant
    return _unfolded([m + constant for m in folded], free, len(problem.variables),
                     np.full(1, best))


def _reduced(problem: SearchProblem, keep: list[np.ndarray]) -> SearchProblem:
    """``problem`` restricted to the options ``keep[v]`` (sorted indices) of each variable."""
    variables = [Variable(v.name, v.op_ids, [v.keys[i] for i in k], v.cost[k], v.memory[k])
                 for v, k in zip(problem.variables, keep)]
    edges = [Edge(e.u, e.v, e.cost[np.ix_(keep[e.u], keep[e.v])]) for e in problem.edges]
    return SearchProblem(variables, edges)


def improve_fitting(problem: SearchProblem, choice: list[int], memory_limit: float) -> list[int]:
    """A fitting plan at most as costly as ``choice`` (which fits ``memory_limit``): coordinate
    descent, each variable in index order moved to its cheapest option (lowest index on ties)
    given the others, among those that keep the plan within the limit, until no move lowers the
    cost. Deterministic; a tighter upper bound makes reduced-cost fixing remove more."""
    choice = list(choice)
    incident: list[list[Edge]] = [[] for _ in problem.variables]
    for e in problem.edges:
        incident[e.u].append(e)
        incident[e.v].append(e)
    used = problem.memory(choice)
    moved = True
    while moved:
        moved = False
        for vi, var in enumerate(problem.variables):
            local = var.cost.copy()
            for e in incident[vi]:
                local += e.cost[:, choice[e.v]] if e.u == vi else e.cost[choice[e.u], :]
            room = memory_limit - (used - var.memory[choice[vi]])
            j = int(np.argmin(np.where(var.memory <= room, local, np.inf)))
            if local[j] < local[choice[vi]] and var.memory[j] <= room:
                used += var.memory[j] - var.memory[choice[vi]]
                choice[vi] = j
                moved = True
    return choice


def solve_gap(problem: SearchProblem, memory_limit: float, repeated, best: list[int],
              lam: float, bound: float = -math.inf, effort: Effort = UNBOUNDED
              ) -> tuple[list[int], float | None]:
    """Constrained optimum when the Lagrangian leaves a duality gap: ``(choice, lower bound)``,
    the bound ``None`` when ``choice`` is proven optimal.

    ``best``: a fitting plan (the upper bound, first lowered by :func:`improve_fitting`);
    ``lam``, ``bound``: the multiplier of the best dual bound and that bound. Options that no
    fitting plan cheaper than ``best`` can use are removed by reduced-cost fixing
    (:func:`.memory.prunable` on :func:`lagrangian_marginals`), then the integer program
    (:func:`.ilp.solve_ilp`) solves what is left within ``effort``; ``best`` is kept unless the
    program finds a strictly cheaper plan. Exact when the program finishes: every fitting plan of
    cost <= ``problem.total(best)`` survives the fixing, so the optimum is the cheaper of ``best``
    and the program's optimum. Stopped by ``effort``, the lower bound is the larger of the
    Lagrangian ``bound`` and min(upper, the program's dual bound), by the same argument.
    """
    from .ilp import WorkLimitReached, solve_ilp
    from .memory import prunable

    better = improve_fitting(problem, best, memory_limit)
    if problem.total(better) < problem.total(best) and problem.memory(better) <= memory_limit:
        best = better
    upper = problem.total(best)
    try:
        marginals = lagrangian_marginals(problem, lam, repeated)
    except TooWide:        # too wide for elimination: the integer program over everything
        marginals = [np.full(len(v.keys), -np.inf) for v in problem.variables]
    drop = prunable(marginals, lam, memory_limit, upper)
    keep = []
    for v, mask in enumerate(drop):
        mask = mask.copy()
        mask[best[v]] = False          # never drop the incumbent (rounding safety)
        keep.append(np.flatnonzero(~mask))
    try:
        ilp = solve_ilp(_reduced(problem, keep), memory_limit, effort)
    except WorkLimitReached as stopped:
        return best, max(bound, min(upper, stopped.bound))
    choice = [int(k[i]) for k, i in zip(keep, ilp.choice)]
    if problem.total(choice) < upper:
        best, upper = choice, problem.total(choice)
    if ilp.bound is None:
        return best, None
    return best, max(bound, min(upper, ilp.bound))


def _eliminated(p: Problem) -> list[int]:
    """Exact optimum of ``p`` by the chain of segments, no hint (raises :class:`TooWide`)."""
    fronts = frontiers(len(p.sizes), p.edges)
    return solve_chain(p, choose_cuts(p, None, fronts), None, fronts)


def _solve_problem(p: Problem, repeated, progress, effort: Effort = UNBOUNDED
                   ) -> tuple[list[int], float | None]:
    """``(choice, bound)``: chain of segments (exact, ``bound`` ``None``); when a segment is too
    wide to eliminate, :func:`.wide.solve_wide` within ``effort`` (``bound``: a proven lower
    bound unless it proved its plan optimal)."""
    with LazyProgress(progress, "planning") as bar:
        try:
            fronts = frontiers(len(p.sizes), p.edges)
            return solve_chain(p, choose_cuts(p, repeated, fronts), bar, fronts), None
        except TooWide:
            from .wide import solve_wide
            return solve_wide(p, effort, exact=_eliminated)


def _solve_bounded(problem: SearchProblem, repeated, progress, effort: Effort,
                   memory_only: bool = False) -> tuple[list[int], float | None]:
    """:func:`solve_exact` within ``effort``: ``(choice, lower bound or None when exact)``."""
    p, order, hint, free, constant = _solver_form(problem, repeated, 0.0, memory_only)
    n = len(problem.variables)
    if not p.sizes:
        return [0] * n, None
    choice, bound = _solve_problem(p, hint, progress, effort)
    # the folded problem's objective lacks the single-option variables' constant
    return (_unfolded(_unpermuted(choice, order), free, n, 0),
            None if bound is None else bound + constant)


def solve(problem: SearchProblem, memory_limit: float | None = None, *,
          repeated: list[list[list[int]]] | None = None, progress: bool | None = None,
          effort: Effort = Effort()) -> Solution:
    """Exact minimum of Σ option costs + Σ edge costs, with Σ option memory <= ``memory_limit``.

    Method (:mod:`.chain`): the variables (topological order) are cut into a chain of segments at
    small frontiers; each segment's min-plus transfer matrix is solved exactly by variable
    elimination; the chain is their min-plus product, associative by the Third Homomorphism
    Theorem (Gibbons 1996; SMSG, Wang et al., IJPP 2023), so runs of identical blocks are raised
    to their length by repeated squaring. Problems whose elimination would need a table over
    :data:`TABLE_LIMIT` entries are solved by the integer program (:mod:`.ilp`) within ``effort``,
    else by a local search with a proven lower bound (:mod:`.wide`). Memory limit:
    :mod:`.memory` (Lagrangian bound with certificate, integer program on a duality gap). The
    usual case, a limit the unconstrained optimum already meets, costs nothing extra; a binding
    limit with a duality gap costs one min-marginal elimination per variable (reduced-cost
    fixing, :func:`solve_gap`) and an integer program over the options that survive it
    (scripts/bench_search.py ``--memory-layers``: 2.5x to 16x faster than the integer program
    over everything on 4 synthetic layers, same optimum).

    Args:
        problem: variables (option costs in seconds, memory in bytes per device) and edges.
        memory_limit: bytes per device; ``None`` for no limit.
        repeated: groups of structurally identical blocks; a block is a list of variable indices
            (contiguous in topological order to be used), corresponding variables in the same
            order. Only a hint: identity is verified numerically, blocks that differ are solved
            separately, so a wrong hint costs time, never correctness.
        progress: show a rich progress bar once planning lasts ~1 s; ``None``: only on a terminal.
        effort: the work the integer program of a duality gap or of a problem too wide to
            eliminate may spend (:mod:`.effort`;
            default :data:`.effort.DEFAULT_SECONDS`, a bound on work, not on wall time, so the
            same on every rank). Stopped by it, the plan is the best found and
            :attr:`Solution.bound` the proven lower bound.
    Returns:
        the :class:`Solution`. Ties are broken by the lowest index (option or boundary state) at
        each back-pointer, a fixed function of the problem: the same problem (edges in any order
        or orientation) always gives the same choice.
    Raises:
        NoFeasiblePlan: nothing fits the limit (the message gives the excess in bytes and GiB and
            the variables dominating the smallest-memory plan), or every plan uses a forbidden pair.
        ValueError: malformed problem (names the variable or edge).
    """
    from .memory import certified, infeasible_message, lagrangian

    choice, wide = _solve_bounded(problem, repeated, progress, effort)
    if memory_limit is None or problem.memory(choice) <= memory_limit:
        return Solution(choice, problem.total(choice), problem.memory(choice), wide)
    smallest, smallest_wide = _solve_bounded(problem, repeated, progress, effort, memory_only=True)
    if problem.memory(smallest) > memory_limit:
        tail = "" if smallest_wide is None else \
            " (the smallest found within the work limit: the problem is too wide to search exactly)"
        raise NoFeasiblePlan(infeasible_message(problem, smallest, memory_limit) + tail)
    if wide is not None:
        # too wide to eliminate, so no exact Lagrangian: the unconstrained bound bounds the
        # constrained optimum too, and the integer program over everything (within effort)
        # starts from the fitting plan
        best, proven = solve_gap(problem, memory_limit, repeated, smallest, 0.0, wide, effort)
        return Solution(best, problem.total(best), problem.memory(best), proven)
    best, bound, lam = lagrangian(problem, memory_limit,
                                  lambda lam: solve_exact(problem, repeated, progress, lam=lam),
                                  choice, smallest)
    proven = None
    if not certified(problem.total(best), bound):
        best, proven = solve_gap(problem, memory_limit, repeated, best, lam, bound, effort)
    return Solution(best, problem.total(best), problem.memory(best), proven)
