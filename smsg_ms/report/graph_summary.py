"""Text summary of a captured graph (``smsg-ms graph``): counts, parameters, blocks, warnings."""
from __future__ import annotations

from collections import Counter

from ..graph.blocks import group_blocks
from ..graph.model import OpGraph


def summarize(graph: OpGraph) -> dict:
    """Plain-data summary: ``op_counts`` (type → count, most frequent first), ``parameters``
    (count, elements, bytes), ``block_groups`` (container, prefixes, ops per block),
    ``functional`` (type → count of calls without a primitive path), ``unknown`` (type → count of
    operators the cost model has no family for, :func:`unknown_operator_types`), ``warnings``."""
    counts = Counter(op.type for op in graph.ops)
    params = graph.parameters()
    functional = Counter(op.type for op in graph.ops if not op.shardable)
    groups = [{"container": g.container, "prefixes": g.prefixes,
               "ops_per_block": len(g.blocks[0].op_ids)} for g in group_blocks(graph)]
    return {
        "name": graph.name, "n_ops": len(graph.ops),
        "op_counts": sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])),
        "parameters": {"count": len(params), "elements": sum(p.numel or 0 for p in params),
                       "bytes": sum(p.nbytes or 0 for p in params)},
        "block_groups": groups,
        "functional": sorted(functional.items(), key=lambda kv: (-kv[1], kv[0])),
        "unknown": unknown_operator_types(graph),
        "warnings": list(graph.warnings),
    }


def unknown_operator_types(graph: OpGraph) -> list[tuple[str, int]]:
    """Operator types the cost model does not know, with their counts, most frequent first.

    An operator is unknown when :meth:`smsg_ms.cost.model.CostModel.spec` returns ``None`` for it
    and its ``shard()`` is not refused (:func:`smsg_ms.cost.operators.shard_refused`: a Reshape
    takes its layout from its neighbours, never the default): the planner can then offer it
    only MindSpore's default batch-parallel layout.
    """
    from ..cost import operators  # lazily: loading sympy is slow
    from ..cost.model import CostModel

    model = CostModel(graph, 1)
    counts = Counter(op.type for op in graph.ops
                     if not operators.shard_refused(op.type) and model.spec(op) is None)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def print_summary(graph: OpGraph, console=None) -> None:
    """Print :func:`summarize` with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    s = summarize(graph)
    table = Table(title=f"{s['name']}: {s['n_ops']} operators")
    table.add_column("operator")
    table.add_column("count", justify="right")
    for op_type, n in s["op_counts"]:
        table.add_row(op_type, str(n))
    console.print(table)
    p = s["parameters"]
    console.print(f"parameters: {p['count']} tensors, {p['elements']:,} elements, "
                  f"{p['bytes']:,} bytes ({p['bytes'] / 2**20:,.1f} MiB)")
    if s["block_groups"]:
        for g in s["block_groups"]:
            pre = g["prefixes"]
            console.print(f"repeated blocks: {len(pre)} identical '{g['container']}' blocks "
                          f"({pre[0]} … {pre[-1]}), {g['ops_per_block']} operators each")
    else:
        console.print("repeated blocks: none found")
    if s["functional"]:
        total = sum(n for _, n in s["functional"])
        console.print(f"functional calls (cannot be sharded): {total}: "
                      + ", ".join(f"{t} ×{n}" for t, n in s["functional"]))
    if s["unknown"]:
        total = sum(n for _, n in s["unknown"])
        kinds = len(s["unknown"])
        console.print(f"[yellow]warning:[/] {total} operator{'s' if total != 1 else ''} of "
                      f"{kinds} type{'s' if kinds != 1 else ''} unknown "
                      "to the cost model (batch-parallel layout only): "
                      + ", ".join(f"{t} ×{n}" for t, n in s["unknown"]), markup=True,
                      highlight=False)
    for w in s["warnings"]:
        console.print(f"[yellow]warning:[/] {w}", markup=True, highlight=False)
