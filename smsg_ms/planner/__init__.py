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
  and what the outer search reads of it; :mod:`.stage_graphs`: its graphs, built for each
  stage size where the network reads the world size;
* :mod:`.workers`: stage plans solved in forked processes;
* :mod:`.pipelined`: :func:`plan_network_pipelined` (the outer pipeline search).
"""
from __future__ import annotations

#: the public names, by the module that defines them
_PUBLIC = {
    "errors": ("PipelinePlanningError", "PlanningError"),
    "options": ("EXHAUSTIVE_UP_TO", "PlanningOptions"),
    "pipelined": ("plan_network_pipelined", "plan_pipelined_with"),
    "problem": ("build_problem",),
    "single_stage": ("plan_graph", "plan_graph_with", "plan_network"),
}

__all__ = ["EXHAUSTIVE_UP_TO", "PipelinePlanningError", "PlanningError", "PlanningOptions",
           "build_problem", "plan_graph", "plan_graph_with", "plan_network",
           "plan_network_pipelined", "plan_pipelined_with"]


def __getattr__(name: str):
    """The public names, imported on first use: integration and report read
    :mod:`smsg_ms.planner.write_back` without loading numpy and the search (the startup of
    ``smsg-ms explain``). Submodule names fall through to the import system."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import errors, options, pipelined, problem, single_stage

    modules = {"errors": errors, "options": options, "pipelined": pipelined,
               "problem": problem, "single_stage": single_stage}
    module = next(modules[m] for m, names in _PUBLIC.items() if name in names)
    return getattr(module, name)
