"""The ``planner_compile`` job: compile a network's training graph under one planner
(MindSpore's own searches, smsg's strategies, data parallel, the network's expert ``shard()``)
and return what the comparison measures (:mod:`smsg_ms.compare.measures`)."""
from __future__ import annotations

import time

from ...integration.annotate import clear_strategies
from .common import executor_strategies, setup_parallel

#: planner → (parallel_mode, search_mode or None); see :func:`job_planner_compile`.
PLANNERS = {
    "semi_auto": ("semi_auto_parallel", None),
    "data_parallel": ("semi_auto_parallel", None),
    "expert": ("semi_auto_parallel", None),
    "recursive_programming": ("auto_parallel", "recursive_programming"),
    "dynamic_programming": ("auto_parallel", "dynamic_programming"),
    "sharding_propagation": ("auto_parallel", "sharding_propagation"),
}


def parameter_role(name: str, weights: set) -> str:
    """``parameter`` (a trainable weight of the network), ``optimizer`` (state the optimizer keeps
    per weight, named ``<state>.<weight>`` as Momentum's ``moments.*`` and Adam's ``adam_m.*``),
    or ``other`` (learning rate, step counter)."""
    if name in weights:
        return "parameter"
    head, _, rest = name.partition(".")
    return "optimizer" if rest in weights else "other"


def job_planner_compile(job: dict) -> dict:
    """Compile the spec's training graph under ``job["planner"]`` and measure the result.

    Planners: ``recursive_programming`` / ``dynamic_programming`` / ``sharding_propagation``
    (``auto_parallel`` with that ``search_mode``; ``strategies`` are the seeds), ``semi_auto``
    (``strategies`` written with ``shard()``, with the ``out_strategies`` of the paths it names),
    ``data_parallel`` (``semi_auto_parallel`` with no
    strategy: MindSpore gives every operator its batch-parallel strategy), ``expert`` (the
    network's own ``shard()`` calls kept). For every planner but ``expert`` the network's own
    ``shard()`` strategies are deleted first.

    Returns ``strategies_raw`` (``get_strategy``: scoped name → strategy), ``strategies``
    (primitive path → strategy of its first call), ``strategies_per_call`` (path → strategy of
    each call, for primitives whose calls disagree:
    :func:`smsg_ms.dryrun.compiled.strategies_per_call`), ``collectives``, ``parameters``
    (per-device slice shapes from ``parameter_layout_dict``), ``compute_ops`` (per-device shapes
    of MatMul/conv nodes, both passes), ``compile_seconds`` (wall time of the compile, i.e.
    MindSpore's planning plus the parallel passes).

    Raises:
        ValueError: an unknown planner.
        KeyError: ``strategies`` name primitives the network does not have.
    """
    from ...graph.capture import compile_cell, path_hints, tag_primitives
    from ...networks import build_network
    from ..collectives import collectives_in, compute_in, flatten
    from ..compiled import compiled_model, node_table, strategies_by_path, strategies_per_call

    planner = job["planner"]
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r} (known: {', '.join(sorted(PLANNERS))})")
    mode, search = PLANNERS[planner]
    context = dict(job.get("context", {"full_batch": True}))
    if search:
        context["search_mode"] = search
    ms = setup_parallel(parallel_mode=mode, extra_context=context)
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    cleared = [] if planner == "expert" else clear_strategies(prims)
    unknown = sorted(set(job.get("strategies", {})) - set(prims))
    if unknown:
        raise KeyError(f"strategies name primitives the network does not have: "
                       f"{', '.join(unknown)}")
    if planner != "data_parallel":
        outs = job.get("out_strategies") or {}
        for path, strategy in sorted(job.get("strategies", {}).items()):
            in_strategy = tuple(tuple(s) for s in strategy)
            if path in outs:
                prims[path].shard(in_strategy, tuple(tuple(s) for s in outs[path]))
            else:
                prims[path].shard(in_strategy)
    train = built.train_cell(ms)
    full_shapes = {p.name: [int(d) for d in p.shape] for p in train.get_parameters()}
    weights = {p.name for p in built.net.trainable_params()}
    t0 = time.perf_counter()
    phase = compile_cell(train, built.train_inputs, phase="train")
    seconds = time.perf_counter() - t0
    from mindspore.communication import get_group_size

    raw = {k: [[int(x) for x in s] for s in v] for k, v in executor_strategies(phase).items()}
    model = compiled_model(train, phase)
    _, calls = node_table(model)
    by_path, notes = strategies_by_path(raw, calls, path_hints(prims), wrappers=2)
    flat = flatten(model)  # sub-graph calls inlined, each call counted
    layouts = train.parameter_layout_dict or {}
    params = []
    for p in train.get_parameters():
        layout = layouts.get(p.name)
        shape = [int(d) for d in (layout[2] if layout else p.shape)]
        params.append({"name": p.name, "shape": shape, "full_shape": full_shapes.get(p.name, shape),
                       "dtype": str(p.dtype).lower(), "role": parameter_role(p.name, weights)})
    return {"planner": planner, "strategies_raw": raw, "strategies": by_path, "notes": notes,
            "strategies_per_call": strategies_per_call(raw, calls),
            "cleared_shard": cleared,
            "collectives": collectives_in(flat, get_group_size()),
            "parameters": params, "compute_ops": compute_in(flat), "compile_seconds": seconds}
