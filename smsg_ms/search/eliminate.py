"""Exact min-plus variable elimination (bucket elimination) with back-pointers.

A *factor* is a table of costs over a sorted tuple of variables (its scope), one axis per variable
in scope order. Eliminating a variable ``v`` adds every factor that mentions ``v`` and takes the
minimum over ``v``'s axis; the ``argmin`` table (lowest option index on ties, numpy's rule) is kept
so the optimal assignment can be read back in reverse elimination order (Dechter, "Bucket
elimination: a unifying framework for reasoning", AIJ 113, 1999). The work is exponential only in
the width of the elimination order, which is chosen greedily (smallest new table, then fewest
fill edges, then lowest variable index: a fixed function of the problem, hence deterministic).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Factor:
    """Costs over ``scope`` (sorted variable indices); ``table.shape`` = option counts in order."""

    scope: tuple[int, ...]
    table: np.ndarray


def expand(f: Factor, scope: tuple[int, ...], sizes) -> np.ndarray:
    """``f.table`` viewed with size-1 axes for the variables of ``scope`` (sorted) it lacks."""
    mine = set(f.scope)
    return f.table.reshape([sizes[v] if v in mine else 1 for v in scope])


def add_factors(factors: list[Factor], scope: tuple[int, ...], sizes, last: int | None = None
                ) -> np.ndarray:
    """Sum of ``factors`` as a full table over ``scope`` (which contains all their scopes).

    ``last``: a variable of ``scope`` whose axis is moved to the end (the others keep their
    order), so that a reduction over it runs along contiguous memory."""
    move = scope.index(last) if last is not None else None
    shape = [sizes[v] for v in scope]
    if move is not None:
        shape.append(shape.pop(move))
    out = np.zeros(shape)
    for f in factors:
        x = expand(f, scope, sizes)
        np.add(out, x if move is None else np.moveaxis(x, move, -1), out=out)   # same sums
    return out


def elimination_order(neighbours: dict[int, set[int]], eliminate: set[int], sizes
                      ) -> tuple[list[int], int]:
    """Greedy order for ``eliminate`` on the interaction graph ``neighbours`` (not modified).

    Score of a vertex: (entries of the table its elimination creates, fill edges added, index).
    Returns the order and the largest table (entries) any step builds.
    """
    adj = {v: set(n) for v, n in neighbours.items()}

    def score(v):
        nb = adj[v]
        size = math.prod(sizes[u] for u in nb) * sizes[v]
        nbl = sorted(nb)
        fill = sum(1 for i, a in enumerate(nbl) for b in nbl[i + 1:] if b not in adj[a])
        return (size, fill, v)

    heap = [score(v) for v in sorted(eliminate)]
    heapq.heapify(heap)
    current = {s[2]: s for s in heap}
    order, widest = [], 1
    while heap:
        s = heapq.heappop(heap)
        v = s[2]
        if v not in current or current[v] != s:
            continue
        del current[v]
        order.append(v)
        widest = max(widest, s[0])
        nb = adj.pop(v)
        touched = set(nb)
        for a in nb:
            adj[a].discard(v)
            adj[a] |= nb - {a}
            touched |= adj[a]
        for u in sorted(touched):
            if u in current:
                current[u] = score(u)
                heapq.heappush(heap, current[u])
    return order, widest


@dataclass
class Elimination:
    """Result of eliminating all but ``kept``: a table over ``kept`` and the back-pointers."""

    kept: tuple[int, ...]
    table: np.ndarray
    steps: list[tuple[int, tuple[int, ...], np.ndarray]] = field(default_factory=list)

    def decode(self, assignment: dict[int, int]) -> dict[int, int]:
        """Fill ``assignment`` (which holds the kept variables) with the eliminated ones."""
        for v, scope, arg in reversed(self.steps):
            assignment[v] = int(arg[tuple(assignment[u] for u in scope)])
        return assignment


def eliminate(factors: list[Factor], kept, sizes, order: list[int] | None = None,
              neighbours: dict[int, set[int]] | None = None) -> Elimination:
    """Eliminate every variable in the factors' scopes except ``kept`` (min-plus).

    Args:
        factors: cost tables (seconds or any additive unit; ``inf`` forbids an entry).
        kept: variables left in the result table (sorted in it).
        sizes: option count per variable (mapping or sequence).
        order: elimination order (default: :func:`elimination_order`).
    Returns:
        the :class:`Elimination`; ``table`` is the minimum total over the eliminated variables
        for each assignment of ``kept``.
    """
    kept = tuple(sorted(kept))
    if order is None:
        if neighbours is None:
            neighbours = interaction_graph(factors, kept)
        order, _ = elimination_order(neighbours, set(neighbours) - set(kept), sizes)
    buckets: dict[int, list[Factor]] = {}
    pos = {v: i for i, v in enumerate(order)}
    rest: list[Factor] = []

    def place(f: Factor):
        inner = [v for v in f.scope if v in pos]
        if inner:
            buckets.setdefault(min(inner, key=pos.__getitem__), []).append(f)
        else:
            rest.append(f)

    for f in factors:
        place(f)
    steps = []
    for v in order:
        bucket = buckets.pop(v, [])
        scope = tuple(sorted(set().union(*[f.scope for f in bucket]) | {v}))
        new_scope = tuple(u for u in scope if u != v)
        if math.prod(sizes[u] for u in new_scope) >= SLICE_FROM:
            low, arg = _min_by_slices(bucket, v, new_scope, sizes)
        else:
            table = add_factors(bucket, scope, sizes, last=v)   # v's axis last: contiguous
            arg = np.argmin(table, axis=-1)
            # the entries argmin picked are the minima (NaN-free tables): no second pass
            low = np.take_along_axis(table, arg[..., None], -1)[..., 0]
        steps.append((v, new_scope, arg))
        place(Factor(new_scope, low))
    return Elimination(kept, add_factors(rest, kept, sizes), steps)


#: eliminate by slices (one option of the variable at a time) once the result has this many
#: entries: the full table would not stay in cache
SLICE_FROM = 4096


def _min_by_slices(bucket: list[Factor], v: int, new_scope: tuple[int, ...], sizes):
    """Minimum and argmin over ``v`` of the sum of ``bucket``, one option of ``v`` at a time.

    Same numbers as building the table: each entry is summed in bucket order from 0.0, and a
    later option replaces the best only when strictly smaller (numpy's argmin keeps the first
    minimum)."""
    shape = [sizes[u] for u in new_scope]
    best = np.full(shape, np.inf)
    arg = np.zeros(shape, dtype=np.intp)
    parts = []
    for f in bucket:
        if v in f.scope:
            rest = tuple(u for u in f.scope if u != v)
            parts.append((f.table, f.scope.index(v),
                          [sizes[u] if u in rest else 1 for u in new_scope]))
        else:
            parts.append((expand(f, new_scope, sizes), None, None))
    entry = np.empty(shape)
    for k in range(sizes[v]):
        entry.fill(0.0)
        for table, axis, view in parts:
            np.add(entry, table if axis is None else table.take(k, axis=axis).reshape(view),
                   out=entry)
        better = entry < best
        np.copyto(best, entry, where=better)
        arg[better] = k
    return best, arg


def interaction_graph(factors: list[Factor], extra=()) -> dict[int, set[int]]:
    """Variables sharing a factor are neighbours; every variable in a scope or ``extra`` is a key."""
    adj: dict[int, set[int]] = {v: set() for v in extra}
    for f in factors:
        for v in f.scope:
            adj.setdefault(v, set()).update(u for u in f.scope if u != v)
    return adj
