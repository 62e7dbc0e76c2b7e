"""The lines under the ``plan`` summary's tables that explain a plan in words: the operators it
does not write back and why, the data inputs' ``dataset_strategy``, and a pipelined plan's
largest stage. Nothing is recomputed: each reads the plan's decisions, ``dataset_strategy``,
``input_shapes`` and ``pipeline`` record.
"""
from __future__ import annotations

import re
from collections import OrderedDict

from ..plan import Plan

#: why an operator is not written back, by kind (:attr:`smsg_ms.plan.OpDecision.shardable`)
WHY_NOT_WRITTEN = {
    "Reshape": "MindSpore lays a Reshape out from its input and redistributes around it",
    "functional": "functional calls (no Primitive attribute to shard()); MindSpore lays them "
                  "out from their inputs",
    "other": "MindSpore sets their layout itself",
}


def fold_name(name: str) -> str:
    """``layers.3.attention.reshape#1`` → ``layers.*.attention.reshape`` (instances and call
    indices folded)."""
    return re.sub(r"\.\d+(?=\.)", ".*", name.split("#")[0])


def unwritten_groups(plan: Plan) -> "OrderedDict[str, list[str]]":
    """The decisions the plan does not write back (``shardable`` false), by kind (keys of
    :data:`WHY_NOT_WRITTEN`): their names folded over block instances and call indices, in
    plan order, each once."""
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for d in plan.decisions:
        if d.shardable:
            continue
        kind = ("Reshape" if d.op_type == "Reshape" else "functional" if "@" in d.name
                else "other")
        names = groups.setdefault(kind, [])
        folded = fold_name(d.name)
        if folded not in names:
            names.append(folded)
    return groups


def unwritten_lines(plan: Plan, shown: int = 4) -> list[str]:
    """``not written back (17 operators ...)`` and two lines per kind: its names (the first
    ``shown``, then a count) and why (:data:`WHY_NOT_WRITTEN`); ``[]`` when all are written."""
    total = sum(1 for d in plan.decisions if not d.shardable)
    if not total:
        return []
    lines = [f"not written back ({total} operator{'s' if total > 1 else ''}; their cost is "
             "in the totals):"]
    for kind, names in unwritten_groups(plan).items():
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more"
                                             if len(names) > shown else "")
        lines += [f"  {listed}", f"    why: {WHY_NOT_WRITTEN[kind]}"]
    return lines


def _cut_text(cuts, shape) -> str:
    cut = [(i, int(c)) for i, c in enumerate(cuts) if int(c) > 1]
    if not cut:
        return "not cut: every device reads the whole input"
    i, c = cut[0]
    dim = "the batch dimension" if i == 0 else f"dimension {i}"
    size = shape[i] if shape and i < len(shape) else None
    each = f" ({size // c} of {size} per device)" if isinstance(size, int) and size % c == 0 \
        else ""
    return f"{dim} cut {c} ways{each}"


def dataset_lines(plan: Plan) -> list[str]:
    """How the data inputs reach the devices: ``full_batch`` (every device loads the whole
    batch) or the ``dataset_strategy`` and, per input, what it cuts (MindSpore takes one cut
    dimension at most: :mod:`smsg_ms.planner.data_inputs`)."""
    if plan.dataset_strategy is None:
        return ["data inputs: full_batch (every device loads the whole batch)"]
    cuts_text = "".join("(" + ",".join(str(c) for c in cuts) + ")"
                        for cuts in plan.dataset_strategy)
    head = (f"data inputs: dataset_strategy {cuts_text}, each "
            "input's first reader's layout:")
    shapes = plan.input_shapes or []
    lines = [head]
    for i, cuts in enumerate(plan.dataset_strategy):
        shape = shapes[i] if i < len(shapes) else None
        shown = "(" + ", ".join(str(d) for d in shape) + ")" if shape else "?"
        lines.append(f"  input {i} {shown}: {_cut_text(cuts, shape)}")
    return lines


def largest_stage(plan: Plan) -> tuple[int, float] | None:
    """``(stage, memory bytes per device)`` of a pipelined plan's stage needing the most memory
    (the pipeline record's ``stage_memory_bytes``; the first such stage on a tie), ``None``
    without them."""
    memory = (plan.pipeline or {}).get("stage_memory_bytes") or []
    if not memory:
        return None
    stage = max(range(len(memory)), key=lambda s: (float(memory[s]), -s))
    return stage, float(memory[stage])
