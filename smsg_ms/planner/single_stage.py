"""Planning one stage: captured graph → cost model → search problem → exact search →
:class:`~smsg_ms.plan.Plan` (the orchestration; the parts live in :mod:`.variables`,
:mod:`.problem`, :mod:`.decisions` and :mod:`.write_back`)."""
from __future__ import annotations

import gc
from contextlib import contextmanager

from ..devices import check_device_count
from ..graph.model import OpGraph
from ..plan import Plan
from ..search.effort import DEFAULT_SECONDS
from .errors import PlanningError
from .options import PlanningOptions


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector (restored on exit, as it was). Planning allocates
    many small, acyclic objects (reference counting frees them); each full collection the
    allocations trigger re-walks every live object, the captured graph included, so at 80
    layers the collector took ~15% of :func:`plan_graph` (``scripts/bench_plan.py``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plan_graph(graph: OpGraph, devices: int, *, hardware="ascend910b",
               memory_gib: float | None = None, options: dict | None = None,
               network: str | None = None, repeated=None, progress: bool | None = None,
               exhaustive: bool | None = None, choice: list[int] | None = None,
               write_back: str = "auto", model=None, built: tuple | None = None,
               time_limit: float = DEFAULT_SECONDS,
               replace_strategies: bool = False) -> Plan:
    """Plan ``graph`` on ``devices`` devices.

    Args:
        graph: captured forward graph (global shapes).
        devices: devices of the (single) stage; 1, 2, 4 or a multiple of 8.
        hardware: preset name or :class:`smsg_ms.cost.hardware.Hardware`.
        memory_gib: per-device memory limit in GiB (default: the preset's memory).
        options: network options recorded in the plan.
        network: network name recorded in the plan (default ``graph.name``).
        repeated: groups of identical blocks (variable indices) for the search; found from the
            graph when ``None``.
        exhaustive: propose replicated strategies too (default: up to
            :data:`~smsg_ms.planner.options.EXHAUSTIVE_UP_TO` devices).
        choice: option index per search variable to use instead of searching (a pipeline stage
            plan solved under per-stage memory rows, :mod:`smsg_ms.planner.stage_memory`).
        write_back: ``auto``, ``shard`` or ``propagate``: :attr:`Plan.write_back`, chosen by
            :func:`smsg_ms.planner.write_back.choose_write_back`.
        model: the :class:`~smsg_ms.cost.model.CostModel` of ``graph`` on ``devices`` that
            this call would make (same hardware, ``fully_use_devices = not exhaustive``), to
            reuse its option cache (a pipeline's stage plan).
        built: ``build_problem(graph, model)`` already made with that ``model``, to reuse.
        time_limit: seconds of search work (:attr:`PlanningOptions.time_limit`).
        replace_strategies: plan anew the primitives whose strategy the network's own
            ``shard()`` sets (default: kept, :attr:`PlanningOptions.replace_strategies`).

    Raises:
        smsg_ms.devices.DeviceCountError: a device count MindSpore refuses.
        PlanningError: operator without options, a ``model`` of another graph, device count
            or strategy set.
        smsg_ms.search.NoFeasiblePlan: nothing fits in memory.
    """
    settings = PlanningOptions(hardware=hardware, memory_gib=memory_gib, progress=progress,
                               exhaustive=exhaustive, write_back=write_back,
                               time_limit=time_limit, replace_strategies=replace_strategies)
    return plan_graph_with(graph, devices, settings, network=network, network_options=options,
                           repeated=repeated, choice=choice, model=model, built=built)


def plan_graph_with(graph: OpGraph, devices: int, settings: PlanningOptions, *,
                    network: str | None = None, network_options: dict | None = None,
                    repeated=None, choice: list[int] | None = None, model=None,
                    built: tuple | None = None, bound: float | None = None) -> Plan:
    """:func:`plan_graph` with its settings as one :class:`PlanningOptions` (the other
    arguments as there; ``network_options`` is :func:`plan_graph`'s ``options``); ``bound``:
    with ``choice``, a proven lower bound (seconds) on the optimum when ``choice`` was found
    at a work limit (stated in the totals with the gap), ``None`` when it is optimal."""
    check_device_count(devices)
    with collector_paused():
        return _plan(graph, devices, settings, network=network, network_options=network_options,
                     repeated=repeated, choice=choice, model=model, built=built, bound=bound)


def refuse_uncovered(graph: OpGraph) -> None:
    """Refuse a graph whose capture could not follow all of the network: a plan of it would
    silently leave operators and weights without a layout (issue #14).

    Raises:
        PlanningError: the graph holds tensor-valued control flow (the message names the
            primitive, the cell and the source line the capture found), or weights no captured
            operator reads (named).
    """
    unread = graph.unread_parameters()
    weights = (f"; weights read only there: {', '.join(unread)}" if unread else "")
    flow = graph.control_flow()
    if flow:
        more = f" (and {len(flow) - 1} more)" if len(flow) > 1 else ""
        raise PlanningError(f"cannot plan {graph.name}: {flow[0]}{more}{weights}")
    if unread:
        raise PlanningError(f"cannot plan {graph.name}: no captured operator reads the weights "
                            f"{', '.join(unread)}; a plan would set no layout for them")


def _plan(graph: OpGraph, devices: int, settings: PlanningOptions, *, network, network_options,
          repeated, choice, model, built, bound=None) -> Plan:
    from ..cost.hardware import get_hardware
    from ..cost.model import CostModel
    from ..search import solve
    from .decisions import plan_from_solution
    from .problem import build_problem
    from .variables import repeated_variable_groups
    from .write_back import set_write_back

    refuse_uncovered(graph)
    hw = get_hardware(settings.hardware)
    exhaustive = settings.exhaustive_on(devices)
    if model is None:
        model = CostModel(graph, devices, hw, fully_use_devices=not exhaustive,
                          replace_strategies=settings.replace_strategies)
        built = None
    elif (model.graph is not graph or model.devices != devices or model.hardware != hw
          or model.fully_use_devices != (not exhaustive)
          or model.replace_strategies != settings.replace_strategies):
        raise PlanningError("plan_graph(model=...) must be the cost model of this graph on "
                            f"{devices} devices with fully_use_devices={not exhaustive}")
    problem, variables = built if built is not None else build_problem(graph, model,
                                                                       reuse=settings.reuse)
    if repeated is None:
        repeated = repeated_variable_groups(graph, problem, variables)
    if choice is None:
        solution = solve(problem, memory_limit=settings.memory_limit(hw), repeated=repeated,
                         progress=settings.progress, effort=settings.effort)
    else:
        from ..search.problem import Solution
        if len(choice) != len(problem.variables):
            raise PlanningError(f"choice has {len(choice)} entries, the problem "
                                f"{len(problem.variables)} variables")
        solution = Solution(list(choice), problem.total(choice), problem.memory(choice), bound)
    plan = plan_from_solution(graph, model, problem, variables, solution,
                              network=network or graph.name,
                              network_options=dict(network_options or {}))
    if model.merges_constant_gradients:  # kept constant gradients: one per expression (CSE)
        from .constant_gradients import merge_constant_gradients
        one = {v.name: 0 for v in variables} | {d.name: 0 for d in plan.decisions}
        merge_constant_gradients(graph, model, variables, solution.choice, plan.decisions, one)
    return set_write_back(plan, settings.write_back).seal()


def plan_network(spec: str, devices: int, *, hardware="ascend910b", memory_gib=None,
                 progress: bool | None = None, write_back: str = "auto",
                 time_limit: float = DEFAULT_SECONDS, replace_strategies: bool = False,
                 build_for_devices: bool = True, **network_options) -> Plan:
    """Capture ``spec`` (built-in name or ``package.module:function``) and plan it; the
    strategies the network's own ``shard()`` sets are kept unless ``replace_strategies``.
    ``build_for_devices`` (default): the network is built for ``devices`` in the capture
    (``capture_network``'s ``world``; recorded as the plan's ``built_for`` when it reads the
    world size, as mindformers' ``parallel_core`` models do; a network that does not read it
    captures the same graph); ``False``: built for the capture's one device.

    Raises:
        smsg_ms.devices.DeviceCountError, PlanningError, smsg_ms.graph.capture.CaptureError,
        smsg_ms.search.NoFeasiblePlan.
    """
    from ..graph.capture import capture_network

    check_device_count(devices)
    settings = PlanningOptions(hardware=hardware, memory_gib=memory_gib, progress=progress,
                               write_back=write_back, time_limit=time_limit,
                               replace_strategies=replace_strategies)
    graph = capture_network(spec, world=devices if build_for_devices else None,
                            **network_options)
    return plan_graph_with(graph, devices, settings, network=spec,
                           network_options=network_options)


__all__ = ["collector_paused", "plan_graph", "plan_graph_with", "plan_network"]
