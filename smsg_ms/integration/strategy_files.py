"""Export a plan as MindSpore's strategy checkpoint JSON (``strategy_ckpt_config`` ``load_file``).

Format, as MindSpore 2.10 saves it (``strategy_ckpt_config={"save_file": "x.json"}``, checked in
the dry-run): ``{"current_stage": int, "parallel_strategy_item": {"<PrimName>_<parameter name>":
{"stage": int, "parallel_strategy": [[cuts], ...]}}, "parallel_layout_item": {...}}``. The key names
the primitive type and the first Parameter the operator reads directly; ``device_num`` (the
plan's device count, which ``smsg-ms check`` compares with ``--devices``) is ours: MindSpore's
reader (``strategy_checkpoint_info.cc`` ``from_json``) reads the keys it knows and ignores it; on load, MindSpore gives
that strategy to such operators that have no ``in_strategy`` yet (``mindspore-notes.md``). Operators
that read no Parameter (activations only) cannot be expressed in this format and are left out.
"""
from __future__ import annotations

import json
import os

from ..plan import Plan
from .plan_io import PlanError, check_plan_fits, write_text_atomic


def strategy_ckpt_items(plan: Plan, graph) -> dict[str, dict]:
    """``{"<PrimName>_<param>": {"stage": s, "parallel_strategy": strategy}}`` of ``plan``.

    Args:
        plan: the plan.
        graph: the :class:`~smsg_ms.graph.model.OpGraph` the plan was made for (its fingerprint
            must match); it gives the parameter each primitive reads.

    Raises:
        PlanError: graph of another network, or two planned primitives of one type reading the
            same parameter with different strategies (the format cannot tell them apart).
    """
    check_plan_fits(plan, fingerprint=graph.fingerprint())
    strategies = plan.strategies
    stage_of = {}
    if plan.pipeline:
        stage_of = dict(plan.pipeline.get("stage_of_primitive", {}))
    items: dict[str, dict] = {}
    for op in graph.ops:
        if op.prim_path not in strategies:
            continue
        param = next((n for n in op.inputs if graph.tensors[n].kind == "parameter"), None)
        if param is None:
            continue
        key = f"{op.type}_{param}"
        item = {"stage": int(stage_of.get(op.prim_path, 0)),
                "parallel_strategy": [list(map(int, s)) for s in strategies[op.prim_path]]}
        if key in items and items[key] != item:
            raise PlanError(f"strategy checkpoint key {key} would get two strategies")
        items[key] = item
    return dict(sorted(items.items()))


def strategy_ckpt_json(plan: Plan, graph) -> str:
    """JSON text of the strategy checkpoint (sorted keys, deterministic)."""
    stages = int((plan.pipeline or {}).get("stages", 1))
    data = {"current_stage": stages, "device_num": int(plan.devices),
            "parallel_strategy_item": strategy_ckpt_items(plan, graph)}
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def write_strategy_ckpt(plan: Plan, graph, path: str | os.PathLike):
    """Write :func:`strategy_ckpt_json` atomically to ``path`` (must end in ``.json``: MindSpore
    reads other names as protobuf).

    Raises:
        PlanError: wrong suffix, unwritable folder, or see :func:`strategy_ckpt_items`.
    """
    if not str(path).endswith(".json"):
        raise PlanError(f"{path}: the strategy checkpoint name must end in .json (MindSpore reads "
                        "other names as protobuf)")
    return write_text_atomic(path, strategy_ckpt_json(plan, graph))


def load_context(plan: Plan, path: str | os.PathLike) -> dict:
    """Keys of ``mindspore.set_auto_parallel_context`` that load the exported file in the plan's
    write-back mode (:func:`smsg_ms.integration.writeback.parallel_context`):
    ``{"parallel_mode": ..., ["search_mode": "sharding_propagation",]
    "strategy_ckpt_config": {"load_file": path}}``.

    Raises:
        PlanError: an unknown ``write_back`` in the plan.
    """
    from .writeback import parallel_context

    return {**parallel_context(plan), "strategy_ckpt_config": {"load_file": str(path)}}
