"""Tables of a plan (``rich``): the ``plan`` summary and the per-operator ``explain`` view.

Seconds are shown in ms, bytes in MiB/GiB. Nothing here recomputes costs: it renders what the plan
holds (decisions' ``seconds``, ``breakdown``, ``runner_up``, ``notes``; the plan's ``totals``).
"""
from __future__ import annotations

import re
from collections import OrderedDict

from ..plan import OpDecision, Plan

GIB = 2 ** 30


def fmt_strategy(strategy) -> str:
    """``[[8, 1], [1, 1]]`` → ``(8,1)(1,1)``; ``None`` → ``-``."""
    if not strategy:
        return "-"
    return "".join("(" + ",".join(str(c) for c in cuts) + ")" for cuts in strategy)


def fmt_seconds(value) -> str:
    return "-" if value is None else f"{float(value) * 1e3:.3f} ms"


def fmt_bytes(value) -> str:
    value = float(value)
    if value >= GIB / 4:
        return f"{value / GIB:.2f} GiB"
    return f"{value / 2**20:.1f} MiB" if value >= 2**20 or not value else f"{value / 1024:.1f} KiB"


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


def summary_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """``(block, primitive, strategy)`` rows: one per distinct primitive of each repeated block
    (instances with different strategies are listed separately with their count)."""
    rows = []
    for block, decisions in group_by_block(plan).items():
        seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        for d in decisions:
            if not d.shardable:
                continue
            rel, _ = relative_name(d) if block else (d.name, None)
            key = (rel, fmt_strategy(d.strategy))
            seen[key] = seen.get(key, 0) + 1
        per_name: dict[str, int] = {}
        for rel, _ in seen:
            per_name[rel] = per_name.get(rel, 0) + 1
        for (rel, strategy), count in seen.items():
            label = rel if per_name[rel] == 1 else f"{rel} (x{count})"
            rows.append((block or "(outside blocks)", label, strategy))
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
}


#: Order of the totals rows: the step first, then time by kind, then memory.
TOTALS_ORDER = ("step_seconds", "relative_to_data_parallel", "data_parallel_step_seconds",
                "compute", "AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "grad_sync",
                "redistribution_seconds", "memory_bytes", "parameter_bytes", "gradient_bytes",
                "optimizer_bytes", "activation_bytes", "data_parallel_memory_bytes")


def _total_order(key: str) -> tuple:
    return (TOTALS_ORDER.index(key), key) if key in TOTALS_ORDER else (len(TOTALS_ORDER), key)


def _fmt_total(key: str, value) -> str:
    if "relative" in key:
        return f"{float(value):.3f}"
    return fmt_bytes(value) if is_memory_key(key) else fmt_seconds(value)


def totals_rows(plan: Plan) -> list[tuple[str, str]]:
    """``(quantity, value)`` rows of the plan's totals: seconds (the cost model's breakdown kinds:
    computation, each collective kind, redistribution ...), bytes per device (keys naming memory
    or bytes), ratios (keys naming ``relative``). The step cost relative to pure data parallel
    is ``step_seconds / data_parallel_step_seconds``, added when the plan does not hold it."""
    rows = []
    for key in sorted(plan.totals, key=_total_order):
        value = plan.totals[key]
        if isinstance(value, dict):
            rows += [(f"{LABELS.get(key, key)}.{sub}", _fmt_total(key, value[sub]))
                     for sub in sorted(value) if isinstance(value[sub], (int, float))]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((LABELS.get(key, key), _fmt_total(key, value)))
        else:
            rows.append((LABELS.get(key, key), "n/a" if value is None else str(value)))
    step, dp = plan.totals.get("step_seconds"), plan.totals.get("data_parallel_step_seconds")
    if ("relative_to_data_parallel" not in plan.totals and isinstance(step, (int, float))
            and isinstance(dp, (int, float)) and dp > 0):
        rows.append((LABELS["relative_to_data_parallel"], f"{step / dp:.3f}"))
    return rows


def print_summary(plan: Plan, console) -> None:
    """Print the ``plan`` command's summary to a ``rich.console.Console``."""
    from rich.table import Table

    table = Table(title=f"{plan.network}: {plan.devices} devices, {plan.hardware}")
    for col in ("block", "primitive", "strategy"):
        table.add_column(col)
    for row in summary_rows(plan):
        table.add_row(*row)
    console.print(table)
    totals = Table(title="predicted totals (per device, one training step)")
    totals.add_column("quantity")
    totals.add_column("value", justify="right")
    for row in totals_rows(plan):
        totals.add_row(*row)
    console.print(totals)
    unsharded = [d for d in plan.decisions if not d.shardable]
    if unsharded:
        console.print(f"not written back (functional calls / layout set by MindSpore): "
                      f"{len(unsharded)}")
    console.print(f"data inputs: {'full_batch' if plan.dataset_strategy is None else 'dataset_strategy ' + fmt_strategy(plan.dataset_strategy)}")
    print_pipeline(plan, console)
    console.print(f"plan hash: {plan.content_hash}")


def fmt_breakdown(breakdown: dict) -> str:
    parts = []
    for key in sorted(breakdown):
        value = breakdown[key]
        if not isinstance(value, (int, float)) or not value:
            continue
        parts.append(f"{key} {fmt_bytes(value) if is_memory_key(key) else fmt_seconds(value)}")
    return ", ".join(parts) or "-"


def fmt_runner_up(runner_up: dict | None) -> str:
    """``strategy (+x ms)`` from a decision's ``runner_up`` (keys ``strategy`` and one of
    ``extra_seconds`` / ``delta_seconds`` / ``seconds``)."""
    if not runner_up:
        return "-"
    strategy = fmt_strategy(runner_up.get("strategy"))
    for key in ("extra_seconds", "delta_seconds", "loss_seconds"):
        if key in runner_up:
            return f"{strategy} (+{fmt_seconds(runner_up[key])})"
    if "seconds" in runner_up:
        return f"{strategy} ({fmt_seconds(runner_up['seconds'])})"
    return strategy


def pipeline_rows(plan: Plan) -> list[tuple[str, str, str, str, str]]:
    """Per stage of a pipelined plan: ``(stage, blocks, recomputed blocks, seconds per
    micro-batch, memory per device)``; ``[]`` without a pipeline record."""
    rec = plan.pipeline
    if not rec:
        return []
    stage_of = rec.get("stage_of_block", {})
    recompute = rec.get("recompute", {})
    seconds = rec.get("stage_seconds", [])
    memory = rec.get("stage_memory_bytes", [])
    rows = []
    for s in range(int(rec["stages"])):
        blocks = [b for b, st in stage_of.items() if st == s]
        span = f"{blocks[0]} .. {blocks[-1]}" if len(blocks) > 1 else (blocks[0] if blocks else "-")
        rc = [b for b in blocks if recompute.get(b)]
        rows.append((str(s), f"{span} ({len(blocks)})", ", ".join(rc) or "-",
                     fmt_seconds(seconds[s]) if s < len(seconds) else "-",
                     fmt_bytes(memory[s]) if s < len(memory) else "-"))
    return rows


def print_pipeline(plan: Plan, console) -> None:
    """The stage split, bubble fraction and super-step of a pipelined plan (nothing otherwise)."""
    from rich.table import Table

    rec = plan.pipeline
    if not rec:
        return
    table = Table(title=f"pipeline: {rec['stages']} stages x {rec.get('devices_per_stage', '?')} "
                        f"devices, {rec['micro_batches']} micro-batches of "
                        f"{rec.get('micro_batch_size', '?')}")
    for col in ("stage", "blocks", "recompute", "time / micro-batch", "memory / device"):
        table.add_column(col)
    for row in pipeline_rows(plan):
        table.add_row(*row)
    console.print(table)
    console.print(f"bubble fraction (p-1)/(m+p-1): {float(rec.get('bubble_fraction', 0)):.3f}; "
                  f"optimizer sharding: {'on' if rec.get('optimizer_sharding') else 'off'}; "
                  f"super-step: {fmt_seconds(rec.get('step_seconds'))}")


def _fmt_value(value, unit: str) -> str:
    if value is None:
        return "?"
    if unit == "bytes":
        return fmt_bytes(value) if value else "0"
    return f"{float(value):.3g} FLOPs"


def symbolic_lines(plan: Plan, decision: OpDecision) -> list[tuple[str, str, str]]:
    """``(term, formula, value)`` rows of the decision's symbolic cost (empty without one),
    headed by the einsum with its letters' sizes and cut counts."""
    sym = plan.symbolic_of(decision)
    if not sym:
        return []
    sizes = " ".join(f"{ch}={n}" for ch, n in sym.get("sizes", {}).items() if n != 1)
    cuts = " ".join(f"{k}={v}" for k, v in sym.get("cuts", {}).items())
    rows = [(sym.get("einsum", ""), f"{sizes}; {cuts}; D={sym.get('D')}", "")]
    for term in sym.get("terms", []):
        rows.append((term["term"], term["formula"], _fmt_value(term.get("value"), term["unit"])))
    return rows


def explained_decisions(plan: Plan, show_all: bool = False) -> list:
    """``(decision, None)`` for each decision to show in full, ``(None, line)`` for each block
    instance folded into the block's first instance (same strategies, primitive for
    primitive); ``show_all`` shows every instance."""
    groups: OrderedDict = OrderedDict()
    for i, d in enumerate(plan.decisions):
        _, inst = relative_name(d)
        key = (d.block, inst) if inst is not None and not show_all else (None, i)
        groups.setdefault(key, []).append(d)
    first: dict[str, tuple] = {}
    rows: list = []
    for (block, inst), members in groups.items():
        if block is None:
            rows += [(d, None) for d in members]
            continue
        name = block.replace("*", inst)
        strategies = [(relative_name(d)[0], fmt_strategy(d.strategy)) for d in members]
        if block in first and first[block][1] == strategies:
            seconds = sum(d.seconds for d in members)
            rows.append((None, f"{name}: same strategies as {first[block][0]} "
                               f"({len(members)} primitives, {fmt_seconds(seconds)})"))
            continue
        first.setdefault(block, (name, strategies))
        rows += [(d, None) for d in members]
    return rows


def print_explain(plan: Plan, console, show_all: bool = False) -> None:
    """Per operator: strategy, predicted time with its breakdown, memory, runner-up and the
    symbolic cost (formula and value of each term). Readable at 80 columns: one block of
    lines per operator. Block instances with the strategies of the block's first instance are
    folded into one line unless ``show_all``."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    totals = plan.totals
    head = (f"{plan.network}: {plan.devices} devices, {plan.hardware}, plan "
            f"{plan.content_hash[:12]}; step {fmt_seconds(totals.get('step_seconds'))}")
    rel = totals.get("relative_to_data_parallel")
    if isinstance(rel, (int, float)):
        head += f" ({rel:.3f} x pure data parallel)"
    console.print(Text(head, style="bold"))
    for d, line in explained_decisions(plan, show_all):
        if d is None:
            console.print(Text(line, style="dim"))
            continue
        strategy = fmt_strategy(d.strategy) if d.shardable else "layout set by MindSpore"
        console.print()
        console.print(Text.assemble((d.name, "bold cyan"), f"  {d.op_type}  {strategy}  ",
                                    (fmt_seconds(d.seconds), "bold")))
        times = [f"{LABELS.get(k, k)} {fmt_seconds(v)}" for k, v in sorted(d.breakdown.items())
                 if isinstance(v, (int, float)) and v and not is_memory_key(k)]
        mems = [f"{LABELS.get(k, k)} {fmt_bytes(v)}" for k, v in sorted(d.breakdown.items())
                if isinstance(v, (int, float)) and v and is_memory_key(k)]
        if times:
            console.print("  time: " + " · ".join(times))
        if mems:
            console.print("  memory: " + " · ".join(mems))
        if d.runner_up and d.shardable:
            console.print(f"  runner-up: {fmt_runner_up(d.runner_up)}")
        sym = symbolic_lines(plan, d)
        if sym:
            grid = Table.grid(padding=(0, 1))
            grid.add_column(style="dim", overflow="fold")
            grid.add_column(overflow="fold")
            grid.add_column(justify="right", no_wrap=True)
            for row in sym:
                grid.add_row(*row)
            console.print("  symbolic cost:")
            console.print(Padding(grid, (0, 0, 0, 4)))
        for note in d.notes:
            console.print(f"  note: {note}")
    print_pipeline(plan, console)
