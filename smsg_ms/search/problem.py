"""The search problem, free of MindSpore and of the cost model's details.

A problem is a set of *variables* (one per primitive instance, all its calls planned jointly, or
one per operator that cannot be sharded), each with a finite list of *options* (strategies) with a
numeric cost (seconds, or any additive unit) and a memory footprint (bytes per device), and
pairwise *edges* whose matrix ``cost[i][j]`` is the cost of the pair (redistribution between the
producer's option ``i`` and the consumer's option ``j``; ``inf`` forbids the pair, e.g. a shared
parameter whose users disagree on its layout). Total cost = Σ option costs + Σ edge costs.

Variables are numbered in topological order of the operators they stand for, which the chain
decomposition relies on.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Variable:
    """One decision: which option (strategy) a primitive (all its calls) or an operator takes.

    Attributes:
        name: the primitive path, or the operator label.
        op_ids: operators of the graph this variable decides (several for a shared primitive).
        keys: a hashable description of each option (the strategy), sorted: ties are broken by
            the lowest index, so the order of ``keys`` fixes the plan deterministically.
        cost: cost of each option (1-D float array).
        memory: bytes per device of each option (1-D float array).
    """

    name: str
    op_ids: list[int]
    keys: list
    cost: np.ndarray
    memory: np.ndarray

    def __post_init__(self):
        self.cost = np.asarray(self.cost, dtype=float)
        self.memory = np.asarray(self.memory if self.memory is not None else
                                 np.zeros(len(self.keys)), dtype=float)
        if not (len(self.keys) == len(self.cost) == len(self.memory)) or not self.keys:
            raise ValueError(f"variable {self.name}: keys, cost and memory must have the same "
                             "non-zero length")


@dataclass
class Edge:
    """Pair cost between two variables, ``cost[i, j]`` for option i of ``u`` and j of ``v``."""

    u: int
    v: int
    cost: np.ndarray

    def __post_init__(self):
        self.cost = np.asarray(self.cost, dtype=float)


@dataclass
class SearchProblem:
    """Variables (topological order) and edges (any order; ``u != v``)."""

    variables: list[Variable]
    edges: list[Edge] = field(default_factory=list)

    def check(self) -> None:
        """Raise ``ValueError`` on an edge whose matrix does not match its variables' options."""
        for e in self.edges:
            if e.u == e.v:
                raise ValueError(f"self edge on variable {e.u}")
            want = (len(self.variables[e.u].keys), len(self.variables[e.v].keys))
            if e.cost.shape != want:
                raise ValueError(f"edge {e.u}->{e.v}: matrix {e.cost.shape}, expected {want}")

    def total(self, choice: list[int]) -> float:
        """Cost of a full assignment (option index per variable)."""
        total = sum(float(v.cost[c]) for v, c in zip(self.variables, choice))
        total += sum(float(e.cost[choice[e.u], choice[e.v]]) for e in self.edges)
        return total

    def memory(self, choice: list[int]) -> float:
        """Bytes per device of a full assignment (sum of the options' memory)."""
        return float(sum(v.memory[c] for v, c in zip(self.variables, choice)))


@dataclass
class Solution:
    """An assignment and its cost; ``choice[i]`` indexes ``problem.variables[i].keys``.

    ``bound`` is a proven lower bound on the optimal cost when the search stopped at its work
    limit before proving ``choice`` optimal (:class:`smsg_ms.search.effort.Effort`); ``None``
    when ``choice`` is proven optimal."""

    choice: list[int]
    cost: float
    memory: float
    bound: float | None = None

    @property
    def gap(self) -> float:
        """Relative optimality gap ``(cost - bound) / cost`` (0 when proven optimal)."""
        if self.bound is None or self.cost <= 0:
            return 0.0
        return max(0.0, (self.cost - self.bound) / self.cost)


class NoFeasiblePlan(ValueError):
    """No assignment fits the memory limit (or every assignment uses a forbidden pair)."""


def validate(problem: SearchProblem) -> None:
    """Raise ``ValueError`` naming the culprit on a malformed problem.

    Checked: edge endpoints in range, matrix shapes, no NaN anywhere, no ``-inf``.
    """
    n = len(problem.variables)
    good: set[tuple] = set()   # (array id, test) passed (identical layers share arrays)

    def fine(a: np.ndarray, test) -> bool:
        if (id(a), test) in good:
            return True
        if test(a):
            good.add((id(a), test))
            return True
        return False

    for v in problem.variables:
        if not fine(v.cost, _no_nan_or_minus_inf) or not fine(v.memory, _no_nan):
            raise ValueError(f"variable {v.name}: cost or memory is NaN or -inf")
    for e in problem.edges:
        if not (0 <= e.u < n and 0 <= e.v < n):
            raise ValueError(f"edge {e.u}->{e.v}: endpoint outside 0..{n - 1}")
        if e.cost.ndim != 2:
            raise ValueError(f"edge {e.u}->{e.v}: matrix must be 2-D, got shape {e.cost.shape}")
        if not fine(e.cost, _no_nan_or_minus_inf):
            raise ValueError(f"edge {e.u}->{e.v}: matrix holds NaN or -inf")
    problem.check()


def _no_nan(x: np.ndarray) -> bool:
    return not np.isnan(x).any()


def _no_nan_or_minus_inf(x: np.ndarray) -> bool:
    """One reduction: the minimum is NaN if any entry is, ``-inf`` if any entry is."""
    return x.size == 0 or bool(x.min() > -np.inf)


def merged_edges(problem: SearchProblem) -> dict[tuple[int, int], np.ndarray]:
    """Edges keyed ``(u, v)`` with ``u < v``, parallel edges summed, reversed ones transposed.

    The result depends only on the problem's content, not on the order or orientation in which
    edges were listed (keys are iterated sorted by the callers).
    """
    out: dict[tuple[int, int], np.ndarray] = {}
    for e in problem.edges:
        u, v, m = (e.u, e.v, e.cost) if e.u < e.v else (e.v, e.u, e.cost.T)
        out[(u, v)] = out[(u, v)] + m if (u, v) in out else m  # summing makes a new array
    return dict(sorted(out.items()))
