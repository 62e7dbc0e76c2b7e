"""Tables of a plan (``rich``): the ``plan`` summary (strategies per primitive, predicted totals,
pipeline stages). The per-operator ``explain`` view is :mod:`smsg_ms.report.explain_view`.

Seconds get a unit per value, bytes one unit per table (:mod:`smsg_ms.report.units`). Nothing here
recomputes costs: it renders what the plan holds (decisions' strategies; the plan's ``totals``,
``input_shapes`` and ``pipeline`` record).
"""
from __future__ import annotations

import re
from collections import OrderedDict

from ..plan import OpDecision, Plan
from ..words import count
from .units import byte_unit, fmt_bytes, fmt_seconds, glue, wrap

__all__ = ["count", "fmt_strategy", "fmt_candidate", "fmt_seconds", "fmt_bytes", "relative_name",
           "instance_label", "summary_rows", "totals_rows", "chosen_rows", "stage_plan_rows",
           "pipeline_rows", "print_summary",
           "print_pipeline"]


def fmt_strategy(strategy, out=None) -> str:
    """``[[8, 1], [1, 1]]`` → ``(8,1)(1,1)``; ``None`` → ``-``; with an out_strategy ``out``
    (``[[8, 1]]``) → ``(2,4)(4,1)→(8,1)``."""
    if not strategy:
        return "-"
    text = "".join("(" + ",".join(str(c) for c in cuts) + ")" for cuts in strategy)
    return text + "→" + fmt_strategy(out) if out else text


def block_pattern(block: str) -> re.Pattern:
    """``layers.*`` → regex matching ``layers.<index>.`` at the start of a path."""
    return re.compile("^" + re.escape(block).replace(r"\*", r"(\d+|[^.]+)") + r"\.")


def relative_name(decision: OpDecision) -> tuple[str, str | None]:
    """``(name inside its block, block instance index)``; ``(name, None)`` outside blocks."""
    if not decision.block:
        return decision.name, None
    match = block_pattern(decision.block).match(decision.name)
    if not match:
        return decision.name, None
    return decision.name[match.end():], match.group(1)


def group_by_block(plan: Plan) -> "OrderedDict[str, list[OpDecision]]":
    """Decisions grouped by block (``None`` key → ``""``), in first-appearance order."""
    groups: OrderedDict[str, list[OpDecision]] = OrderedDict()
    for d in plan.decisions:
        groups.setdefault(d.block or "", []).append(d)
    return groups


def is_memory_key(key: str) -> bool:
    return "memory" in key or key.endswith("bytes")


def instance_label(block: str, instances: list[str], every: list[str] | None = None) -> str:
    """The block name with its ``*`` replaced by ``instances`` (block instance ids): numeric ids
    as ranges, ``layers.0–6`` / ``layers.0–2,5``; ``block`` itself when ``instances`` are
    ``every`` instance of the block (and there are several)."""
    if every is not None and len(every) > 1 and sorted(instances) == sorted(every):
        return block
    numbers = sorted(int(i) for i in instances if i.isdigit())
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a}–{b}" if b > a else str(a) for a, b in runs]
    parts += [i for i in instances if not i.isdigit()]
    return block.replace("*", ",".join(parts), 1)


def summary_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """``(block, primitive, strategy)`` rows: one per distinct primitive of each repeated block
    (``layers.*``). A primitive whose strategy differs between instances gets one row per
    strategy, the block column naming its instances (``layers.0–6``, primitive ``add_ffn
    (x7)``; ``layers.7``, ``add_ffn``)."""
    rows = []
    for block, decisions in group_by_block(plan).items():
        variants: OrderedDict[str, OrderedDict[str, list[str]]] = OrderedDict()
        every: list[str] = []
        for d in decisions:
            rel, inst = relative_name(d) if block else (d.name, None)
            if inst is not None and inst not in every:
                every.append(inst)
            if d.shardable:
                variants.setdefault(rel, OrderedDict()).setdefault(
                    fmt_strategy(d.strategy, plan.out_strategies.get(d.name)), []).append(inst)
        for rel, by_strategy in variants.items():
            for strategy, insts in by_strategy.items():
                if not block:
                    rows.append(("(outside blocks)", rel, strategy))
                    continue
                where = instance_label(block, [i for i in insts if i is not None], every)
                if len(by_strategy) == 1 and where == block:
                    rows.append((block, rel, strategy))
                else:
                    rows.append((where, rel if len(insts) == 1 else f"{rel} (x{len(insts)})",
                                 strategy))
    return rows


#: Readable names of breakdown and totals keys (others are shown as they are).
LABELS = {
    "compute": "computation",
    "grad_sync": "gradient sync",
    "redistribution": "redistribution in",
    "redistribution_into_loss": "redistribution into loss",
    "redistribution_seconds": "redistribution",
    "activation_bytes": "activations",
    "parameter_bytes": "parameters",
    "gradient_bytes": "gradients",
    "optimizer_bytes": "optimizer state",
    "memory_bytes": "memory per device",
    "step_seconds": "step (predicted)",
    "data_parallel_step_seconds": "pure data parallel: step",
    "data_parallel_memory_bytes": "pure data parallel: memory",
    "relative_to_data_parallel": "step / pure data parallel",
    "pipeline_step_seconds": "pipeline super-step",
    "micro_batch_step_seconds": "step (stage plan)",
    "lower_bound_seconds": "step: proven lower bound",
    "optimality_gap": "optimality gap (time limit)",
    "update": "optimizer update",
}


#: a pipelined plan's stage-plan rows (:func:`stage_plan_rows`) whose label differs from a
#: single-stage plan's: its step counts the gradient sync and the optimizer update, unlike the
#: pipeline table's per-stage time (``stage_seconds``; both are added once per step); the
#: optimizer update (``CostModel.breakdown``'s ``update``, :func:`smsg_ms.cost.kernels.
#: update_seconds`) is the time of one update of every weight the stage plan holds, once per
#: training step, not per micro-batch
STAGE_PLAN_LABELS = {"micro_batch_step_seconds": "step, with gradient sync and optimizer update",
                     "memory_bytes": "memory per device",
                     "update": "optimizer update (once per step)"}
#: the pipeline table's column: a stage's forward and backward of one micro-batch
STAGE_TIME_COLUMN = "time / micro-batch\n(no gradient sync)"


#: Order of the totals rows: the step first, then time by kind, then memory.
TOTALS_ORDER = ("step_seconds", "lower_bound_seconds", "optimality_gap", "pipeline_step_seconds", "micro_batch_step_seconds", "relative_to_data_parallel",
                "data_parallel_step_seconds",
                "compute", "AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "grad_sync",
                "redistribution_seconds", "update", "memory_bytes", "parameter_bytes", "gradient_bytes",
                "optimizer_bytes", "activation_bytes", "data_parallel_memory_bytes")


def _total_order(key: str) -> tuple:
    return (TOTALS_ORDER.index(key), key) if key in TOTALS_ORDER else (len(TOTALS_ORDER), key)


def stage_devices(plan: Plan) -> int:
    """Devices the plan's strategies are for: one stage's (``devices_per_stage``) in a pipelined
    plan, else all of them."""
    return int((plan.pipeline or {}).get("devices_per_stage") or plan.devices)


def data_parallel_missing(plan: Plan) -> str:
    """Why the plan has no pure data-parallel baseline: ``n/a: batch 6 of input 0 not divisible
    by 8 devices`` (MindSpore's batch parallel cuts every data input's first dimension
    ``devices``-way, see ``planner.data_parallel_choice``), else ``n/a: batch-parallel
    strategies give no valid plan (infinite predicted cost)`` (an operator without a
    batch-parallel strategy, or a redistribution between two the cost model cannot do)."""
    devices = stage_devices(plan)
    for i, shape in enumerate(plan.input_shapes or []):
        if shape and isinstance(shape[0], int) and shape[0] % devices:
            of = f" of input {i}" if len(plan.input_shapes) > 1 else ""
            where = " of a stage" if plan.pipeline else ""
            return f"n/a: batch {shape[0]}{of} not divisible by {count(devices, 'device')}{where}"
    return "n/a: batch-parallel strategies give no valid plan (infinite predicted cost)"


def totals_rows(plan: Plan) -> list[tuple[str, str]]:
    """``(quantity, value)`` rows of the plan's predicted totals, per device and one training
    step. A single-stage plan's: seconds (the cost model's breakdown kinds: computation, each
    collective kind, redistribution ...) each in its own unit; bytes per device (keys naming
    memory or bytes) all in one unit; ratios (keys naming ``relative``). The step cost
    relative to pure data parallel is ``step_seconds / data_parallel_step_seconds``, added when
    the plan does not hold it. A missing (``None``) data-parallel value says why
    (:func:`data_parallel_missing`).

    A pipelined plan's are its chosen configuration's alone: the step (the 1F1B super-step,
    ``totals["step_seconds"]``) and the memory per device (its largest stage's,
    ``pipeline["stage_memory_bytes"]``); the parts of its stage plan are
    :func:`stage_plan_rows`."""
    if plan.pipeline:
        return chosen_rows(plan)
    rows = _rows(plan, [k for k in plan.totals], LABELS)
    rows = _with_hidden_grad_sync(plan, rows)
    step, dp = plan.totals.get("step_seconds"), plan.totals.get("data_parallel_step_seconds")
    if ("relative_to_data_parallel" not in plan.totals and _is_number(step)
            and _is_number(dp) and dp > 0):
        rows.append((LABELS["relative_to_data_parallel"], f"{step / dp:.3f}"))
    return rows


#: the chosen configuration's step row of a pipelined plan
SUPER_STEP_LABEL = "step (1F1B super-step)"


def chosen_rows(plan: Plan) -> list[tuple[str, str]]:
    """A pipelined plan's chosen configuration: ``step (1F1B super-step)`` (the plan's
    ``step_seconds``, which the search minimised, :func:`smsg_ms.cost.pipeline.
    super_step_seconds`) and the memory per device of its largest stage
    (:func:`largest_stage_label`; from the pipeline record's ``stage_memory_bytes``, after
    recompute and optimizer sharding)."""
    from .plan_notes import largest_stage

    rows = [(SUPER_STEP_LABEL, fmt_seconds(plan.totals.get("step_seconds")))]
    found = largest_stage(plan)
    if found is not None:
        stage, memory = found
        rows.append((largest_stage_label(stage, plan.pipeline["stages"]), fmt_bytes(memory)))
    return rows


#: keys of a pipelined plan's totals that are not its stage plan's parts
_CHOSEN_KEYS = ("step_seconds", "pipeline_step_seconds")


def stage_plan_rows(plan: Plan) -> list[tuple[str, str]]:
    """A pipelined plan's stage plan, the parts behind its configuration: the operator-level
    plan of the whole network on one stage's devices for one micro-batch, before pipelining,
    recompute and optimizer sharding (:mod:`smsg_ms.planner.stages`): its step with the
    gradient sync and the optimizer update, that step by kind, its memory per device by kind
    and the pure data-parallel baseline (:data:`STAGE_PLAN_LABELS`, else :data:`LABELS`);
    ``[]`` for a single-stage plan."""
    if not plan.pipeline:
        return []
    keys = [k for k in plan.totals if k not in _CHOSEN_KEYS]
    labels = {**LABELS, **STAGE_PLAN_LABELS}
    rows = _with_hidden_grad_sync(plan, _rows(plan, keys, labels))
    return _with_sharded(plan, rows, keys, labels)


def _with_sharded(plan: Plan, rows: list[tuple[str, str]], keys: list[str],
                  labels: dict) -> list[tuple[str, str]]:
    """Under optimizer sharding, after each memory kind it divides (parameters, optimizer state;
    gradients from level2) a row of that kind after sharding: the per-operator values of
    :func:`smsg_ms.report.optimizer_shards.sharded_memory` summed (what ``explain`` shows per
    operator), in the table's byte unit."""
    from .optimizer_shards import DIVIDED, sharded_total, sharding_level

    level = sharding_level(plan)
    if level is None:
        return rows
    unit = byte_unit([plan.totals[k] for k in keys if is_memory_key(k)
                      and _is_number(plan.totals[k])])
    out = []
    for row in rows:
        out.append(row)
        for kind in DIVIDED[level]:
            if kind in keys and row[0] == labels.get(kind, kind):
                out.append((f"{row[0]}, optimizer-sharded ({level})",
                            fmt_bytes(sharded_total(plan, kind), unit)))
    return out


def _rows(plan: Plan, keys: list[str], labels: dict) -> list[tuple[str, str]]:
    """``(label, value)`` rows of the totals ``keys`` in :data:`TOTALS_ORDER`: seconds each in
    its unit, bytes all in one unit, ratios and the optimality gap as numbers; a missing value
    says why."""
    flat: list[tuple[str, str, object]] = []
    for key in sorted(keys, key=_total_order):
        value = plan.totals[key]
        if isinstance(value, dict):
            flat += [(key, f"{labels.get(key, key)}.{sub}", value[sub]) for sub in sorted(value)
                     if isinstance(value[sub], (int, float))]
        else:
            flat.append((key, labels.get(key, key), value))
    unit = byte_unit([v for k, _, v in flat if is_memory_key(k) and _is_number(v)])
    rows = []
    for key, label, value in flat:
        if not _is_number(value):
            missing = data_parallel_missing(plan) if "data_parallel" in key else "n/a"
            rows.append((label, missing if value is None else str(value)))
        elif "relative" in key:
            rows.append((label, f"{float(value):.3f}"))
        elif key == "optimality_gap":
            rows.append((label, f"{100 * float(value):.2f} %"))
        else:
            rows.append((label, fmt_bytes(value, unit) if is_memory_key(key)
                         else fmt_seconds(value)))
    return rows


#: the totals row of the gradient synchronisation the backward pass overlaps
OVERLAPPED_LABEL = "gradient sync, overlapped with backward"


def grad_sync_collectives(plan: Plan) -> str:
    """The plan's gradient synchronisation as collectives: ``1 AllReduce (2.000 KiB)``, per kind
    the count of the decisions' ``grad_sync`` collectives and the bytes of their tensors (whole
    tensors, before ring volumes; MindSpore fuses them into buckets,
    :mod:`smsg_ms.cost.overlap`); ``""`` when there are none."""
    by_kind: dict[str, list[float]] = {}
    for d in plan.decisions:
        for c in d.collectives:
            if c.get("phase") == "grad_sync":
                by_kind.setdefault(c["kind"], []).append(float(c.get("bytes", 0)))
    unit = byte_unit([sum(v) for v in by_kind.values()])
    return ", ".join(f"{count(len(v), kind)} ({fmt_bytes(sum(v), unit)})"
                     for kind, v in sorted(by_kind.items()))


def _with_hidden_grad_sync(plan: Plan, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The gradient sync row is the part the backward pass does not hide (the cost model's
    overlap, :mod:`smsg_ms.cost.overlap`, in a single-stage plan and in a pipelined plan's stage
    plan alike): it reads ``gradient sync (exposed)`` in both. A single-stage plan's is followed by a
    row naming the collectives it overlaps, so a ``0 s`` is not read as no synchronisation; a
    pipelined plan synchronises after its last micro-batch, not overlapped (the super-step
    counts it whole, :mod:`smsg_ms.cost.pipeline`): no such row."""
    label = LABELS["grad_sync"]
    present = grad_sync_collectives(plan)
    out = []
    for row in rows:
        if row[0] == label:
            out.append((row[0].replace(label, f"{label} (exposed)", 1), row[1]))
            if present and not plan.pipeline:
                out.append((OVERLAPPED_LABEL, present))
        else:
            out.append(row)
    return out


#: the totals row of a pipelined plan's memory: its largest stage's (the one that must fit);
#: stages are numbered from 0, as in the stage table
LARGEST_STAGE_LABEL = "memory per device (stage {stage}, the largest of {stages})"


def largest_stage_label(stage: int, stages: int) -> str:
    """The memory row's label of a pipelined plan: :data:`LARGEST_STAGE_LABEL`, or plain
    ``memory per device`` for one stage (nothing to choose from)."""
    if int(stages) <= 1:
        return LABELS["memory_bytes"]
    return LARGEST_STAGE_LABEL.format(stage=stage, stages=int(stages))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fitted_title(title: str, width: int) -> tuple[str, int]:
    """``(title folded into lines of at most width columns, its widest line)``: folded between
    phrases (:func:`~smsg_ms.report.units.wrap`; a :func:`~smsg_ms.report.units.glue`-d phrase
    stays on one line), the table as wide as that line so rich folds it no further."""
    lines = wrap(title, width)
    return "\n".join(lines), max(len(line) for line in lines)


def shape_text(plan: Plan) -> str:
    """`` (batch 8, seq 512, layers 2, ...)``: the shape ``plan`` was planned for
    (:func:`smsg_ms.cli_options.network_shape` of its network and options: the command line's
    network options the network takes, given or at their defaults; ``batch`` the global
    batch), ``""`` when the network has none of them."""
    from ..cli_options import network_shape

    shape = network_shape(plan.network, plan.options)
    return (" (" + ", ".join(glue(f"{k.replace('_', '-')} {v}") for k, v in shape.items()) + ")"
            if shape else "")


def print_summary(plan: Plan, console) -> None:
    """Print the ``plan`` command's summary to a ``rich.console.Console``: its title names the
    network, the shape planned for (:func:`shape_text`), the devices and the hardware."""
    from rich.table import Table

    title, width = fitted_title(f"{plan.network}{shape_text(plan)}: "
                                f"{count(plan.devices, 'device')}, {plan.hardware}",
                                console.width)
    table = Table(title=title, min_width=width)
    table.add_column("block", overflow="fold")
    table.add_column("primitive", overflow="fold")
    table.add_column("strategy", no_wrap=True)
    for block, primitive, strategy in summary_rows(plan):
        # a space after each comma of an instance list lets it wrap between numbers at 80
        # columns (layers.0–5, 8, 10–12) instead of inside one
        table.add_row(block.replace(",", ", "), primitive, strategy)
    console.print(table)
    title = "predicted totals (per device, one training step)"
    if plan.pipeline:
        title = ("predicted totals of the chosen configuration "
                 f"({glue('per device,')} {glue('one training step)')}")
    _print_rows(console, title, totals_rows(plan))
    if plan.pipeline:
        _print_rows(console, stage_plan_title(plan), stage_plan_rows(plan))
    from .plan_notes import dataset_lines, unwritten_lines
    for line in unwritten_lines(plan, width=console.width) + dataset_lines(plan):
        console.print(line, markup=False, highlight=False)
    print_pipeline(plan, console)
    console.print(f"plan hash: {plan.content_hash}")


def stage_plan_title(plan: Plan) -> str:
    """The title of a pipelined plan's stage-plan table (:func:`stage_plan_rows`): what the
    stage plan is, so that its rows are not read as the chosen configuration's."""
    rec = plan.pipeline
    size = rec.get("micro_batch_size")
    batch = f"one micro-batch of {size}" if size is not None else "one micro-batch"
    devices = count(stage_devices(plan), "device")
    return (f"stage plan, the parts behind these totals: {glue('the whole network')} "
            f"{glue(f'on {devices},')} {glue(batch + ',')} "
            f"{glue('before pipelining,')} {glue('recompute and')} {glue('optimizer sharding')}")


def _print_rows(console, title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column ``quantity`` / ``value`` table of ``rows`` under ``title`` (folded to the
    console's width)."""
    from rich.table import Table

    title, width = fitted_title(title, console.width)
    table = Table(title=title, min_width=width)
    # the labels keep their width; a long value (a reason for n/a) wraps instead
    table.add_column("quantity", no_wrap=True)
    table.add_column("value", justify="right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def fmt_candidate(strategy, out=None, chosen=None, chosen_out=None) -> str:
    """A candidate strategy (a runner-up, a deviation) as :func:`fmt_strategy` prints it, and,
    where its in_strategy is the chosen one's (``chosen``, ``chosen_out``: the chosen strategy
    and out_strategy), what differs: the out_strategy, which the cost model sets only to
    reduce-scatter a 2-D MatMul's partial sums (``reduce_scatter_variant``, MatMul's
    ``forward_reduce_scatter_``), so its collective is named: ``(1,8)(1,8): same in_strategy,
    output AllReduce instead of ReduceScatter (no out_strategy)``."""
    text = fmt_strategy(strategy, out)
    if not strategy or chosen is None or fmt_strategy(strategy) != fmt_strategy(chosen) \
            or (out or None) == (chosen_out or None):
        return text
    if not out:
        why = "output AllReduce instead of ReduceScatter (no out_strategy)"
    elif not chosen_out:
        why = f"output ReduceScatter instead of AllReduce (out_strategy {fmt_strategy(out)})"
    else:
        why = f"out_strategy {fmt_strategy(out)} instead of {fmt_strategy(chosen_out)}"
    return f"{text}: same in_strategy, {why}"


def fmt_runner_up(runner_up: dict | None, chosen=None, chosen_out=None) -> str:
    """``strategy (+x ms)`` (``(tie)`` at equal cost) from a decision's ``runner_up`` (keys
    ``strategy`` and one of ``extra_seconds`` / ``delta_seconds`` / ``seconds``); with the
    decision's own strategy and out_strategy (``chosen``, ``chosen_out``) a runner-up of the
    same in_strategy says what differs (:func:`fmt_candidate`)."""
    if not runner_up:
        return "-"
    strategy = fmt_candidate(runner_up.get("strategy"), runner_up.get("out_strategy"), chosen,
                             chosen_out)
    for key in ("extra_seconds", "delta_seconds", "loss_seconds"):
        if key in runner_up:
            if abs(float(runner_up[key])) < 1e-12:   # rounding noise: the two cost the same
                return f"{strategy} (tie)"
            return f"{strategy} (+{fmt_seconds(runner_up[key])})"
    if "seconds" in runner_up:
        return f"{strategy} ({fmt_seconds(runner_up['seconds'])})"
    return strategy


def block_ranges(blocks: list[str]) -> str:
    """Block instances as ranges per container: ``["layers.1", "layers.2", "layers.3",
    "layers.7"]`` → ``layers.1–3, 7`` (:func:`instance_label`); names without a numeric last
    part are listed as they are."""
    by_container: OrderedDict[str, list[str]] = OrderedDict()
    for b in blocks:
        container, _, index = b.rpartition(".")
        key = container if container and index.isdigit() else b
        by_container.setdefault(key, []).append(index if key != b else "")
    parts = [key if idx == [""] else instance_label(key + ".*", idx)
             for key, idx in by_container.items()]
    return ", ".join(p.replace(",", ", ") for p in parts)


def pipeline_rows(plan: Plan) -> list[tuple[str, str, str, str, str]]:
    """Per stage of a pipelined plan: ``(stage, blocks, recomputed blocks, seconds per
    micro-batch, memory per device in one unit)``; the recompute column names the blocks
    recomputed whole (``whole layers.0–3``) and those recomputing only their selective
    primitives (``selective layers.4–9``, the record's ``selective_recompute``); ``[]``
    without a pipeline record."""
    rec = plan.pipeline
    if not rec:
        return []
    stage_of = rec.get("stage_of_block", {})
    recompute = rec.get("recompute", {})
    selective = set(rec.get("selective_recompute", []))
    seconds = rec.get("stage_seconds", [])
    memory = rec.get("stage_memory_bytes", [])
    unit = byte_unit(memory)
    rows = []
    for s in range(int(rec["stages"])):
        blocks = [b for b, st in stage_of.items() if st == s]
        span = block_ranges(blocks) or "-"
        rc = block_ranges([b for b in blocks if recompute.get(b)])
        sel = block_ranges([b for b in blocks if b in selective and not recompute.get(b)])
        rc = "; ".join(x for x in (rc and f"whole {rc}", sel and f"selective {sel}") if x)
        rows.append((str(s), f"{span} ({len(blocks)})", rc or "-",
                     fmt_seconds(seconds[s]) if s < len(seconds) else "-",
                     fmt_bytes(memory[s], unit) if s < len(memory) else "-"))
    return rows


def print_pipeline(plan: Plan, console) -> None:
    """The stage split, bubble fraction and super-step of a pipelined plan (nothing otherwise)."""
    from rich.table import Table
    from rich.text import Text

    rec = plan.pipeline
    if not rec:
        return
    title = "pipeline: " + glue(f"{count(rec['stages'], 'stage')} x "
                                f"{count(rec.get('devices_per_stage', '?'), 'device')},") + " " \
        + glue(f"{count(rec['micro_batches'], 'micro-batch', 'micro-batches')} of "
               f"{rec.get('micro_batch_size', '?')}")
    title, width = fitted_title(title, console.width)
    table = Table(title=title, min_width=width)
    for col in ("stage", "blocks", "recompute"):
        table.add_column(col)
    for col in (STAGE_TIME_COLUMN, "memory / device"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in pipeline_rows(plan):
        table.add_row(*row)
    console.print(table)
    line = "; ".join(glue(x) for x in (
        f"bubble fraction (p-1)/(m+p-1): {float(rec.get('bubble_fraction', 0)):.3f}",
        f"optimizer sharding: {'on' if rec.get('optimizer_sharding') else 'off'}",
        f"super-step (one training step): {fmt_seconds(rec.get('step_seconds'))}"))
    from .plan_notes import unsharded_lines
    for text in wrap(line, console.width) + unsharded_lines(plan, console.width):
        console.print(Text(text))


