"""Chain of segments: min-plus transfer matrices, their associative product, repeated squaring.

Variables are in topological order. The *frontier* after position ``k`` is the set of variables
``u <= k`` with an edge to some ``v > k``: every dependency crossing the cut goes through it (for a
transformer, the residual-stream tensor between layers, plus anything shared by all layers). Cutting
at positions ``k_1 < k_2 < ...`` gives segments ``(k_{s-1}, k_s]``; the *state* of a cut is the joint
option of its frontier (variables sorted by index, C order). Segment ``s`` has the transfer matrix
``T_s[a, b]`` = cheapest cost of its own variables and of the edges ending in it, given entering
state ``a`` and leaving state ``b`` (``inf`` where a variable in both frontiers disagrees), solved
exactly by variable elimination (:mod:`.eliminate`). The optimum is ``(T_1 ⊗ T_2 ⊗ … ⊗ T_k)[0, 0]``
in the min-plus semiring (the first and last frontiers are empty: one state).

Why any bracketing is allowed: the left-to-right dynamic program (fold of ``⊗`` from the left) and
the right-to-left one compute the same function of the segment list, so by the Third Homomorphism
Theorem (Gibbons, "The third homomorphism theorem", JFP 6(4), 1996; used for strategy search in
SMSG, Wang et al., IJPP 51:109–127, 2023) it is a list homomorphism with an associative combine,
here the min-plus matrix product. Hence segments are solved independently and a run of ``L``
identical segments costs ``T^L`` by repeated squaring, ``O(log L)`` products.

The argmin is rebuilt from back-pointers: the boundary states are found backwards through the
fold (and through the squaring tree for runs), then each segment's interior is read back from its
elimination tables. Ties are broken by the lowest index (state or option) at every step, a fixed
function of the problem, so the same problem always yields the same choice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .eliminate import Elimination, Factor, eliminate, elimination_order, interaction_graph


class TooWide(Exception):
    """Variable elimination of a segment would build a table larger than the caller's limit
    (:data:`smsg_ms.search.solve.TABLE_LIMIT`); here, beside the segments, so that the solver
    and the min-marginals both raise it without importing each other."""


def minplus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Min-plus product ``C[i, j] = min_k a[i, k] + b[k, j]`` (shapes (p, q) x (q, r))."""
    out = np.full((a.shape[0], b.shape[1]), np.inf)
    for k in range(a.shape[1]):
        np.minimum(out, a[:, k, None] + b[None, k, :], out=out)
    return out


def frontiers(n: int, edges) -> list[tuple[int, ...]]:
    """``result[k + 1]`` = frontier after position ``k`` (``k = -1 .. n-1``), sorted."""
    last = list(range(n))
    for u, v in edges:
        last[u] = max(last[u], v)
    out, active = [()], set()
    for k in range(n):
        if last[k] > k:
            active.add(k)
        active = {u for u in active if last[u] > k}
        out.append(tuple(sorted(active)))
    return out


@dataclass
class Problem:
    """The problem as the solver uses it: option count, unary costs and merged edges (u < v)."""

    sizes: list[int]
    unary: list[np.ndarray]
    edges: dict[tuple[int, int], np.ndarray]

    def __post_init__(self):
        self.incoming: list[list[int]] = [[] for _ in self.sizes]
        for u, v in self.edges:
            self.incoming[v].append(u)


@dataclass
class Segment:
    """Positions ``lo..hi`` with entering and leaving frontiers (sorted variable indices)."""

    lo: int
    hi: int
    enter: tuple[int, ...]
    leave: tuple[int, ...]

    def rel(self, v: int):
        """Variable index relative to this segment; far-away variables keep their index."""
        span = self.hi - self.lo + 1
        return (1, v - self.lo) if v >= self.lo - span else (0, v)

    def translate(self, template: "Segment", v: int) -> int:
        """Index in this segment of ``template``'s variable ``v`` (for identical segments)."""
        span = template.hi - template.lo + 1
        return v + self.lo - template.lo if v >= template.lo - span else v


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and the same bytes (NaN-free arrays; -0.0 vs 0.0 only costs a missed reuse)."""
    return a is b or (a.shape == b.shape and a.tobytes() == b.tobytes())


def same_content(p: Problem, s: Segment, t: Segment) -> bool:
    """True when segments ``s`` and ``t`` have identical transfer matrices (relative indexing)."""
    if s.hi - s.lo != t.hi - t.lo or len(s.enter) != len(t.enter) or len(s.leave) != len(t.leave):
        return False
    if [s.rel(v) for v in s.enter] != [t.rel(v) for v in t.enter] or \
            [s.rel(v) for v in s.leave] != [t.rel(v) for v in t.leave]:
        return False
    if [p.sizes[v] for v in s.enter] != [p.sizes[v] for v in t.enter]:
        return False
    for i in range(s.hi - s.lo + 1):
        vs, vt = s.lo + i, t.lo + i
        if not _equal(p.unary[vs], p.unary[vt]):
            return False
        ins, int_ = p.incoming[vs], p.incoming[vt]
        if [s.rel(u) for u in ins] != [t.rel(u) for u in int_]:
            return False
        for us, ut in zip(ins, int_):
            if not _equal(p.edges[(us, vs)], p.edges[(ut, vt)]):
                return False
    return True


@dataclass
class Transfer:
    """A segment's transfer matrix and the elimination that reads back its interior."""

    matrix: np.ndarray
    elim: Elimination
    widest: int


def segment_factors(p: Problem, s: Segment) -> list[Factor]:
    """Unary costs of the segment's variables and the edges ending in it."""
    factors = [Factor((v,), p.unary[v]) for v in range(s.lo, s.hi + 1)]
    for v in range(s.lo, s.hi + 1):
        factors += [Factor((u, v), p.edges[(u, v)]) for u in p.incoming[v]]
    return factors


def plan_segment(p: Problem, s: Segment) -> tuple[list[Factor], list[int], int, tuple]:
    """Factors, elimination order, widest table and kept variables of a segment."""
    factors = segment_factors(p, s)
    kept = tuple(sorted(set(s.enter) | set(s.leave)))
    nb = interaction_graph(factors, kept)
    inner = set(range(s.lo, s.hi + 1)) - set(s.leave)
    order, widest = elimination_order(nb, inner, p.sizes)
    widest = max(widest, math.prod(p.sizes[v] for v in kept))
    return factors, order, widest, kept


def transfer(p: Problem, s: Segment, planned=None) -> Transfer:
    """Exact transfer matrix ``T[a, b]`` of segment ``s`` (shape: enter states x leave states)."""
    factors, order, widest, kept = planned or plan_segment(p, s)
    elim = eliminate(factors, kept, p.sizes, order=order)
    ea = _states(p, s.enter)
    xb = _states(p, s.leave)
    na, nb_ = ea[0].shape[0] if s.enter else 1, xb[0].shape[0] if s.leave else 1
    index, ok = [], np.ones((na, nb_), dtype=bool)
    for v in kept:
        if v in s.enter:
            av = ea[s.enter.index(v)][:, None]
            if v in s.leave:
                ok &= av == xb[s.leave.index(v)][None, :]
            index.append(np.broadcast_to(av, (na, nb_)))
        else:
            index.append(np.broadcast_to(xb[s.leave.index(v)][None, :], (na, nb_)))
    matrix = elim.table[tuple(index)] if kept else np.full((1, 1), float(elim.table))
    matrix = np.where(ok, matrix, np.inf)
    return Transfer(matrix, elim, widest)


def _states(p: Problem, frontier: tuple[int, ...]) -> list[np.ndarray]:
    """Per frontier variable, its option in each joint state (C order)."""
    if not frontier:
        return []
    shape = [p.sizes[v] for v in frontier]
    return [np.asarray(x).ravel() for x in np.unravel_index(np.arange(math.prod(shape)), shape)]


def state_values(p: Problem, frontier: tuple[int, ...], state: int) -> dict[int, int]:
    """Options of the frontier's variables in joint state ``state``."""
    if not frontier:
        return {}
    idx = np.unravel_index(state, [p.sizes[v] for v in frontier])
    return {v: int(i) for v, i in zip(frontier, idx)}


class Powers:
    """``T^n`` in the min-plus semiring by repeated squaring, remembering how each was split."""

    def __init__(self, t: np.ndarray, tick=None):
        self.mats = {1: t}
        self.split: dict[int, tuple[int, int]] = {}
        self.tick = tick

    def get(self, n: int) -> np.ndarray:
        """``T^n`` (n >= 1): ``T^(n/2) ⊗ T^(n/2)`` for even n, ``T^(n-1) ⊗ T`` for odd n."""
        if n not in self.mats:
            a, b = (n // 2, n // 2) if n % 2 == 0 else (n - 1, 1)
            self.mats[n] = minplus(self.get(a), self.get(b))
            self.split[n] = (a, b)
            if self.tick:
                self.tick()
        return self.mats[n]

    def path(self, n: int, x: int, y: int) -> list[int]:
        """Optimal states at the ``n - 1`` inner cuts of ``T^n`` from state x to state y."""
        if n == 1:
            return []
        a, b = self.split[n]
        m = int(np.argmin(self.mats[a][x, :] + self.mats[b][:, y]))
        return self.path(a, x, m) + [m] + self.path(b, m, y)
