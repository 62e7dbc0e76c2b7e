"""The planner: captured graph → cost model → search problem → exact search → :class:`Plan`.

Modules (each one job; ``docs/architecture.md``):

* :mod:`.options`: :class:`PlanningOptions`, the settings of a planning run;
* :mod:`.errors`: :class:`PlanningError`, :class:`PipelinePlanningError`;
* :mod:`.variables`: search variables (primitive instances and operators), signatures, the
  operator → variable index, repeated blocks;
* :mod:`.loss`: what the training wrapper's loss reads and what moving it there costs;
* :mod:`.problem`: :func:`build_problem`, the search problem (options, edges);
* :mod:`.decisions`: a solution read back into a :class:`~smsg_ms.plan.Plan`;
* :mod:`.write_back`: the plan's write-back mode;
* :mod:`.single_stage`: :func:`plan_graph`, :func:`plan_network` (orchestration);
* :mod:`.stages`, :mod:`.stage_costs`, :mod:`.stage_memory`: the stage plan of a pipeline
  and what the outer search reads of it;
* :mod:`.workers`: stage plans solved in forked processes;
* :mod:`.pipelined`: :func:`plan_network_pipelined` (the outer pipeline search).
"""
from __future__ import annotations

from .errors import PipelinePlanningError, PlanningError
from .options import EXHAUSTIVE_UP_TO, PlanningOptions
from .pipelined import plan_network_pipelined, plan_pipelined_with
from .problem import build_problem
from .single_stage import plan_graph, plan_graph_with, plan_network

__all__ = ["EXHAUSTIVE_UP_TO", "PipelinePlanningError", "PlanningError", "PlanningOptions",
           "build_problem", "plan_graph", "plan_graph_with", "plan_network",
           "plan_network_pipelined", "plan_pipelined_with"]
