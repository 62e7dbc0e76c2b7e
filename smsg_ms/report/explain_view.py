"""The ``explain`` view of a plan: per operator its strategy, predicted time with its breakdown,
memory, runner-up and symbolic cost (einsum with a legend of its letters, each term's formula and
value). Lines fit the console width (80 columns included) without splitting a number from its
unit, a name, or a formula inside a symbol (:mod:`smsg_ms.report.units`).

Repeated blocks (``layers.*``) are folded per primitive: a primitive with the same strategy in
every instance is shown once as ``layers.*.<name>``; the others once per strategy, named by their
instances (``layers.0–6.add_ffn``, ``layers.7.add_ffn``). Nothing here recomputes costs.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import NamedTuple

from ..plan import OpDecision, Plan
from .degrees import chosen_degrees, degrees_by_block
from .tables import (LABELS, count, data_parallel_missing, fmt_candidate, fmt_runner_up,
                     fmt_strategy, instance_label, is_memory_key, relative_name)
from .units import byte_unit, fmt_bytes, fmt_seconds, fold_formula, glue, wrap

#: Time kinds after the computation and the collectives named by the symbolic terms.
TIME_ORDER = ("compute", "AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "grad_sync",
              "redistribution", "redistribution_into_loss")
#: How the symbolic formulas read (printed once, under the head line); ``{D}`` what D counts.
FORMULA_LEGEND = ("symbolic costs: in a formula a letter is its axis' global size (elements), "
                  "c_<letter> its cut count and D {D}; FLOPs and memory are per device; "
                  "a collective's bytes are the tensor it reduces or gathers on each device "
                  "(check's MiB: an AllReduce's input, an AllGather's output), 0 where its "
                  "group is one device")


def formula_legend(plan: Plan) -> str:
    """:data:`FORMULA_LEGEND` for ``plan``: D is the device count the strategies are for, in a
    pipelined plan one stage's (``devices_per_stage``: its stage plan is solved on them,
    :mod:`smsg_ms.planner.stages`), not the plan's devices."""
    if plan.pipeline:
        from .tables import stage_devices
        return FORMULA_LEGEND.format(
            D=f"the device count of one pipeline stage ({stage_devices(plan)} of the plan's "
              f"{plan.devices})")
    return FORMULA_LEGEND.format(D="the device count")


def d_text(plan: Plan, sym: dict) -> str:
    """``D = 4`` of an operator's symbolic cost; ``D = 4, a stage's devices`` in a pipelined
    plan."""
    return f"D = {sym.get('D')}" + (", a stage's devices" if plan.pipeline else "")


class Shown(NamedTuple):
    """One entry of the view: a decision shown under ``name`` (its instance line, if any, in
    ``instances``), or, with ``decision`` ``None``, a heading ``name`` of a folded block."""

    decision: OpDecision | None
    name: str
    instances: str | None = None


def explained_decisions(plan: Plan, show_all: bool = False) -> list[Shown]:
    """The entries of the view, in the plan's order. A repeated block with several instances
    becomes a heading and one entry per (primitive, strategy) at the block's first decision;
    ``show_all`` shows every decision under its own name."""
    members: OrderedDict[str, list[tuple[str, str, OpDecision]]] = OrderedDict()
    for d in plan.decisions:
        rel, inst = relative_name(d)
        if inst is not None:
            members.setdefault(d.block, []).append((rel, inst, d))
    rows: list[Shown] = []
    for d in plan.decisions:
        _, inst = relative_name(d)
        if show_all or inst is None:
            rows.append(Shown(d, d.name))
        elif d.block in members:
            rows += _fold_block(d.block, members.pop(d.block), plan.out_strategies)
    return rows


def _fold_block(block: str, members: list[tuple[str, str, OpDecision]],
                outs: dict) -> list[Shown]:
    """``outs``: the plan's out_strategies; a strategy with one differs from the same
    in_strategy without (sequence parallel in one instance only)."""
    every = list(OrderedDict.fromkeys(inst for _, inst, _ in members))
    if len(every) == 1:
        return [Shown(d, d.name) for _, _, d in members]
    variants: OrderedDict[str, OrderedDict[str, list]] = OrderedDict()
    for rel, inst, d in members:
        key = fmt_strategy(d.strategy, outs.get(d.name)) if d.shardable else "-"
        variants.setdefault(rel, OrderedDict()).setdefault(key, []).append((inst, d))
    differ = [rel for rel, by in variants.items()
              if len(by) > 1 or len(next(iter(by.values()))) != len(every)]
    head = (f"{block}: {len(every)} instances ({instance_label(block, every)}); "
            f"{len(variants) - len(differ)} of {len(variants)} primitives have the same strategy "
            f"in every instance and are shown once as {block}.<name> (times per instance)")
    if differ:
        head += f"; per instance: {', '.join(differ)}"
    rows = [Shown(None, head)]
    for rel, by in variants.items():
        for pairs in by.values():
            insts = [inst for inst, _ in pairs]
            rows.append(Shown(pairs[0][1], f"{instance_label(block, insts, every)}.{rel}",
                              _instances_line(block, pairs)))
    return rows


def _instances_line(block: str, pairs: list[tuple[str, OpDecision]]) -> str | None:
    """Each instance's time where they differ: ``layers.0 52.02 µs (shown) · layers.1–6
    10.02 µs``; ``None`` where every instance takes the time shown."""
    by_time: OrderedDict[str, list[str]] = OrderedDict()
    for inst, d in pairs:
        by_time.setdefault(fmt_seconds(d.seconds), []).append(inst)
    if len(by_time) == 1:
        return None
    first = pairs[0][0]
    return " · ".join(f"{instance_label(block, insts)} {t}" + (" (shown)" if first in insts else "")
                      for t, insts in by_time.items())


def symbolic_shown(plan: Plan, decision: OpDecision) -> dict | None:
    """The symbolic cost ``explain`` shows for ``decision``: the plan's description
    (:meth:`Plan.symbolic_of`, ``None`` without one), with the collectives of the decision's
    out_strategy where the plan gives it one (:func:`smsg_ms.cost.explain.with_out_strategy`:
    a ReduceScatter forward and an AllGather backward where the description, made for the
    in_strategy, holds AllReduces), so its rows name the collectives of the time line and of
    the predicted collectives; each collective's bytes in ``S``, the tensor it reduces or
    gathers on each device, as ``smsg-ms check`` lists them
    (:func:`smsg_ms.cost.explain.with_tensor_bytes`), not the ring volume the file stores."""
    sym = plan.symbolic_of(decision)
    if sym and plan.out_strategies.get(decision.name):
        from ..cost.explain import with_out_strategy
        sym = with_out_strategy(sym)
    if sym:
        from ..cost.explain import with_tensor_bytes
        sym = with_tensor_bytes(sym)
    return sym


def time_order(plan: Plan, decision: OpDecision) -> list[str]:
    """Breakdown keys of seconds in the order of the decision's symbolic terms (computation,
    the forward then backward collectives, gradient sync), then :data:`TIME_ORDER`, then the
    rest alphabetically."""
    order: list[str] = []
    for term in (symbolic_shown(plan, decision) or {}).get("terms", []):
        words = term["term"].split()
        if words[0] == "FLOPs":
            key = "compute"
        elif words[0] in ("forward", "backward") and len(words) > 1:
            key = words[1]
        elif words[:2] == ["grad", "sync"]:
            key = "grad_sync"
        else:
            continue
        if key not in order:
            order.append(key)
    order += [k for k in TIME_ORDER if k not in order]
    keys = [k for k, v in decision.breakdown.items()
            if isinstance(v, (int, float)) and v and not is_memory_key(k)]
    return sorted(keys, key=lambda k: (order.index(k), "") if k in order else (len(order), k))


def legend_items(sym: dict) -> tuple[str, list[str]]:
    """The operands of the symbolic cost's einsum (``in0 mk, in1 kn = weight, out mn``) and one
    item per letter in order of appearance: the tensor axes it indexes, its global size and cut
    count (``m = in0[0] out[0]: 4096, cut 4``; ``not cut`` for an axis the operator's
    strategy cannot cut). Weights are the inputs the terms call ``weight``."""
    lhs, _, rhs = sym.get("einsum", "").partition("->")
    ins, outs = lhs.split(","), rhs.split(",")
    out_names = ["out"] if len(outs) == 1 else [f"out{i}" for i in range(len(outs))]
    named = [(f"in{i}", w) for i, w in enumerate(ins)] + list(zip(out_names, outs))
    weights = {t["term"].split()[-1] for t in sym.get("terms", []) if " weight in" in t["term"]}
    operands = ", ".join(f"{n} {w or 'scalar'}" + (" = weight" if n in weights else "")
                         for n, w in named)
    axes: OrderedDict[str, list[str]] = OrderedDict()
    for name, word in named:
        for pos, ch in enumerate(word):
            axes.setdefault(ch, []).append(f"{name}[{pos}]")
    sizes, cuts = sym.get("sizes", {}), sym.get("cuts", {})
    items = []
    for ch, where in axes.items():
        size, cut = sizes.get(ch, "?"), cuts.get(f"c_{ch}")
        items.append(f"{ch} = {' '.join(where)}: {size}" + (f", cut {cut}" if cut is not None
                                                            else "" if size == 1 else ", not cut"))
    return operands, items


def term_lines(sym: dict, width: int, unit) -> list[tuple[str, str, str]]:
    """``(term, formula, value)`` line triples of the symbolic terms laid out in ``width``
    columns: the term column at most 34 wide (folded at spaces), the formula folded after an
    operator, the value (right-aligned) on each term's first line."""
    terms = sym.get("terms", [])
    if not terms:
        return []
    values = [_fmt_value(t.get("value"), t["unit"], unit) for t in terms]
    term_w = min(34, max(len(t["term"]) for t in terms))
    value_w = max(len(v) for v in values)
    formula_w = max(12, width - term_w - value_w - 2)
    out = []
    for t, value in zip(terms, values):
        names = wrap(t["term"], term_w)
        formula = fold_formula(t["formula"], formula_w)
        for i, (name, part) in enumerate(itertools.zip_longest(names, formula, fillvalue="")):
            out.append((name.ljust(term_w), part.ljust(formula_w), value.rjust(value_w)
                        if i == 0 else " " * value_w))
    return out


def _fmt_value(value, unit_name: str, unit) -> str:
    if value is None:
        return "?"
    if unit_name == "bytes":
        return fmt_bytes(value, unit)
    return f"{float(value):.3g} FLOPs"


def _block_byte_unit(plan: Plan, d: OpDecision):
    """One byte unit for all the bytes of an operator's entry (memory line and terms)."""
    values = [v for k, v in d.breakdown.items() if is_memory_key(k) and isinstance(v, (int, float))]
    values += [t.get("value") for t in (symbolic_shown(plan, d) or {}).get("terms", [])
               if t["unit"] == "bytes" and isinstance(t.get("value"), (int, float))]
    return byte_unit(values)


def print_explain(plan: Plan, console, show_all: bool = False,
                  record_runner_up: bool = True) -> None:
    """Print the view to a ``rich.console.Console`` (lines fit ``console.width``): the head
    line (step, ratio to pure data parallel), then per entry of :func:`explained_decisions`
    the operator's lines, then the pipeline stages of a pipelined plan and, with
    ``record_runner_up``, the runner-up its pipeline record holds (of the configurations the
    search evaluated; ``explain --runner-up`` prints the exact one instead)."""
    from .tables import print_pipeline

    say = _sayer(console)
    totals = plan.totals
    rel = totals.get("relative_to_data_parallel")
    ratio = glue(f"{rel:.3f} x pure data parallel" if isinstance(rel, (int, float))
                 else f"pure data parallel {data_parallel_missing(plan)}")
    if plan.pipeline:      # the step is the super-step; no data-parallel baseline for it
        ratio = glue(f"1F1B super-step of {count(plan.pipeline['stages'], 'stage')} x "
                     f"{count(plan.pipeline['micro_batches'], 'micro-batch', 'micro-batches')}")
    say(f"{plan.network}: {count(plan.devices, 'device')}, {plan.hardware}; plan "
        f"{plan.content_hash[:12]}; step {fmt_seconds(totals.get('step_seconds'))} ({ratio})",
        style="bold")
    if any(plan.symbolic_of(d) for d in plan.decisions):
        say(formula_legend(plan), style="dim")
    for shown in explained_decisions(plan, show_all):
        console.print()
        if shown.decision is None:
            say(shown.name, style="bold")
        else:
            _print_entry(plan, shown, console, say)
    print_pipeline(plan, console)
    degrees = chosen_degrees(plan)
    console.print()
    say("chosen: " + ", ".join(f"{k} {v}" for k, v in degrees.items()), style="bold")
    by_block = degrees_by_block(plan)
    if by_block:
        say("degrees by block: " + "; ".join(
            f"{label}: " + ", ".join(f"{k} {v}" for k, v in d.items()) for label, d in by_block),
            "", "  ")
    runner = (plan.pipeline or {}).get("runner_up")
    if runner and record_runner_up:
        say(f"runner-up: pp {runner['stages']}, micro-batches {runner['micro_batches']}, "
            f"virtual stages {runner.get('virtual_stages', 1)}, optimizer "
            f"{runner.get('optimizer_level', 'off')}: {_step_vs_chosen(runner)}")


def runner_up_configuration_line(runner: dict | None, pipelined: bool = False,
                                 space: str | None = None, alone: bool = False) -> str:
    """The line ``explain --runner-up`` prints for a plan's runner-up configuration: a
    single-stage plan's (:func:`smsg_ms.planner.runner_up.plan_runner_up`: ``dp``, ``tp``,
    ``step_seconds``, ``difference_seconds``; ``None``: no other data-parallel degree is
    feasible) or, ``pipelined``, a pipelined plan's
    (:func:`smsg_ms.planner.pipeline_runner_up.pipelined_runner_up`; ``None``: no other
    configuration fits). ``space``: the flags of the pipelined search space it was found in;
    ``alone``: that space holds the chosen configuration only."""
    if not pipelined:
        if runner is None:
            return "runner-up configuration: none (no other data-parallel degree is feasible)"
        return (f"runner-up configuration: dp {runner['dp']}, tp {runner['tp']}: "
                f"{_step_vs_chosen(runner)}")
    where = f"search space {space}" if space else "every configuration evaluated"
    if runner is None:
        why = ("it holds the chosen configuration alone: widen it for a runner-up" if alone
               else "no other configuration fits")
        return f"runner-up configuration: none ({where}: {why})"
    return (f"runner-up configuration ({where}): pp {runner['stages']}, "
            + (f"dp {runner['dp']}, tp {runner['tp']}, " if "dp" in runner else "")
            + f"micro-batches {runner['micro_batches']}, virtual stages "
            f"{runner.get('virtual_stages', 1)}, optimizer "
            f"{runner.get('optimizer_level', 'off')}: {_step_vs_chosen(runner)}")


def _step_vs_chosen(runner: dict) -> str:
    """``step <s> (+<d> vs the chosen)`` of a runner-up (``step_seconds``,
    ``difference_seconds``, seconds)."""
    diff = runner["difference_seconds"]
    return (f"step {fmt_seconds(runner.get('step_seconds'))} ({'+' if diff >= 0 else ''}"
            f"{fmt_seconds(diff)} vs the chosen)")


def _sayer(console):
    """``say(text, indent, hanging, style)``: print ``text`` folded by :func:`wrap`."""
    from rich.text import Text

    def say(text: str, indent: str = "", hanging: str | None = None, style: str = "") -> None:
        for line in wrap(text, console.width, indent, hanging):
            console.print(Text(line, style=style), overflow="fold")
    return say


def _print_entry(plan: Plan, shown: Shown, console, say) -> None:
    """One operator: head line, instances, time, memory, runner-up, symbolic cost, notes."""
    from rich.text import Text

    d = shown.decision
    strategy = (fmt_strategy(d.strategy, plan.out_strategies.get(d.name)) if d.shardable
                else "layout set by MindSpore")
    say("  ".join(glue(x) for x in (shown.name, d.op_type, strategy, fmt_seconds(d.seconds))),
        hanging="    ", style="bold cyan")
    if shown.instances:
        say("instances: " + shown.instances, "  ", "    ", style="dim")
    unit = _block_byte_unit(plan, d)
    times = [glue(f"{LABELS.get(k, k)} {fmt_seconds(d.breakdown[k])}")
             for k in time_order(plan, d)]
    mems = _memory_items(plan, d, unit)
    if times:
        say("time: " + " · ".join(times), "  ", "    ")
    if mems:
        say("memory: " + " · ".join(mems), "  ", "    ")
    if d.runner_up and d.shardable:
        say(f"runner-up: {fmt_runner_up(d.runner_up, d.strategy, plan.out_strategies.get(d.name))}",
            "  ", "    ")
    sym = symbolic_shown(plan, d)
    if sym:
        operands, letters = legend_items(sym)
        say(f"symbolic cost of {sym.get('einsum', '')} ({operands}; {d_text(plan, sym)})",
            "  ", "    ")
        say("letters: " + " · ".join(glue(x) for x in letters), "    ", "      ", style="dim")
        for term, formula, value in term_lines(sym, console.width - 4, unit):
            line = Text.assemble("    ", (term, "dim"), " ", formula, " ", value)
            line.rstrip()
            console.print(line, overflow="fold")
    for note in d.notes:
        say(f"note: {note}", "  ", "    ")


def _memory_items(plan: Plan, d: OpDecision, unit) -> list[str]:
    """The memory line's items of decision ``d``: bytes per device by kind, after optimizer
    sharding where the plan shards a parameter ``d`` holds (:func:`~.optimizer_shards.
    sharded_memory`, as the stage memory counts it), so the items add up to the totals' sharded
    rows; a divided item says by how much (``(sharded 4-way)``)."""
    from .optimizer_shards import shard_counts, sharded_memory

    memory = sharded_memory(plan, d)
    ways = "/".join(str(r) for r in shard_counts(plan, d))
    items = []
    for k, v in sorted(memory.items()):
        if not v or not is_memory_key(k):
            continue
        cut = ways and v < float(d.breakdown.get(k, 0)) * (1 - 1e-12)
        items.append(glue(f"{LABELS.get(k, k)} {fmt_bytes(v, unit)}"
                          + (f" (sharded {ways}-way)" if cut else "")))
    return items


def _fmt_factor(x: float) -> str:
    if x == 0.0:
        return "0"
    if x == float("inf"):
        return "∞"
    return f"{x:.3g}"


def stays_best_lines(ranges: list[dict]) -> list[str]:
    """One line per hardware parameter (and level) of
    :func:`smsg_ms.planner.stays_best.stays_best`: the factor range of the preset over which
    the plan stays the cheapest of its single-operator deviations, and the deviation that takes
    over beyond each end."""
    out = []
    for r in ranges:
        level = r.get("level_name", r["level"])
        name = r["parameter"] + ("" if level is None else f" ({level})")
        ends = []
        for side, word in (("below", "below"), ("above", "above")):
            who = r[side]
            if who is not None:
                bound = _fmt_factor(r["low"] if side == "below" else r["high"])
                ends.append(f"{word} x{bound}: {who['variable']} takes "
                            + fmt_candidate(who["strategy"], who.get("out_strategy"),
                                            who.get("chosen_strategy"),
                                            who.get("chosen_out_strategy")))
        tail = "; ".join(ends) if ends else "no other strategy takes over at any factor"
        out.append(f"{name} x{_fmt_factor(r['low'])} to x{_fmt_factor(r['high'])} ({tail})")
    return out


def print_stays_best(ranges: list[dict], hardware: str, console) -> None:
    """``explain --stays-best``'s lines: a heading naming the ``hardware`` preset, then one item
    per :func:`stays_best_lines` line, folded to ``console.width`` (:func:`~.units.wrap`), its
    continuation lines indented under the item's text."""
    say = _sayer(console)
    say("stays the best of its single-operator deviations, "
        + glue(f"as factors of the {hardware} preset:"))
    for line in stays_best_lines(ranges):
        say(line, "  ", "    ")
