"""The per-stage memory limit inside a pipeline's stage plan.

A stage plan is one operator-level plan of the whole network on ``d = n / p`` devices; stage ``s``
holds the parameters of its blocks and the stored activations of ``p − s`` micro-batches in flight
(1F1B, :mod:`smsg_ms.cost.pipeline`). Each stage's bytes per device are linear in the operator
choices, so the limit on one stage is one memory row of the operator-level search problem:

    row_s(option) = Σ over its operators on stage s of (p − s) · activation bytes
                    + bytes of the parameters first read there (params, gradients, optimizer
                      state per element as :func:`smsg_ms.cost.pipeline.parameter_memory`)

with blocks cut contiguously and evenly (block ``i`` on stage ``i · p // L``), no recompute and no
optimizer sharding (the outer search may still add both). :func:`solve_stage_within` solves the
stage plan under the row of the stage most over the limit until every stage fits (at most ``p``
solves; the search takes one memory row at a time).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..cost.pipeline import MIXED_PRECISION_ADAM, ParamSlice, parameter_memory
from .stages import StageSolution, block_of_ops, slice_shape, solve_stage


def balanced_cut(blocks: int, stages: int) -> list[int]:
    """Stage of each of ``blocks`` blocks: contiguous, sizes differing by at most one."""
    if not 1 <= stages <= blocks:
        raise ValueError(f"cannot cut {blocks} blocks into {stages} stages")
    return [i * stages // blocks for i in range(blocks)]


def stage_memory_rows(sol: StageSolution, stages: int, stage_of_block: list[int], *,
                      sharding: bool = False, bytes_per: dict | None = None
                      ) -> list[list[np.ndarray]]:
    """``rows[s][v][o]``: bytes per device that option ``o`` of search variable ``v`` puts on
    stage ``s`` (module docstring)."""
    graph = sol.graph
    _, block = block_of_ops(graph)
    b = bytes_per or MIXED_PRECISION_ADAM
    first_use: dict[str, tuple[int, int]] = {}
    for op in graph.ops:
        for idx, name in enumerate(op.inputs):
            if graph.tensors[name].kind == "parameter":
                first_use.setdefault(name, (op.id, idx))
    rows = [[np.zeros(len(var.options)) for var in sol.variables] for _ in range(stages)]
    for vi, var in enumerate(sol.variables):
        for oi, calls in enumerate(var.options):
            for op, c in zip(var.ops, calls):
                s = stage_of_block[block[op.id]]
                rows[s][vi][oi] += (stages - s) * float(c.memory.get("activation", 0))
                for idx, name in enumerate(op.inputs):
                    if first_use.get(name) != (op.id, idx):
                        continue
                    t, layout = graph.tensors[name], c.in_layouts[idx]
                    sl = slice_shape(t.shape, layout)
                    prm = ParamSlice(int(np.prod(sl)) if sl else 1, int(sl[0]) if sl else 1,
                                     sol.devices // layout.shards, float(t.nbytes or 0),
                                     t.parallel_optimizer)
                    rows[s][vi][oi] += sum(parameter_memory([prm], sharding, b).values())
    return rows


def stage_memory(rows: list[list[np.ndarray]], choice: list[int]) -> list[float]:
    """Bytes per device of every stage under ``choice``."""
    return [float(sum(r[vi][c] for vi, c in enumerate(choice))) for r in rows]


def solve_stage_within(graph, devices: int, hardware, stages: int, limit: float, *,
                       model=None, signatures: dict | None = None,
                       effort=None) -> StageSolution:
    """Stage plan of ``graph`` on ``devices`` whose every stage (balanced cut, ``stages`` stages)
    fits in ``limit`` bytes per device: the unconstrained optimum if it fits, else the optimum
    under the row of the stage most over the limit, repeated (module docstring). ``model``: the
    stage's cost model to reuse (:func:`smsg_ms.planner.stages.stage_cost_model`);
    ``signatures``: the graph's :func:`smsg_ms.planner.variables.op_signatures`, when known;
    ``effort``: the work limit of each memory-limited solve (default: the search's).

    Raises:
        smsg_ms.search.NoFeasiblePlan: no plan found within the limit (message names the stage
            and its bytes).
    """
    from ..search import NoFeasiblePlan, solve
    from ..search.problem import SearchProblem

    sol = solve_stage(graph, devices, hardware, model, signatures)
    names, _ = block_of_ops(graph)
    rows = stage_memory_rows(sol, stages, balanced_cut(len(names), stages))
    choice = sol.choice
    for _ in range(stages):
        need = stage_memory(rows, choice)
        worst = max(range(stages), key=lambda s: (need[s] - limit, -s))
        if need[worst] <= limit:
            return replace(sol, choice=list(choice))
        problem = SearchProblem([replace(v, memory=rows[worst][vi])
                                 for vi, v in enumerate(sol.problem.variables)],
                                sol.problem.edges)
        choice = list(solve(problem, memory_limit=limit, progress=False,
                            **({} if effort is None else {"effort": effort})).choice)
    need = stage_memory(rows, choice)
    worst = max(range(stages), key=lambda s: (need[s] - limit, -s))
    if need[worst] > limit:
        raise NoFeasiblePlan(f"stage {worst} of {stages} needs {need[worst]:.0f} bytes per device "
                             f"> limit {limit:.0f} after {stages} constrained solves")
    return replace(sol, choice=list(choice))


__all__ = ["balanced_cut", "solve_stage_within", "stage_memory", "stage_memory_rows"]
