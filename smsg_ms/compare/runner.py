"""Run every planner on one network and device count, and measure each compiled result.

Each planner's strategies are compiled by MindSpore's real parallel compiler in the CPU dry-run
(job ``planner_compile``); the figures come from the compiled graph (:mod:`.measures`). A planner
that fails (does not plan, or does not compile) keeps its row with the error.
"""
from __future__ import annotations

import time
from collections import Counter

from . import measures

#: Planners in report order. ``smsg`` plans with :func:`smsg_ms.planner.plan_network`; the others
#: are MindSpore's (``data_parallel``: semi-auto with every operator batch-parallel).
PLANNERS = ("smsg", "recursive_programming", "dynamic_programming", "sharding_propagation",
            "data_parallel")
MINDSPORE_SEARCH = ("recursive_programming", "dynamic_programming", "sharding_propagation")


def batch_parallel_seeds(graph, devices: int) -> dict[str, list[list[int]]]:
    """Data-parallel strategies of the first primitives that consume the data inputs.

    From each data input, follow consumers through operators that cannot be annotated (no
    primitive path, or a refused ``shard()``: :func:`smsg_ms.cost.operators.shard_refused`, a
    Reshape) to the first annotated primitives; each gets: data tensors cut
    ``devices``-way on dimension 0 (when it divides), parameters and constants whole. This is the
    seed MindSpore's ``sharding_propagation`` needs (it propagates from annotated operators).
    """
    from ..cost.operators import shard_refused

    seeds: dict[str, list[list[int]]] = {}
    frontier = list(graph.inputs)
    seen = set()
    while frontier:
        name = frontier.pop(0)
        if name in seen:
            continue
        seen.add(name)
        for cid in graph.tensors[name].consumers:
            op = graph.ops[cid]
            if op.prim_path and not shard_refused(op.type):
                if op.prim_path in seeds:
                    continue
                strategy = []
                for t in op.inputs:
                    info = graph.tensors[t]
                    shape = list(info.shape)
                    cut = [1] * len(shape)
                    if info.kind not in ("parameter", "constant") and shape and \
                            isinstance(shape[0], int) and shape[0] % devices == 0:
                        cut[0] = devices
                    strategy.append(cut)
                seeds[op.prim_path] = strategy
            else:
                frontier.extend(op.outputs)
    return dict(sorted(seeds.items()))


def predicted_collectives(plan) -> list[dict]:
    """Predicted collectives of a :class:`smsg_ms.plan.Plan` (``OpDecision.collectives``)."""
    return [dict(c) for d in plan.decisions for c in d.collectives]


def match_collectives(predicted: list[dict], inserted: list[dict]) -> dict:
    """How many predicted collectives MindSpore inserted, matched on (kind, group size, phase).

    Multiset matching: ``matched = Σ_key min(#predicted, #inserted)``. Collectives over one device
    and Receives (the pair of a Send) are left out on both sides.
    """
    pred = Counter((c["kind"], int(c["group"]), c["phase"]) for c in predicted
                   if int(c["group"]) > 1)
    ins = Counter((c["type"], int(c.get("group_size") or len(c.get("group", []))),
                   measures.phase_of(c)) for c in inserted
                  if c["type"] != "Receive" and int(c.get("group_size") or 0) > 1)
    matched = sum(min(n, ins[k]) for k, n in pred.items())
    return {"predicted": sum(pred.values()), "inserted": sum(ins.values()), "matched": matched,
            "missing": sorted(f"{k[0]} g={k[1]} {k[2]} x{n - ins[k]}" for k, n in pred.items()
                              if n > ins[k]),
            "unpredicted": sorted(f"{k[0]} g={k[1]} {k[2]} x{n - pred[k]}" for k, n in ins.items()
                                  if n > pred[k])}


def _compile(spec, devices, planner, options, strategies=None, timeout=900.0,
             alltoall: bool = False, out_strategies: dict | None = None) -> dict:
    from ..dryrun.runner import run_child

    job = {"job": "planner_compile", "spec": spec, "options": options, "planner": planner,
           "strategies": strategies or {}}
    if out_strategies:   # row-parallel MatMuls that reduce-scatter (sequence parallel)
        job["out_strategies"] = out_strategies
    if alltoall:   # a plan priced with AlltoAll redistribution (expert layers)
        job["context"] = {"full_batch": True, "enable_alltoall": True}
    return run_child(job, devices=devices, timeout=timeout)


def _error(exc: BaseException) -> str:
    own = type(exc).__module__.startswith("smsg_ms.")   # our one-line messages: no class name
    text = (str(exc) if own else f"{type(exc).__name__}: {exc}").strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def run_planner(planner: str, spec: str, devices: int, options: dict, *, hardware="ascend910b",
                graph=None, expert_options: dict | None = None, timeout: float = 900.0,
                write_back: str = "auto") -> dict:
    """One row of the comparison: plan (when smsg), compile, measure.

    smsg's plan is compiled with its write-back (``write_back``: ``auto``, ``shard`` or
    ``propagate``, :mod:`smsg_ms.integration.writeback`): semi-auto ``shard()``, or sharding
    propagation seeded with its strategies.

    Returns ``{"planner", "ok", "error", "planning_seconds", "compile_seconds", "strategies",
    "measures", "fidelity" (smsg only), "notes"}``; ``ok`` is False with ``error`` set when the
    planner or the compile failed.
    """
    row = {"planner": planner, "ok": False, "error": None, "planning_seconds": None,
           "compile_seconds": None, "strategies": {}, "measures": None, "notes": []}
    plan = None
    try:
        if planner == "smsg":
            from ..planner import plan_network
            t0 = time.perf_counter()
            plan = plan_network(spec, devices, hardware=hardware, write_back=write_back,
                                **options)
            if graph is not None:   # mindformers' MoE layers: the expert-parallel degree
                from ..integration.mindformers_run import apply_expert_parallel
                apply_expert_parallel(plan, graph)
                options = {**options, **{k: v for k, v in plan.options.items()
                                         if k == "expert_parallel"}}
            row["planning_seconds"] = time.perf_counter() - t0
            # the plan's write-back: shard() in semi-auto, or the seeds of sharding propagation
            mode = "sharding_propagation" if plan.write_back == "propagate" else "semi_auto"
            row["notes"].append(f"write-back {plan.write_back}")
            result = _compile(spec, devices, mode, options, plan.strategies, timeout,
                              alltoall=plan.enable_alltoall, out_strategies=plan.out_strategies)
        elif planner == "expert":
            from .nets import EXPERT_SPECS
            result = _compile(EXPERT_SPECS.get(spec, spec), devices, "expert",
                              {**options, **(expert_options or {})}, timeout=timeout)
        elif planner == "sharding_propagation":
            seeds = batch_parallel_seeds(graph, devices) if graph is not None else {}
            row["notes"].append(f"seeded with batch-parallel strategies of {', '.join(seeds)}")
            result = _compile(spec, devices, planner, options, seeds, timeout)
        else:
            result = _compile(spec, devices, planner, options, timeout=timeout)
    except Exception as exc:  # a failing planner is a result, not a crash
        row["error"] = _error(exc)
        return row
    row["ok"] = True
    row["compile_seconds"] = result["compile_seconds"]
    if row["planning_seconds"] is None:  # MindSpore plans inside the compile
        row["planning_seconds"] = result["compile_seconds"]
    row["strategies"] = result["strategies"]
    if plan is not None and plan.out_strategies:   # MindSpore's get_strategy gives in_strategies
        row["out_strategies"] = plan.out_strategies
    if result.get("strategies_per_call"):
        row["strategies_per_call"] = result["strategies_per_call"]
    row["notes"] += result.get("notes", [])
    if result.get("cleared_shard"):
        row["notes"].append(f"dropped the network's own shard() on {len(result['cleared_shard'])}"
                            " primitives")
    row["measures"] = measures.summarize(result, hardware)
    if plan is not None:
        row["fidelity"] = match_collectives(predicted_collectives(plan), result["collectives"])
        row["smsg_predicted_seconds"] = plan.totals.get("step_seconds")
    return row


def compare(spec: str, devices: int, *, planners=PLANNERS, hardware="ascend910b",
            expert: tuple[int, ...] | None = None, score_rows: bool = True,
            timeout: float = 900.0, progress=None, write_back: str = "auto",
            **options) -> dict:
    """Compile ``spec`` on ``devices`` once per planner and measure each result.

    Args:
        spec: network spec (built-in name or ``package.module:function``).
        devices: device count (1, 2, 4 or a multiple of 8).
        planners: names from :data:`PLANNERS` (and ``expert`` when ``expert`` is given).
        hardware: preset for the neutral step cost and smsg's model.
        expert: ``(dp, mp[, pp])`` of the network's own parallel config (mindformers specs take
            ``data_parallel``/``model_parallel``/``pipeline_stage`` options); adds the ``expert`` row.
        score_rows: also score every planner's strategies with smsg's model
            (:func:`smsg_ms.compare.score.score`), where it is available.
        progress: callable ``(planner) -> None`` called before each planner runs.
        write_back: smsg's write-back mode (``auto``, ``shard``, ``propagate``).
        options: network options (batch, seq, layers ...).

    Returns:
        ``{"network", "devices", "hardware", "options", "rows": [row...], "spearman"}``; see
        :func:`run_planner` for a row. ``spearman`` = Spearman's ρ between smsg's predicted step
        cost and the neutral figure over the rows that have both (``None`` under 3 rows).

    Raises:
        smsg_ms.devices.DeviceCountError: a device count MindSpore refuses.
        ValueError: an unknown planner name.
    """
    from ..devices import check_device_count

    check_device_count(devices)
    names = list(planners) + (["expert"] if expert and "expert" not in planners else [])
    bad = [p for p in names if p not in PLANNERS + ("expert",)]
    if bad:
        raise ValueError(f"unknown planner {bad[0]!r} (known: {', '.join(PLANNERS)}, expert)")
    graph, capture_error = None, None
    try:
        from ..graph.capture import capture_network
        graph = capture_network(spec, **options)
    except Exception as exc:
        capture_error = _error(exc)
    expert_options = None
    if expert:
        keys = ("data_parallel", "model_parallel", "pipeline_stage")
        expert_options = dict(zip(keys, expert))
    rows = []
    for name in names:
        if progress:
            progress(name)
        row = run_planner(name, spec, devices, options, hardware=hardware, graph=graph,
                          expert_options=expert_options, timeout=timeout,
                          write_back=write_back)
        if name == "sharding_propagation" and graph is None and not row["ok"]:
            row["error"] += f" (no seed: capture failed: {capture_error})"
        rows.append(row)
    if score_rows and graph is not None:
        _score_rows(rows, spec, devices, hardware, graph, options)
    return {"network": spec, "devices": devices, "hardware": hardware,
            "options": dict(sorted(options.items())), "expert": list(expert) if expert else None,
            "rows": rows, "spearman": spearman(rows)}


def _score_rows(rows, spec, devices, hardware, graph, options) -> None:
    from .score import score

    for row in rows:
        if not row["ok"] or not row["strategies"]:
            continue
        try:
            row["smsg_score"] = score(spec, devices, row["strategies"], hardware=hardware,
                                      graph=graph, per_call=row.get("strategies_per_call"),
                                      out_strategies=row.get("out_strategies"), **options)
        except ImportError as exc:
            row["smsg_score"] = {"error": f"smsg cost model not available: {exc}"}
        except Exception as exc:
            row["smsg_score"] = {"error": _error(exc)}


def spearman(rows) -> float | None:
    """Spearman's ρ (``scipy.stats.spearmanr``) between smsg's predicted step seconds and the
    neutral step seconds, over the rows that have both; ``None`` with fewer than 3 such rows or a
    constant column."""
    from scipy.stats import spearmanr

    pairs = [(r["smsg_score"]["step_seconds"], r["measures"]["step_seconds"]) for r in rows
             if r["ok"] and "step_seconds" in (r.get("smsg_score") or {})]
    if len(pairs) < 3 or len({p[0] for p in pairs}) < 2 or len({p[1] for p in pairs}) < 2:
        return None
    rho = spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
    return float(rho)
