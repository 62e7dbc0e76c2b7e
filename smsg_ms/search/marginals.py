"""Min-marginals of a chain problem: for every variable ``v`` and option ``i``, the cheapest total
cost of an assignment with ``x_v = i``.

Along the chain of segments (:mod:`.chain`), ``F_s`` (cheapest cost of everything before segment
``s``, per entering state) and ``B_s`` (cheapest cost of everything after it, per leaving state)
are the min-plus folds of the transfer matrices from the left and from the right (forward-backward
in the min-plus semiring). ``v``'s min-marginal is then the elimination of every other variable
from the factors of ``v``'s segment plus ``F_s`` on its entering frontier and ``B_s`` on its
leaving one: those two vectors summarise the rest of the chain exactly. Identical consecutive
segments share their transfer matrix; each variable costs one elimination of its segment.
"""
from __future__ import annotations

import math

import numpy as np

from .chain import (Problem, Segment, TooWide, frontiers, minplus, plan_segment, same_content,
                    segment_factors, transfer)
from .eliminate import Factor, eliminate


def min_marginals(p: Problem, cuts: list[int], table_limit: float = math.inf
                  ) -> list[np.ndarray]:
    """``out[v][i]`` = min over assignments with ``x_v = i`` of the total cost of ``p``.

    Exact for any ``cuts`` (positions after which the chain is cut, as in
    :func:`.solve.solve_chain`). Work: one transfer matrix per distinct run of identical segments
    (:func:`.chain.same_content`), one elimination per variable. ``inf`` where no assignment with
    ``x_v = i`` has a finite cost.

    Raises:
        TooWide: a segment's elimination needs a table over ``table_limit`` entries.
    """

    n = len(p.sizes)
    fronts = frontiers(n, p.edges)
    bounds = [-1] + sorted(set(cuts)) + [n - 1]
    segs = [Segment(a + 1, b, fronts[a + 1], fronts[b + 1]) for a, b in zip(bounds, bounds[1:])]
    template = []          # index of the first segment of the same content
    for k, s in enumerate(segs):
        prev = template[k - 1] if k else None
        template.append(prev if prev is not None and len(s.enter) == len(s.leave) and
                        same_content(p, s, segs[prev]) else k)
    mats: dict[int, np.ndarray] = {}
    for k in sorted(set(template)):
        planned = plan_segment(p, segs[k])
        if planned[2] > table_limit:
            raise TooWide(planned[2])
        mats[k] = transfer(p, segs[k], planned).matrix
    fwd = [np.zeros(1)]
    for k in range(len(segs)):
        fwd.append(minplus(fwd[-1][None, :], mats[template[k]])[0])
    bwd = [np.zeros(1)]
    for k in reversed(range(len(segs))):
        bwd.append(minplus(mats[template[k]], bwd[-1][:, None])[:, 0])
    bwd.reverse()          # bwd[k] = cost after segment k - 1, per its leaving state
    out: list[np.ndarray] = [None] * n   # type: ignore[list-item]
    for k, s in enumerate(segs):
        factors = segment_factors(p, s)
        # an empty frontier has one state: its vector is a constant (a factor of empty scope)
        for front, vec in ((s.enter, fwd[k]), (s.leave, bwd[k + 1])):
            factors.append(Factor(front, vec.reshape([p.sizes[v] for v in front])))
        for v in range(s.lo, s.hi + 1):
            out[v] = eliminate(factors, (v,), p.sizes).table
    return out
