"""The parallel degrees of a plan, read from its decisions (nothing recomputed): data, tensor,
expert, sequence and context parallel, pipeline and virtual stages, micro-batches, recompute and
the optimizer-state level (:func:`chosen_degrees`), and, where repeated-block instances take
different degrees, the degrees by block (:func:`degrees_by_block`). ``explain`` prints both.
"""
from __future__ import annotations

import math
from collections import Counter, OrderedDict

from ..plan import OpDecision, Plan
from .tables import instance_label, relative_name

#: Primitives whose second input is the routed experts' stacked weights ``(E, h, f)``.
EXPERT_TYPES = ("BatchMatMul", "GroupedMatmul", "MatMul")


def chosen_degrees(plan: Plan) -> dict[str, object]:
    """The parallel degrees of ``plan`` as plain values: ``dp`` and ``tp`` (the dominant
    :func:`operator_degrees` of each repeated-block instance, then the one most instances
    share; of all the decisions when the plan has no repeated block; where the flash
    attentions' most common query cut splits S1, its batch and head cuts instead,
    :func:`flash_attention_cuts`: the token cut of the MatMuls is ``dp·cp`` there),
    ``repeated`` (only where ``dp·tp`` (``·cp`` with flash context parallel) is below a
    stage's devices: the factor MindSpore repeats the computation by),
    ``ep`` (:func:`expert_parallel_degree`), ``sp`` (:func:`sequence_parallel_degree`), ``cp``
    (:func:`context_parallel_degree`), ``pp`` (stages), ``vp`` (virtual stages),
    ``micro-batches``, ``recompute`` (recomputed block instances / block instances of the
    plan), ``selective recompute`` (blocks whose selective primitives are recomputed) and
    ``optimizer`` (``off`` or MindSpore's ``optimizer_level``). Read from the plan file,
    nothing recomputed."""
    rec = plan.pipeline or {}
    groups = _instance_groups(plan)
    blocks = [k for k in groups if k]
    per_group = [_most_common(groups[k]) for k in (blocks or list(groups)) if groups[k]]
    dp, tp = _most_common(per_group) if per_group else (1, int(plan.devices))
    flash = [c for c in (flash_attention_cuts(plan, d) for d in plan.decisions) if c]
    if flash and _most_common(flash)[1] > 1:    # context parallel: the attention's own cuts
        dp, cp, tp = _most_common(flash)
    else:
        cp = 1                                  # dp already spans a token cut
    recompute = rec.get("recompute", {})
    level = rec.get("optimizer_level") or ("level1" if rec.get("optimizer_sharding") else "off")
    per_stage = int(rec.get("devices_per_stage", plan.devices))
    used = dp * tp * cp
    repeat = {"repeated": f"x{per_stage // used}"} if per_stage > used else {}
    return {"dp": dp, "tp": tp, **repeat, "ep": expert_parallel_degree(plan),
            "sp": sequence_parallel_degree(plan), "cp": context_parallel_degree(plan),
            "pp": int(rec.get("stages", 1)),
            "vp": int(rec.get("virtual_stages", 1)),
            "micro-batches": int(rec.get("micro_batches", 1)),
            "recompute": f"{sum(bool(v) for v in recompute.values())}/"
                         f"{len(blocks) or len(recompute)} blocks",
            "selective recompute": f"{len(rec.get('selective_recompute', []))} blocks",
            "optimizer": level}


def degrees_by_block(plan: Plan) -> list[tuple[str, dict[str, int]]]:
    """The degrees of each repeated-block instance, ``[(label, {"dp", "tp", "ep", "cp"})]`` in
    graph order, consecutive instances of equal degrees joined (``layers.0–5``,
    :func:`~smsg_ms.report.tables.instance_label`); ``dp``/``tp`` the instance's dominant
    :func:`operator_degrees` (a flash attention that splits S1: its batch and head cuts),
    ``ep``/``cp`` its largest expert and query-sequence cuts. Empty
    when every instance takes the same degrees (the plan's line says it all) or the plan has
    no repeated block."""
    rows: list[tuple[str, str, dict[str, int]]] = []      # (block, instance, degrees)
    instances: OrderedDict[tuple[str, str], list[OpDecision]] = OrderedDict()
    for d in plan.decisions:
        _, inst = relative_name(d)
        if inst is not None:
            instances.setdefault((d.block, inst), []).append(d)
    for (block, inst), decisions in instances.items():
        pairs = [p for p in (operator_degrees(plan, d) for d in decisions) if p]
        if not pairs:
            continue
        dp, tp = _most_common(pairs)
        flash = [c for c in (flash_attention_cuts(plan, d) for d in decisions) if c]
        if flash and _most_common(flash)[1] > 1:
            dp, _, tp = _most_common(flash)
        rows.append((block, inst, {"dp": dp, "tp": tp,
                                   "ep": max(map(_expert_cut, decisions), default=1),
                                   "cp": max((_query_sequence_cut(plan, d) for d in decisions),
                                             default=1)}))
    if len({tuple(r[2].items()) for r in rows}) < 2:
        return []
    out: list[tuple[str, list[str], dict[str, int]]] = []
    for block, inst, degrees in rows:
        if out and out[-1][0] == block and out[-1][2] == degrees:
            out[-1][1].append(inst)
        else:
            out.append((block, [inst], degrees))
    return [(instance_label(block, insts), degrees) for block, insts, degrees in out]


def operator_degrees(plan: Plan, d: OpDecision) -> tuple[int, int] | None:
    """``(dp, tp)`` of one decision's device matrix: ``dp`` the cut of its first input's first
    axis (the batch / token axis), ``tp`` the rest of the devices its device matrix spans (the
    product of its einsum letters' cuts, MindSpore's ``dev_matrix`` of ``ops_info/*_info.cc``;
    without a symbolic description the largest product of one input's cuts). A MatMul
    ``((4, 1), (1, 2))`` is ``(4, 2)``; an Add ``((4, 1), (4, 1))`` is ``(4, 1)`` (repeated on
    the other devices). ``None`` for a decision without a strategy."""
    if not d.shardable or not d.strategy or not d.strategy[0]:
        return None
    dp = int(d.strategy[0][0])
    cuts = (plan.symbolic_of(d) or {}).get("cuts") or {}
    used = (math.prod(int(c) for c in cuts.values()) if cuts
            else max(math.prod(int(c) for c in s) for s in d.strategy))
    return dp, max(1, used // max(dp, 1))


def expert_parallel_degree(plan: Plan) -> int:
    """Expert parallel: the plan's ``expert_parallel`` total where the planner chose one
    (mindformers' MoE layers, :mod:`smsg_ms.cost.expert_dispatch`), else the largest cut of the
    experts' axis (first axis of the stacked weights ``(E, h, f)``, second input) of a routed
    experts' matrix product (a primitive under a path component ``experts``, the built-in
    ``moe``'s ``layers.i.moe.experts.*``); 1 when there is none."""
    total = (plan.totals or {}).get("expert_parallel")
    if isinstance(total, (int, float)) and total >= 1:
        return int(total)
    return max((_expert_cut(d) for d in plan.decisions), default=1)


def _expert_cut(d: OpDecision) -> int:
    if d.op_type not in EXPERT_TYPES or not d.strategy or len(d.strategy) < 2 \
            or len(d.strategy[1]) != 3 or "experts" not in d.name.split("."):
        return 1
    return int(d.strategy[1][0])


def context_parallel_degree(plan: Plan) -> int:
    """Context parallel: the largest cut of the queries' sequence axis of the attention: a
    ``FlashAttentionScore``'s S1 (:func:`flash_attention_cuts`), or the attention's 4-D
    ``BatchMatMul`` (``QKᵀ`` and ``PV``: first input ``(batch, heads, seq, ·)``, axis 2); the
    keys and values then gathered (docs/sequence-parallel.md); 1 when none is cut."""
    return max((_query_sequence_cut(plan, d) for d in plan.decisions), default=1)


def flash_attention_cuts(plan: Plan, d: OpDecision) -> tuple[int, int, int] | None:
    """``(batch, S1, heads)`` cuts of a ``FlashAttentionScore`` decision's query (first
    input), ``None`` for another decision. The query's axes are read from the plan's symbolic
    einsum (letters ``b`` batch, ``s`` S1; the others heads and head size, multiplied:
    :mod:`smsg_ms.cost.operators.flash_attention`); without one, MindSpore's layouts by rank:
    3-D BSH (its default ``input_layout``), 4-D BNSD. A query ``(1, 4, 2)`` in BSH is
    ``(1, 4, 2)``: dp 1, cp 4, tp 2."""
    if d.op_type != "FlashAttentionScore" or not d.strategy or not d.strategy[0]:
        return None
    query = [int(c) for c in d.strategy[0]]
    einsum = (plan.symbolic_of(d) or {}).get("einsum") or ""
    letters = einsum.split("->")[0].split(",")[0]
    if len(letters) != len(query) or "b" not in letters or "s" not in letters:
        letters = {3: "bsh", 4: "bnsd"}.get(len(query))
        if letters is None:
            return None
    b, s = query[letters.index("b")], query[letters.index("s")]
    return b, s, max(1, math.prod(query) // (b * s))


def _query_sequence_cut(plan: Plan, d: OpDecision) -> int:
    flash = flash_attention_cuts(plan, d)
    if flash is not None:
        return flash[1]
    if d.op_type != "BatchMatMul" or not d.strategy or len(d.strategy) != 2 \
            or any(len(s) != 4 for s in d.strategy):
        return 1
    return int(d.strategy[0][2])


def sequence_parallel_degree(plan: Plan) -> int:
    """Sequence parallel (Megatron-LM's, docs/sequence-parallel.md): the largest ReduceScatter
    group ``b`` of the plan's out_strategies that cut a sequence axis. A MatMul with in_strategy
    ``((a, b), (b, c))`` and out_strategy ``((a·b, c),)`` reduce-scatters its partial sums over
    ``b`` devices onto its rows (``ops_info/matmul_info.cc``), and the norms and element-wise
    operators after it work on ``1/(a·b)`` of those rows. That is sequence parallel only where
    the rows are tokens, ``batch · S`` with ``S > 1`` positions per sample (the rows outnumber
    the data input's first axis, the batch), and the row cut splits a sample's positions: the
    ``a·b`` contiguous slices of ``batch · S`` rows hold whole samples when ``a·b`` divides
    ``batch``, a batch cut. The mlp's ``fc3`` (rows = its 64 samples) cuts no sequence; nor does
    llama's ``wo`` with batch 8 and ``a·b = 8`` (one whole sequence per device), while batch 4
    does (half a sequence per device). Rows from the decision's symbolic description, the batch
    from the plan's first data input (a stage's micro-batch where pipelined); 1 when no
    out_strategy cuts a sequence (or either is unknown)."""
    batch = plan.input_shapes[0][0] if plan.input_shapes and plan.input_shapes[0] else None
    strategies = plan.strategies
    degrees = []
    for d in plan.decisions:
        out = plan.out_strategies.get(d.name)
        if not out or d.name not in strategies:
            continue
        rows, cut = _output_rows(plan, d), int(out[0][0])
        if isinstance(rows, int) and isinstance(batch, int) and batch > 0 \
                and rows > batch and rows % batch == 0 and batch % cut:
            degrees.append(cut // int(strategies[d.name][0][0]))
    return max(degrees, default=1)


def _output_rows(plan: Plan, d: OpDecision):
    """The global size of the first axis of ``d``'s (first) output, from its symbolic einsum
    (``mk,kn->mn``: ``m``); ``None`` without one."""
    sym = plan.symbolic_of(d) or {}
    outs = (sym.get("einsum") or "").partition("->")[2].split(",")[0]
    return (sym.get("sizes") or {}).get(outs[0]) if outs else None


def _instance_groups(plan: Plan) -> "OrderedDict[str, list[tuple[int, int]]]":
    """:func:`operator_degrees` per block instance (``block#index``; ``""`` outside blocks)."""
    groups: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()
    for d in plan.decisions:
        degrees = operator_degrees(plan, d)
        _, inst = relative_name(d)
        key = "" if inst is None else f"{d.block}#{inst}"
        groups.setdefault(key, [])
        if degrees:
            groups[key].append(degrees)
    return groups


def _most_common(items: list):
    """The item ``items`` hold most often; of equal counts, the first to appear."""
    counts = Counter(items)
    return max(counts, key=lambda x: (counts[x], -items.index(x)))
