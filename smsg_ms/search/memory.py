"""The memory limit: Lagrangian relaxation with a duality certificate, integer program otherwise.

With ``c(x)`` the cost and ``m(x)`` the memory (bytes per device) of a plan and ``M`` the limit,
``g(λ) = min_x c(x) + λ (m(x) - M)`` is a lower bound on the constrained optimum for every
``λ >= 0`` (weak duality). ``g`` is concave and piecewise linear; its maximum is found exactly by
the cutting-plane (Kelley) iteration between an over-limit plan A and a fitting plan B:
``λ = (c(B) - c(A)) / (m(A) - m(B))``; each unconstrained solve either returns a new plan (which
replaces A or B) or proves ``λ`` optimal. If the best fitting plan's cost equals the bound, it is the
exact constrained optimum. Otherwise (a duality gap, possible with discrete choices) reduced-cost
fixing (:func:`prunable`) removes every option that no plan cheaper than the best fitting one can
use, and the integer program of :mod:`.ilp` with the memory row decides on what is left.
"""
from __future__ import annotations

import math

import numpy as np

from .problem import NoFeasiblePlan, SearchProblem

GIB = 2.0 ** 30
#: relative tolerance for the duality certificate
REL_TOL = 1e-9


def infeasible_message(problem: SearchProblem, choice: list[int], limit: float, top: int = 5) -> str:
    """One line: by how much the smallest-memory plan exceeds ``limit`` and who dominates it."""
    need = problem.memory(choice)
    over = need - limit
    per = sorted(((float(v.memory[c]), i) for i, (v, c) in enumerate(zip(problem.variables, choice))),
                 key=lambda t: (-t[0], t[1]))[:top]
    big = ", ".join(f"{problem.variables[i].name} {m / GIB:.3f} GiB" for m, i in per)
    return (f"no plan fits in {limit:.0f} bytes ({limit / GIB:.3f} GiB) per device: the smallest-memory "
            f"plan needs {need:.0f} bytes ({need / GIB:.3f} GiB), {over:.0f} bytes ({over / GIB:.3f} GiB) "
            f"over; largest: {big}")


def lagrangian(problem: SearchProblem, limit: float, solve_at, over: list[int], fit: list[int],
               max_iter: int = 200):
    """Best fitting plan found and the dual bound; ``solve_at(λ)`` minimises c + λ m exactly.

    Args:
        over: a plan with memory > limit minimising c (λ = 0).
        fit: a plan with memory <= limit (e.g. the smallest-memory plan).
    Returns:
        ``(best fitting plan, lower bound on the constrained optimum, the λ giving that bound)``.
    """
    def cm(x):
        return problem.total(x), problem.memory(x)

    a, b = over, fit
    (ca, ma), (cb, mb) = cm(a), cm(b)
    best, best_c = b, cb
    bound, bound_lam = ca, 0.0
    for _ in range(max_iter):
        if ma <= mb:
            break
        lam = max((cb - ca) / (ma - mb), 0.0)
        x = solve_at(lam)
        cx, mx = cm(x)
        line = ca + lam * ma
        if cx + lam * (mx - limit) > bound:
            bound, bound_lam = cx + lam * (mx - limit), lam
        if cx + lam * mx >= line - REL_TOL * max(1.0, abs(line)):
            break
        if mx > limit:
            a, ca, ma = x, cx, mx
        else:
            b, cb, mb = x, cx, mx
            if cx < best_c:
                best, best_c = x, cx
    return best, bound, bound_lam


def certified(cost: float, bound: float) -> bool:
    """True when ``cost`` equals the lower ``bound`` within :data:`REL_TOL`."""
    return cost <= bound + REL_TOL * max(1.0, abs(bound)) or math.isclose(cost, bound)


def prunable(marginals, lam: float, limit: float, upper: float) -> list[np.ndarray]:
    """Per variable, a mask of the options no fitting plan of cost <= ``upper`` can use.

    ``marginals[v][i]`` = min over plans with ``x_v = i`` of ``c(x) + λ m(x)``
    (:func:`.marginals.min_marginals` at ``λ = lam``). A fitting plan x (``m(x) <= limit``) has
    ``c(x) >= c(x) + λ (m(x) - limit)`` >= its options' marginals minus ``λ limit``, so an option
    whose marginal exceeds ``upper + λ limit`` is in no fitting plan of cost <= ``upper``
    (reduced-cost fixing; e.g. Wolsey, "Integer Programming", 1998, §10.2). A relative margin of
    :data:`REL_TOL` absorbs rounding.
    """
    line = upper + lam * limit
    tol = REL_TOL * max(1.0, abs(upper), abs(lam * limit))
    return [np.asarray(m) > line + tol for m in marginals]


__all__ = ["NoFeasiblePlan", "infeasible_message", "lagrangian", "certified", "prunable"]
