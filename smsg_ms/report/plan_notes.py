"""The lines under the ``plan`` summary's tables that explain a plan in words: the operators it
does not write back and why, the data inputs' ``dataset_strategy``, and a pipelined plan's
largest stage. Nothing is recomputed: each reads the plan's decisions, ``dataset_strategy``,
``input_shapes`` and ``pipeline`` record.
"""
from __future__ import annotations

import re
from collections import OrderedDict

from ..plan import Plan
from ..words import count
from .units import GLUE, glue, wrap

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


def unwritten_counts(plan: Plan) -> "OrderedDict[str, OrderedDict[str, int]]":
    """The decisions the plan does not write back (``shardable`` false), by kind (keys of
    :data:`WHY_NOT_WRITTEN`): their names folded over block instances and call indices
    (:func:`fold_name`), in plan order, each with the count of operators it folds."""
    groups: OrderedDict[str, OrderedDict[str, int]] = OrderedDict()
    for d in plan.decisions:
        if d.shardable:
            continue
        kind = ("Reshape" if d.op_type == "Reshape" else "functional" if "@" in d.name
                else "other")
        names = groups.setdefault(kind, OrderedDict())
        folded = fold_name(d.name)
        names[folded] = names.get(folded, 0) + 1
    return groups


def unwritten_groups(plan: Plan) -> "OrderedDict[str, list[str]]":
    """The folded names of :func:`unwritten_counts`, by kind, each once."""
    return OrderedDict((kind, list(names)) for kind, names in unwritten_counts(plan).items())


def unwritten_lines(plan: Plan, shown: int = 4, width: int | None = None) -> list[str]:
    """``not written back (9 operators, 3 distinct names; ...)`` and two lines per kind: its folded
    names, each with the count of operators it stands for when more than one (``layers.*.
    attention.reshape (x6)``; the first ``shown``, then how many more names and operators),
    and why (:data:`WHY_NOT_WRITTEN`); ``[]`` when all are written. The counts listed add up
    to the operator count of the first line. With ``width`` (columns), each line is folded
    between the listed names (:func:`smsg_ms.report.units.wrap`), never inside a name and its
    count."""
    groups = unwritten_counts(plan)
    total = sum(sum(names.values()) for names in groups.values())
    if not total:
        return []
    distinct = sum(len(names) for names in groups.values())
    under = "" if distinct == total else f", {count(distinct, 'distinct name')}"
    lines = [f"not written back ({count(total, 'operator')}{under}; their cost is in the "
             "totals):"]
    for kind, names in groups.items():
        items = [glue(f"{name} (x{k})") if k > 1 else name for name, k in names.items()]
        rest = list(names.values())[shown:]
        listed = ", ".join(items[:shown]) + (
            f" and {count(len(rest), 'more name', 'more names')} "
            f"({count(sum(rest), 'operator')})" if rest else "")
        lines += [f"  {listed}", f"    why: {WHY_NOT_WRITTEN[kind]}"]
    if width is None:
        return [line.replace(GLUE, " ") for line in lines]
    return [folded for line in lines
            for folded in wrap(line.lstrip(), width, indent=line[:len(line) - len(line.lstrip())],
                               hanging=" " * (len(line) - len(line.lstrip()) + 2))]


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
    dimension at most: :mod:`smsg_ms.planner.data_inputs`). A pipelined plan's input shapes
    are one micro-batch's (its options hold the global batch): the line says so."""
    if plan.dataset_strategy is None:
        return ["data inputs: full_batch (every device loads the whole batch)"]
    cuts_text = "".join("(" + ",".join(str(c) for c in cuts) + ")"
                        for cuts in plan.dataset_strategy)
    head = (f"data inputs: dataset_strategy {cuts_text}, each "
            "input's first reader's layout:")
    shapes = plan.input_shapes or []
    lines = [head]
    record = plan.pipeline or {}
    micro = (" per micro-batch" if int(record.get("micro_batches", 1)) > 1 else "")
    for i, cuts in enumerate(plan.dataset_strategy):
        shape = shapes[i] if i < len(shapes) else None
        shown = "(" + ", ".join(str(d) for d in shape) + ")" if shape else "?"
        lines.append(f"  input {i} {shown}{micro}: {_cut_text(cuts, shape)}")
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


def unsharded_lines(plan: Plan, width: int | None = None) -> list[str]:
    """Why a pipelined plan with optimizer sharding keeps a parameter read on two stages whole
    (:func:`smsg_ms.planner.stages.unsharded_across_stages`), wrapped to ``width``; ``[]``
    where none is."""
    from ..planner.stages import UNSHARDED_WHY, unsharded_across_stages

    rec = plan.pipeline or {}
    whole = unsharded_across_stages(rec.get("shared_parameters"),
                                    bool(rec.get("optimizer_sharding")))
    if not whole:
        return []
    text = f"optimizer sharding keeps {', '.join(whole)} whole: {UNSHARDED_WHY}"
    return wrap(text, width) if width else [text]

