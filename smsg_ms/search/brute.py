"""Exhaustive search, the oracle for tiny problems."""
from __future__ import annotations

import itertools
import math

from .problem import NoFeasiblePlan, SearchProblem, Solution, validate


def solve_brute_force(problem: SearchProblem, memory_limit: float | None = None,
                      max_plans: int = 2_000_000) -> Solution:
    """Try every assignment (``itertools.product`` in lexicographic order).

    Returns the lexicographically first assignment of minimum total cost (seconds) among those
    whose memory (bytes per device) is at most ``memory_limit``.

    Raises:
        ValueError: more than ``max_plans`` assignments.
        NoFeasiblePlan: no assignment has finite cost within the limit.
    """
    validate(problem)
    count = math.prod(len(v.keys) for v in problem.variables)
    if count > max_plans:
        raise ValueError(f"brute force over {count} assignments exceeds max_plans={max_plans}")
    best, best_cost = None, math.inf
    for choice in itertools.product(*[range(len(v.keys)) for v in problem.variables]):
        if memory_limit is not None and problem.memory(list(choice)) > memory_limit:
            continue
        c = problem.total(list(choice))
        if c < best_cost:
            best, best_cost = list(choice), c
    if best is None:
        raise NoFeasiblePlan("no assignment has finite cost within the memory limit")
    return Solution(best, best_cost, problem.memory(best))
