"""Over which range of the hardware's bandwidth and latency a plan stays the best of its
candidates (issue #16, item 6): the symbolic ``g`` and ``l`` of the BSP model, used.

Every cost of the search problem is, for one hardware parameter ``θ`` scaled by a factor ``f``
and the others fixed, affine in ``1/f`` (bandwidth: ``bytes / (f·bandwidth)``) or in ``f``
(latency: ``f·latency`` per synchronisation), by :func:`smsg_ms.cost.api.collective_seconds`
and :meth:`smsg_ms.cost.model.CostModel.breakdown` (``w/peak + h/bandwidth + L·latency``). So
the problem priced twice, at the preset (``f = 1``) and with ``θ`` doubled (``f = 2``), gives
each option's and each edge's cost as ``a + b·s(f)`` exactly (``s(f) = 1/f`` or ``f``).

The candidates are the plans the search weighed against the chosen one around it: every
single-variable deviation (one primitive switched to another of its options with finite cost,
the others kept, as the plan's runner-ups). The chosen plan stays the best of them while every
deviation's extra cost ``Δa + Δb·s(f)`` is non-negative: an interval of ``f``, whose ends are
set by the deviation that becomes cheaper beyond each (``None``: no candidate overtakes on that
side).

The parameters are named by :data:`PARAMETERS` and a ``level``: the flat preset has one level
(``None``); a hardware description in levels adds one entry per level by giving
:func:`stays_best` a ``scale(hardware, parameter, level, factor)`` that scales that level only.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

#: hardware parameters scaled, with how a cost depends on the factor ``f``
PARAMETERS = {"bandwidth": lambda f: 1.0 / f, "latency": lambda f: f}


def scale_flat(hardware, parameter: str, level, factor: float):
    """``hardware`` (a :class:`smsg_ms.cost.hardware.Machine`) with ``parameter`` (a link
    figure of :data:`PARAMETERS`) multiplied by ``factor`` on level ``level`` (an index into
    ``hardware.levels``, innermost first), or on every level when ``level`` is ``None``.

    Raises:
        ValueError: a level the machine does not have, or an unknown parameter.
    """
    if parameter not in PARAMETERS:
        raise ValueError(f"unknown hardware parameter {parameter!r}")
    if level is not None and not 0 <= level < len(hardware.levels):
        raise ValueError(f"hardware {hardware.name!r} has no level {level!r}")
    levels = tuple(dataclasses.replace(lv, **{parameter: getattr(lv, parameter) * factor})
                   if level is None or k == level else lv
                   for k, lv in enumerate(hardware.levels))
    return dataclasses.replace(hardware, levels=levels)


def _incident(problem) -> list[list[int]]:
    """Per variable, the indices of the edges touching it (the same in every pricing of one
    problem: the edges do not depend on the hardware)."""
    incident: list[list[int]] = [[] for _ in problem.variables]
    for k, e in enumerate(problem.edges):
        incident[e.u].append(k)
        incident[e.v].append(k)
    return incident


def _local_costs(problem, choice, vi, incident) -> np.ndarray:
    """Cost of each option of variable ``vi`` with every other variable at ``choice``: its own
    cost plus its edges to its neighbours' chosen options (seconds)."""
    local = problem.variables[vi].cost.astype(float).copy()
    for e in incident:
        if e.u == vi:
            local = local + e.cost[:, choice[e.v]]
        else:
            local = local + e.cost[choice[e.u], :]
    return local


def deviation_terms(problems: tuple, choice: list[int], s_values: tuple[float, float]):
    """``[(variable index, option, Δa, Δb)]``: each single-variable deviation's extra cost over
    ``choice`` as ``Δa + Δb·s``, from the same problem priced at ``s = s_values[0]`` and
    ``s = s_values[1]`` (``problems``: two :class:`~smsg_ms.search.problem.SearchProblem` with
    the same variables, options and edges). Infinite (forbidden) options are left out."""
    p0, p1 = problems
    s0, s1 = s_values
    incident = _incident(p0)
    out = []
    for vi, var in enumerate(p0.variables):
        if len(var.keys) < 2:
            continue
        c0 = _local_costs(p0, choice, vi, [p0.edges[k] for k in incident[vi]])
        c1 = _local_costs(p1, choice, vi, [p1.edges[k] for k in incident[vi]])
        d0, d1 = c0 - c0[choice[vi]], c1 - c1[choice[vi]]
        for o in range(len(var.keys)):
            if o == choice[vi] or not (math.isfinite(d0[o]) and math.isfinite(d1[o])):
                continue
            # rounding of two sums of seconds is no dependence on the factor
            noise = 1e-9 * max(abs(c0[o]), abs(c0[choice[vi]]), abs(c1[o]), abs(c1[choice[vi]]))
            slope = 0.0 if abs(d1[o] - d0[o]) <= noise else (d1[o] - d0[o]) / (s1 - s0)
            intercept = d0[o] - slope * s0
            out.append((vi, o, 0.0 if abs(intercept) <= noise else float(intercept),
                        float(slope)))
    return out


def factor_range(terms, s_of, tol: float = 1e-12):
    """The factors ``f > 0`` where every ``Δa + Δb·s_of(f) ≥ 0``, with ``s_of`` monotone
    (``1/f`` or ``f``): ``(low, high, index of the term binding low, index binding high)``,
    ``low = 0`` / ``high = inf`` and the index ``None`` where no term binds. ``tol``: a slope
    below ``tol·|Δa|`` counts as none (the term does not depend on ``f``).

    Derivation: a term with ``Δb > 0`` holds for ``s ≥ −Δa/Δb``, one with ``Δb < 0`` for
    ``s ≤ Δa/(−Δb)``; ``s = 1/f`` turns a bound on ``s`` into the opposite bound on ``f``.
    """
    increasing = s_of(2.0) > s_of(1.0)
    low, high, low_by, high_by = 0.0, math.inf, None, None
    for k, (a, b, *_rest) in enumerate(terms):
        if abs(b) <= tol * max(abs(a), 1e-300):
            continue
        s_star = -a / b
        if s_star <= 0:
            continue                       # holds (or fails) for every f > 0: no end
        f_star = s_star if increasing else 1.0 / s_star
        # which side of f_star the term holds on
        holds_above_s = b > 0              # s >= s_star
        holds_above_f = holds_above_s == increasing
        if holds_above_f:
            if f_star > low:
                low, low_by = f_star, k
        elif f_star < high:
            high, high_by = f_star, k
    return low, high, low_by, high_by


def stays_best(graph, devices: int, hardware, choice: list[int], *, build,
               scale=scale_flat, levels=(None,)) -> list[dict]:
    """For each parameter of :data:`PARAMETERS` and each level: the factor range over which
    ``choice`` stays the cheapest of its single-variable deviations, and which deviation takes
    over beyond each end.

    ``build(hardware) -> (SearchProblem, variables)`` prices the problem of ``graph`` on
    ``devices`` under a hardware (the same variables and options each time, as
    :func:`smsg_ms.planner.build_problem` of a :class:`~smsg_ms.cost.model.CostModel` gives);
    ``scale``: see :func:`scale_flat`.

    Returns ``[{"parameter", "level", "low", "high", "below", "above"}]`` with ``low``/``high``
    factors of the preset (``0.0`` / ``inf`` when nothing overtakes on that side) and
    ``below``/``above`` ``{"variable", "strategy", "out_strategy", "chosen_strategy",
    "chosen_out_strategy"}`` of the deviation that takes over beyond that end (``None`` when
    none does): its option's in_strategy and out_strategy (``None`` without one), and those of
    the variable's chosen option, which may share the in_strategy (a MatMul's out_strategy
    twin, :func:`~smsg_ms.planner.variables.option_key`).
    """
    base, variables = build(hardware)
    out = []
    for parameter, s_of in PARAMETERS.items():
        for level in levels:
            def priced(f, parameter=parameter, level=level):
                return build(scale(hardware, parameter, level, f))[0]

            doubled = priced(2.0)
            terms = deviation_terms((base, doubled), choice, (s_of(1.0), s_of(2.0)))
            low, high, _, _ = factor_range([(a, b) for _, _, a, b in terms], s_of)
            low, below = refine_end(priced, choice, low, upward=False)
            high, above = refine_end(priced, choice, high, upward=True)

            def who(dev):
                if dev is None:
                    return None
                vi, o = dev
                var = base.variables[vi]
                strategy, out = _key_parts(var.keys[o])
                chosen, chosen_out = _key_parts(var.keys[choice[vi]])
                return {"variable": var.name, "strategy": strategy, "out_strategy": out,
                        "chosen_strategy": chosen, "chosen_out_strategy": chosen_out}

            out.append({"parameter": parameter, "level": level, "low": low, "high": high,
                        "below": who(below), "above": who(above)})
    return out


def cheapest_deviation(problem, choice: list[int]):
    """``(variable index, option)`` of the single-variable deviation cheaper than ``choice``
    by the most (relative margin 1e-9), or ``None`` when ``choice`` is the cheapest of them."""
    incident = _incident(problem)
    best, gain = None, 0.0
    for vi, var in enumerate(problem.variables):
        if len(var.keys) < 2:
            continue
        local = _local_costs(problem, choice, vi, [problem.edges[k] for k in incident[vi]])
        here = local[choice[vi]]
        for o in np.argsort(local, kind="stable")[:1]:
            d = here - local[o]
            if o != choice[vi] and d > 1e-9 * max(abs(here), 1e-300) and d > gain:
                best, gain = (vi, int(o)), d
    return best


#: bisection steps of :func:`refine_end` (factor precision ``2^(range/2^STEPS)``)
STEPS = 14
#: the factors searched: ``[1/LIMIT, LIMIT]``
LIMIT = 1e6


def refine_end(priced, choice: list[int], estimate: float, *, upward: bool):
    """The end of the factor range on one side of 1, found by pricing the problem afresh.

    ``estimate`` (from the affine terms of :func:`deviation_terms`) is exact where every cost is
    affine in the factor; the overlap of gradient synchronisation with the backward pass
    (``max(0, sync − backward)``) and hierarchical collectives make some costs only piecewise
    affine, so the end is bracketed around ``estimate`` and bisected in ``log f``
    (:data:`STEPS` steps). Returns ``(end, (variable, option) taking over beyond it)``, or
    ``(inf or 0, None)`` when nothing overtakes up to :data:`LIMIT`.
    """
    outer = LIMIT if upward else 1.0 / LIMIT
    start = estimate if 0 < estimate < math.inf else outer
    start = min(max(start, 1.0 / LIMIT), LIMIT)
    good, bad, dev = 1.0, None, None
    probe = start * (1.02 if upward else 0.98)
    while True:
        d = cheapest_deviation(priced(probe), choice)
        if d is not None:
            bad, dev = probe, d
            break
        good = probe
        if probe == outer:
            return (math.inf if upward else 0.0), None
        probe = min(probe * 8, outer) if upward else max(probe / 8, outer)
    for _ in range(STEPS):
        mid = math.sqrt(good * bad)
        d = cheapest_deviation(priced(mid), choice)
        if d is None:
            good = mid
        else:
            bad, dev = mid, d
    return math.sqrt(good * bad), dev


def reproduce(plan, what: str = "the range where a plan stays best",
              see: str = "where it stays best"):
    """The search problem of a single-stage :class:`~smsg_ms.plan.Plan` read from a file, solved
    again: ``(graph, hardware, build, problem, variables, choice)`` where ``build(hardware)``
    prices the problem under a hardware and ``choice`` (option per variable) gives the plan's
    strategies. The network is captured again with the plan's options, the problem rebuilt under
    the plan's hardware preset with the options every device used first (the planner's
    default), then those that leave devices idle (``exhaustive``). A ``--pipeline auto`` plan
    that chose one stage is a single-stage plan: its strategies are those of its stage plan on
    all ``plan.devices`` devices at its micro-batch size (:meth:`~smsg_ms.plan.Plan.build_options`).

    Raises:
        ValueError: a plan of two or more pipeline stages, or a plan the search does not
            reproduce (made by another version of the cost model, or under a memory limit:
            re-plan it); ``what`` and ``see`` name the computation in the messages.
        smsg_ms.graph.capture.CaptureError: the network cannot be captured here.
    """
    from ..cost.hardware import get_hardware
    from ..cost.model import CostModel
    from ..graph.capture import capture_network
    from ..search import solve
    from .problem import build_problem

    if plan.pipeline and int(plan.pipeline.get("stages", 1)) > 1:
        raise ValueError(f"{what} is computed for single-stage plans only (this plan is "
                         "pipelined): plan the network without --pipeline to see it")
    graph = capture_network(plan.network, world=plan.built_for, **plan.build_options())
    hardware = get_hardware(plan.hardware)
    wanted = {name: ([list(s) for s in strategy], plan.out_strategies.get(name))
              for name, strategy in plan.strategies.items()}
    for fully in (True, False):
        def build(hw, fully=fully):
            return build_problem(graph, CostModel(graph, plan.devices, hw,
                                                  fully_use_devices=fully))

        problem, variables = build(hardware)
        choice = [int(c) for c in solve(problem, progress=False).choice]
        got = {var.name: ([list(s) for s in var.options[choice[vi]][0].strategy],
                          _out(var.options[choice[vi]][0]))
               for vi, var in enumerate(variables) if var.written_back}
        if got == wanted:
            return graph, hardware, build, problem, variables, choice
    raise ValueError("the search does not reproduce this plan's strategies under the cost model "
                     "here (another smsg-ms version, or a memory limit): re-plan it to see "
                     f"{see}")


def plan_stays_best(plan) -> list[dict]:
    """:func:`stays_best` of a single-stage :class:`~smsg_ms.plan.Plan` read from a file, its
    problem and choice found again by :func:`reproduce` (the planner is deterministic).

    Raises:
        ValueError: a plan of two or more pipeline stages, or a plan the search does not reproduce (made by another
            version of the cost model, or under a memory limit: re-plan it).
        smsg_ms.graph.capture.CaptureError: the network cannot be captured here.
    """
    graph, hardware, build, _, _, choice = reproduce(plan)
    ranges = stays_best(graph, plan.devices, hardware, choice, build=build,
                        levels=(None, *range(len(hardware.levels))))
    for r in ranges:
        r["level_name"] = ("every level" if r["level"] is None
                           else hardware.levels[r["level"]].name)
    return ranges


def _key_parts(key) -> tuple:
    """``(in_strategy, out_strategy or None)`` as lists of an option's key
    (:func:`~smsg_ms.planner.variables.option_key`: the in_strategy's cuts, then ``("out",
    *out_strategy)`` for an option that sets one); a key that is not a tuple as it is."""
    if not isinstance(key, tuple):
        return key, None
    parts = [list(x) for x in key]
    if parts and parts[-1][:1] == ["out"]:
        return parts[:-1], [list(x) for x in parts[-1][1:]]
    return parts, None


def _out(cost) -> list | None:
    """An option's out_strategy as the plan file holds it (``None`` without one)."""
    return [list(x) for x in cost.out_strategy] if cost.out_strategy else None


__all__ = ["PARAMETERS", "deviation_terms", "factor_range", "plan_stays_best", "reproduce",
           "scale_flat", "stays_best"]
