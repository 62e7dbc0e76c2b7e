"""Write a plan back into a live network: ``Primitive.shard(in_strategy)`` by primitive path.

Primitives are found with :func:`smsg_ms.graph.capture.tag_primitives` (``cell_path.attr``). A plan
made offline for the bare network also applies to the same network inside wrappers
(``TrainOneStepCell(WithLossCell(net))`` names it ``network._backbone.fc1.matmul``): the plan's paths
are matched under the one cell prefix that holds all of them.
"""
from __future__ import annotations

import os
from typing import Any

from ..plan import Plan
from .plan_io import PlanError, check_plan_fits, load_plan
from .kept_layouts import context_stage_devices, fit_kept_layouts
from .writeback import apply_plan_context


def _prefix_candidates(plan_paths: list[str], net_paths: list[str]) -> list[str]:
    first = plan_paths[0]
    out = []
    for p in net_paths:
        if p == first:
            out.append("")
        elif p.endswith("." + first):
            out.append(p[: -len(first)])
    return sorted(set(out), key=len)


def resolve_paths(plan_paths: list[str], prims: dict[str, Any]) -> dict[str, str]:
    """Map each plan path to a path of ``prims`` (same path, or under one common cell prefix).

    Raises:
        PlanError: some plan path has no primitive under any single prefix.
    """
    if not plan_paths:
        return {}
    net_paths = list(prims)
    best_missing: list[str] = sorted(plan_paths)
    for prefix in _prefix_candidates(plan_paths, net_paths):
        missing = [p for p in plan_paths if prefix + p not in prims]
        if not missing:
            return {p: prefix + p for p in plan_paths}
        if len(missing) < len(best_missing):
            best_missing = missing
    shown = ", ".join(best_missing[:3]) + (" ..." if len(best_missing) > 3 else "")
    raise PlanError(f"the plan does not fit this network: {len(best_missing)} of "
                    f"{len(plan_paths)} planned primitives are not in it ({shown})")


def clear_strategies(prims: dict) -> list[str]:
    """Delete ``in_strategy``/``out_strategy`` (or ``in_layout``/``out_layout``, ``shard()`` given
    ``Layout`` objects) that the network's own ``shard()`` calls set.

    A plan owns the strategy of every primitive: a leftover ``out_strategy`` (mindformers sets
    them) contradicts the plan's ``in_strategy`` and MindSpore rejects the pair.

    A primitive marked ``self_define_shard`` (mindformers' ``Morph`` embeddings and linears,
    ``parallel_core/training_graph/tensor_parallel/layers.py``) keeps its layout: MindSpore
    accepts only a layout there and, without one, stops at "For self define shard op ..., it
    should not reach this function" (``frontend/parallel/ops_info/self_define_shard_info.cc``).

    Returns:
        The paths that carried one, sorted.
    """
    cleared = []
    for path, prim in sorted(prims.items()):
        if prim.attrs.get("self_define_shard"):
            continue
        had = False
        for attr in ("in_strategy", "out_strategy", "in_layout", "out_layout"):
            if attr in prim.attrs:
                prim.del_prim_attr(attr)
                had = True
        if had:
            cleared.append(path)
    return cleared


#: MindSpore's attribute of a primitive whose layout only the network sets
SELF_DEFINE_SHARD = "self_define_shard"


#: primitives for which MindSpore's semi-auto default does not exist, so the network's own
#: ``shard()`` stays when the plan sets none: mindformers' ``OneHotExt`` (tuple inputs: "tuple
#: in tuple input does not support GenerateBatchParallelStrategy", ``step_parallel_utils.cc``)
NO_DEFAULT_LAYOUT = frozenset({"OneHotExt"})


def fixed_by_network(prim) -> bool:
    """Does the network fix this primitive's layout itself (prim attr ``self_define_shard``,
    e.g. mindformers' rotary embedding and its ``Morph`` linear layers)? MindSpore then accepts
    only the ``Layout`` the network configures: ``SelfDefineShardInfo::CheckStrategy`` refuses
    any strategy ("only support config layout rather than strategy") and, with the layout
    cleared, nothing replaces it ("it should not reach this function"),
    ``frontend/parallel/ops_info/self_define_shard_info.cc``."""
    return prim.attrs.get(SELF_DEFINE_SHARD) is True


def replace_strategies(prims: dict, strategies: dict,
                       out_strategies: dict | None = None) -> list[str]:
    """Put a plan's ``strategies`` (``{path: in_strategy}``, every path in ``prims``) on the
    primitives: each one the plan sets loses the network's own ``shard()`` (a leftover
    ``out_strategy`` would contradict the plan's) and gets the plan's; a primitive
    :func:`fixed_by_network` keeps its layout and gets nothing; a primitive the plan does not
    set loses it too (the plan predicts MindSpore's default there), unless MindSpore has no
    default for its type (:data:`NO_DEFAULT_LAYOUT`), whose own ``shard()`` stays. In
    (semi-)auto parallel, a kept layout whose device matrix is not one stage's device count is
    fitted to it (:func:`smsg_ms.integration.kept_layouts.fit_kept_layouts`).
    ``out_strategies`` (``{path: out_strategy}``, a subset of ``strategies``' paths): the
    primitives whose output layout the plan sets too (a row-parallel MatMul's ReduceScatter
    under sequence parallel, ``ops_info/matmul_info.cc`` ``CheckOutputStrategy``).

    Returns:
        The paths whose own ``shard()`` was replaced, sorted.
    """
    owned = {path: prims[path] for path in sorted(strategies)
             if not fixed_by_network(prims[path])}
    # elsewhere the network's own shard() gives way to MindSpore's default, which is what the
    # plan predicts
    cleared = clear_strategies({path: prim for path, prim in prims.items()
                                if path in owned or not (fixed_by_network(prim)
                                                         or prim.name in NO_DEFAULT_LAYOUT)})
    outs = out_strategies or {}
    for path, prim in owned.items():
        in_strategy = tuple(tuple(int(c) for c in cuts) for cuts in strategies[path])
        if path in outs:
            prim.shard(in_strategy, tuple(tuple(int(c) for c in cuts) for cuts in outs[path]))
        else:
            prim.shard(in_strategy)
    stage_devices = context_stage_devices()
    if stage_devices:   # a kept layout written for another device count (GLM2's tile_kv)
        fit_kept_layouts(prims, stage_devices)
    return cleared


def apply_strategies(net, strategies: dict[str, list[list[int]]],
                     op_types: dict[str, str] | None = None,
                     out_strategies: dict[str, list[list[int]]] | None = None) -> dict[str, tuple]:
    """Call ``.shard()`` on every primitive of ``net`` named in ``strategies``.

    Args:
        net: ``mindspore.nn.Cell`` (not compiled yet).
        strategies: ``{primitive path: in_strategy}``, one cut tuple per tensor input.
        op_types: optional ``{primitive path: primitive name}``; a different primitive at that
            path means the plan is for another network.
        out_strategies: optional ``{primitive path: out_strategy}`` (:attr:`Plan.out_strategies`).

    Returns:
        ``{path in net: strategy applied}``, sorted by path.

    Raises:
        PlanError: a path is missing or names another kind of primitive.
    """
    from ..graph.capture import tag_primitives

    prims = tag_primitives(net)
    mapping = resolve_paths(sorted(strategies), prims)
    for path, net_path in mapping.items():
        want = (op_types or {}).get(path)
        got = prims[net_path].name
        if want and want != got:
            raise PlanError(f"the plan does not fit this network: '{path}' is a {want} in the "
                            f"plan but a {got} in the network")
    wanted = {mapping[path]: strategies[path] for path in mapping}
    outs = {mapping[path]: out for path, out in (out_strategies or {}).items() if path in mapping}
    replace_strategies(prims, wanted, outs)
    return {net_path: tuple(tuple(int(c) for c in cuts) for cuts in strategy)
            for net_path, strategy in sorted(wanted.items())
            if not fixed_by_network(prims[net_path])}


def _context_devices() -> int | None:
    import mindspore as ms

    if ms.get_auto_parallel_context("parallel_mode") in ("stand_alone", "data_parallel"):
        return None
    return int(ms.get_auto_parallel_context("device_num"))


def apply_plan(net, plan: Plan | str | os.PathLike, *, inputs=None, devices: int | None = None,
               graph=None, set_context: bool = True) -> Plan:
    """Apply a plan (object or file) to ``net``: check it fits, shard every planned primitive.

    Args:
        net: the network (``nn.Cell``), possibly inside training wrappers.
        plan: a :class:`Plan` or the path of a plan file.
        inputs: example inputs (global shapes); compared with the plan's input shapes.
        devices: device count to compare with; default the auto-parallel context's
            ``device_num`` when a parallel mode is set.
        graph: the captured :class:`OpGraph` of ``net`` (if at hand); its fingerprint must be
            the plan's.
        set_context: also put MindSpore in semi_auto_parallel with the plan's data layout
            (:func:`smsg_ms.integration.writeback.apply_plan_context`).

    Returns:
        The plan applied.

    Raises:
        PlanError: unreadable or edited file, other network (fingerprint, missing paths or other
            primitive types), other device count or input shapes, a pipelined plan whose stage
            count is not MindSpore's ``pipeline_stages``.

    Pipelined plans (``plan.pipeline["stages"] > 1``): ``pipeline_stages`` must be in MindSpore's
    context before ``net`` is built (``smsg_ms.set_auto_parallel_context(**pipeline_context(
    plan.pipeline))``, :mod:`smsg_ms.integration.pipeline`); the blocks get ``pipeline_stage`` and
    ``recompute()``; train with ``pipeline_train_cell(net_with_loss, optimizer, plan.pipeline)``
    (``PipelineCell`` + ``build_train_network``), fed the global batch (``micro_batches`` times
    the plan's micro-batch).
    """
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    elif plan.content_hash and plan.content_hash != plan.compute_hash():
        raise PlanError("plan content hash mismatch: the plan was changed after sealing")
    stages = int(plan.pipeline.get("stages", 1)) if plan.pipeline else 1
    if stages > 1:
        _check_pipeline_context(plan, set_context)
    if devices is None:
        devices = _context_devices()
    shapes = None if inputs is None else [list(getattr(t, "shape", ())) for t in inputs]
    check_plan_fits(plan, devices=devices, input_shapes=shapes,
                    fingerprint=None if graph is None else graph.fingerprint())
    types = {d.name: d.op_type for d in plan.decisions if d.shardable and d.strategy}
    apply_strategies(net, plan.strategies, types, plan.out_strategies)
    if stages > 1:
        mark_pipeline_cells(net, plan.pipeline)
    if set_context:
        apply_plan_context(plan)
    return plan


def _check_pipeline_context(plan: Plan, set_context: bool) -> None:
    """A pipelined plan needs ``pipeline_stages`` (and the optimizer-sharding flag) set in
    MindSpore's context *before* the network is built (mindformers reads it while building):
    set it with :func:`smsg_ms.set_auto_parallel_context`
    (``**smsg_ms.integration.pipeline.pipeline_context(plan.pipeline)``) first."""
    import mindspore as ms

    from .pipeline import check_pipeline, pipeline_context

    check_pipeline(plan.pipeline, plan.devices)
    want = pipeline_context(plan.pipeline)
    got = int(ms.get_auto_parallel_context("pipeline_stages"))
    if got != want["pipeline_stages"]:
        raise PlanError(f"plan has {want['pipeline_stages']} pipeline stages but MindSpore's "
                        f"context has pipeline_stages={got}: call smsg_ms.set_auto_parallel_"
                        f"context(pipeline_stages={want['pipeline_stages']}, ...) before building "
                        "the network")
    if set_context:
        ms.set_auto_parallel_context(**want)


def mark_pipeline_cells(net, pipeline: dict) -> dict[str, int]:
    """:func:`smsg_ms.integration.pipeline.mark_cells` on the cell of ``net`` that holds the
    record's blocks (the bare network, or the same network inside training wrappers).

    Raises:
        PlanError: no cell of ``net`` holds every block the record names.
    """
    from .pipeline import mark_cells

    names = sorted(set(pipeline.get("stage_of_block", {})) | set(pipeline.get("recompute", {})))
    cells = dict(net.cells_and_names())
    prefixes = sorted({path[: -len(names[0])] for path in cells
                       if path == names[0] or path.endswith("." + names[0])}, key=len)
    for prefix in prefixes:
        if all(prefix + n in cells for n in names):
            holder = cells[prefix[:-1]] if prefix else net
            return {prefix + k: v for k, v in mark_cells(holder, pipeline).items()}
    raise PlanError(f"the plan does not fit this network: no cell holds the pipeline blocks "
                    f"({', '.join(names[:3])} ...)")
