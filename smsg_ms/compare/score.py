"""smsg's cost model applied to any planner's strategies (``smsg_ms.score``)."""
from __future__ import annotations

import math


def _key(strategy, out=None) -> tuple:
    """The option key (:func:`smsg_ms.planner.variables.option_key`) of an in_strategy and,
    where set, its out_strategy."""
    key = tuple(tuple(int(x) for x in s) for s in strategy) if strategy else ()
    return key + (("out",) + _key(out),) if out else key


def score(network_spec: str, devices: int, strategies: dict, *, hardware="ascend910b",
          graph=None, per_call: dict | None = None, out_strategies: dict | None = None,
          **network_options) -> dict:
    """Predicted step cost, under smsg's model, of the plan given by ``strategies``.

    Builds the same search problem the planner solves (:func:`smsg_ms.planner.build_problem` over
    :class:`smsg_ms.cost.model.CostModel`) and evaluates one assignment: each primitive named in
    ``strategies`` takes that strategy; the variables it does not name (Reshape, functional calls,
    primitives the other planner left to MindSpore) take, in graph order, the option cheapest
    given the variables already fixed (their own cost plus the edges to those).

    Args:
        network_spec: built-in name or ``package.module:function``.
        devices: device count.
        strategies: ``{primitive path: in_strategy}`` (as :attr:`smsg_ms.plan.Plan.strategies`).
        per_call: ``{primitive path: [in_strategy of call 0, call 1, ...]}`` for primitives
            whose calls another planner laid out differently (``auto_parallel`` planners;
            ``strategies_per_call`` of the ``planner_compile`` job). Each call of such a
            primitive is its own variable of the scored problem (``split_calls`` of
            :func:`~smsg_ms.planner.build_problem`), pinned to its own strategy; the calls are
            matched by index (:attr:`~smsg_ms.graph.model.OpNode.call_index`).
        hardware: preset name of :mod:`smsg_ms.cost.hardware`.
        graph: the captured :class:`~smsg_ms.graph.model.OpGraph` (captured when ``None``).
        out_strategies: ``{primitive path: out_strategy}`` (:attr:`smsg_ms.plan.Plan.
            out_strategies`): those primitives take their out_strategy option.
        network_options: options of the network function.

    Returns:
        ``{"step_seconds": s, "memory_bytes": bytes per device, "pinned": variables given,
        "filled": variables chosen by the model, "unknown": [paths the graph lacks],
        "unavailable": [paths whose strategy the model has no option for], "split": [paths
        scored per call]}``; a primitive (or call, ``path#k``) in ``unavailable`` is treated as
        unnamed.

    Raises:
        ImportError: the cost model is not installed on this branch.
        smsg_ms.devices.DeviceCountError: a device count MindSpore refuses.
    """
    from ..cost.hardware import get_hardware
    from ..cost.model import CostModel
    from ..devices import check_device_count
    from ..planner import build_problem

    check_device_count(devices)
    if graph is None:
        from ..graph.capture import capture_network
        graph = capture_network(network_spec, **network_options)
    model = CostModel(graph, devices, get_hardware(hardware))
    calls = _call_strategies(per_call or {})
    split = sorted({label.split("#")[0] for label in calls})
    problem, variables = build_problem(graph, model, split_calls=frozenset(split))
    names = {v.ops[0].prim_path for v in variables if v.written_back}
    unknown = sorted((set(strategies) | set(split)) - names)
    choice: list[int | None] = [None] * len(variables)
    unavailable = []
    for vi, var in enumerate(variables):
        if not var.written_back:
            continue
        strategy = calls.get(var.name, strategies.get(var.ops[0].prim_path))
        if strategy is None:
            continue
        want = _key(strategy, (out_strategies or {}).get(var.ops[0].prim_path)
                    if var.name not in calls else None)
        hit = next((i for i, k in enumerate(var.keys) if k == want), None)
        if hit is None:
            unavailable.append(var.name)
        choice[vi] = hit
    pinned = sum(c is not None for c in choice)
    choice = fill_choice(problem, choice)
    return {"step_seconds": float(problem.total(choice)),
            "memory_bytes": float(problem.memory(choice)), "pinned": pinned,
            "filled": len(variables) - pinned, "unknown": unknown,
            "unavailable": sorted(unavailable), "split": split}


def fill_choice(problem, choice: list) -> list[int]:
    """``choice`` (an option index or ``None`` per search variable) completed: each ``None``
    variable, in graph order, takes the option cheapest given the variables already fixed (its
    own cost plus the edges to those; ties to the lower index). Returns a new list."""
    choice = list(choice)
    neighbours: dict[int, list] = {}
    for e in problem.edges:
        neighbours.setdefault(e.u, []).append((e.v, e.cost))
        neighbours.setdefault(e.v, []).append((e.u, e.cost.T))
    for vi, var in enumerate(problem.variables):
        if choice[vi] is not None:
            continue
        local = var.cost.copy()
        for other, mat in neighbours.get(vi, []):
            if choice[other] is not None:
                local = local + mat[:, choice[other]]
        finite = [i for i in range(len(local)) if math.isfinite(local[i])]
        choice[vi] = min(finite, key=lambda i: (local[i], i)) if finite else 0
    return choice


def _call_strategies(per_call: dict) -> dict:
    """``{path: [s0, s1, ...]}`` → ``{call label: strategy}`` (labels as
    :attr:`~smsg_ms.graph.model.OpNode.label`: ``path`` for call 0, ``path#k`` after)."""
    out = {}
    for path, strategies in sorted(per_call.items()):
        for k, strategy in enumerate(strategies):
            out[path + (f"#{k}" if k else "")] = strategy
    return out


def read_network_strategies(network_spec: str, devices: int = 8, **network_options) -> dict:
    """``{primitive path: in_strategy}`` the built network's primitives already carry (set by
    ``shard()`` in its code, as mindformers does from its parallel config); built in the dry-run
    child without allocating weights.

    Raises:
        smsg_ms.dryrun.runner.DryRunError: the network does not build.
    """
    from ..dryrun.runner import run_child

    result = run_child({"job": "read_shard", "spec": network_spec, "options": network_options},
                       devices=devices)
    return result["strategies"]
