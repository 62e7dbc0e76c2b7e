"""The runner-up configuration of a single-stage plan (issue #17, item 7): the best plan whose
dominant data-parallel degree differs from the chosen one, with its predicted difference.

A single-stage plan's degrees are not one decision of the search: each primitive takes its own
strategy, and ``dp``/``tp`` are read from them afterwards
(:func:`smsg_ms.report.degrees.chosen_degrees`). The runner-up configuration is therefore
found by constraining the search and solving again: for each data-parallel degree ``d`` other
than the chosen ``dp`` that some option offers, every variable with an option whose batch cut
(first input, first axis) is ``d`` may take only such options (the others are priced ``inf``;
variables without one stay free), and the problem is solved exactly. The cheapest of these
constrained optima is the runner-up; ``tp`` is the most common tensor-parallel degree of its
constrained variables' options. Pipelined plans have their own runner-up configuration,
chosen by the pipeline search (:class:`smsg_ms.planner.pipelined.PipelineRecord`).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np


def option_degrees(strategy) -> tuple[int, int] | None:
    """``(dp, tp)`` of one option's in_strategy: ``dp`` the cut of the first input's first axis,
    ``tp`` the largest product of one input's cuts divided by ``dp`` (at least 1); ``None``
    for an option without a strategy (an unshardable operator)."""
    if not strategy or not strategy[0]:
        return None
    dp = int(strategy[0][0])
    used = max(math.prod(int(c) for c in s) for s in strategy)
    return dp, max(1, used // max(dp, 1))


def constrained(problem, allowed: list[np.ndarray | None]):
    """``problem`` with variable ``vi``'s options outside ``allowed[vi]`` (a boolean mask;
    ``None``: all allowed) priced ``inf`` (a new :class:`~smsg_ms.search.SearchProblem`; the
    edges are shared)."""
    variables = []
    for var, mask in zip(problem.variables, allowed):
        if mask is None:
            variables.append(var)
        else:
            variables.append(replace(var, cost=np.where(mask, var.cost, np.inf)))
    return replace(problem, variables=variables)


def runner_up_configuration(problem, degrees: list[list], choice: list[int],
                            chosen_dp: int) -> dict | None:
    """The runner-up configuration of ``choice`` (option per variable of ``problem``, the
    search's optimum): ``{"dp", "tp", "search_seconds", "difference_seconds"}`` with
    ``search_seconds`` the constrained optimum's total (the search's objective, seconds) and
    ``difference_seconds`` its excess over ``choice``'s total (``≥ 0`` when ``choice`` is
    optimal); ``None`` when no other data-parallel degree is feasible.

    ``degrees[vi][o]``: :func:`option_degrees` of option ``o`` of variable ``vi``. Ties between
    degrees go to the smaller ``dp``. No memory limit (as the reproduced plan is solved)."""
    from ..search import NoFeasiblePlan, solve

    base = problem.total(choice)
    cuts = sorted({d[0] for row in degrees for d in row if d is not None} - {int(chosen_dp)})
    best = None
    for cut in cuts:
        allowed = []
        for row in degrees:
            mask = np.array([d is not None and d[0] == cut for d in row])
            allowed.append(mask if mask.any() else None)
        try:
            got = [int(c) for c in solve(constrained(problem, allowed), progress=False).choice]
        except NoFeasiblePlan:
            continue
        total = problem.total(got)
        if not math.isfinite(total):
            continue
        if best is None or total < best[1]:
            tps = [degrees[vi][o][1] for vi, o in enumerate(got) if allowed[vi] is not None]
            counts = Counter(tps)
            tp = max(counts, key=lambda t: (counts[t], -tps.index(t))) if tps else 1
            best = (cut, total, tp)
    if best is None:
        return None
    cut, total, tp = best
    return {"dp": cut, "tp": tp, "search_seconds": total, "difference_seconds": total - base}


def plan_runner_up(plan, chosen_dp: int) -> dict | None:
    """:func:`runner_up_configuration` of a single-stage :class:`~smsg_ms.plan.Plan` read from a
    file (problem and choice found again by :func:`.stays_best.reproduce`) whose data-parallel
    degree is ``chosen_dp`` (``explain`` passes
    :func:`smsg_ms.report.degrees.chosen_degrees`'s ``dp``), with ``step_seconds``: the plan's
    predicted step plus the difference.

    Raises:
        ValueError: a pipelined plan, or one the search does not reproduce (re-plan it).
        smsg_ms.graph.capture.CaptureError: the network cannot be captured here.
    """
    from .stays_best import reproduce

    _, _, _, problem, variables, choice = reproduce(
        plan, what="the runner-up configuration of a plan",
        see="its runner-up configuration")
    degrees = [[option_degrees(opt[0].strategy) for opt in var.options] for var in variables]
    out = runner_up_configuration(problem, degrees, choice, int(chosen_dp))
    if out is not None:
        step = (plan.totals or {}).get("step_seconds")
        out["step_seconds"] = (None if not isinstance(step, (int, float))
                               else float(step) + out["difference_seconds"])
    return out


__all__ = ["constrained", "option_degrees", "plan_runner_up", "runner_up_configuration"]
