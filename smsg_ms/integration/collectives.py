"""Read the collectives MindSpore inserted into a compiled parallel graph (MindIR).

A node whose primitive ``op_type`` is one of :data:`COLLECTIVE_TYPES` is a collective; its group is
in the primitive attribute ``group_ranks`` (``"0-1-2-3"`` or ``"WORLD_GROUP"``) or ``group``; the
node's ``shape`` attribute is its *output* per-device shape and its input's producer gives the
input shape. Scope ``Gradients/...`` marks the backward pass and ``_MirrorOperator`` the gradient
synchronisation of a parameter (``shared/docs/mindspore-dryrun.md``).
"""
from __future__ import annotations

COLLECTIVE_TYPES = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AllToAll",
                    "NeighborExchangeV2", "NeighborExchange", "Send", "Receive", "Broadcast",
                    "AlltoAllV", "MicroStepAllGather", "MiniStepAllGather")


def _shape_of(node) -> tuple[list[int], str]:
    from smsg_ms.graph.mindir import _output_types

    types = _output_types(node)
    shape, dtype = types[0] if types else ((), "float32")
    return [int(d) if isinstance(d, int) else -1 for d in shape], dtype


def collectives_from_model(model, world: int) -> list[dict]:
    """Collectives of a ``ModelProto``: dicts with keys ``type``, ``pass`` (``forward`` /
    ``backward``), ``grad_sync`` (bool), ``group`` (sorted ranks), ``group_size``, ``in_shape``,
    ``out_shape``, ``dtype``, ``scope``, ``attrs`` (op, sr_tag, peer ranks ... when present)."""
    from smsg_ms.graph.mindir import decode_attribute

    prims = {p.name: p for p in model.primitives}
    shapes = {}
    for node in model.graph.node:
        if node.output:
            shapes[node.output[0]] = _shape_of(node)
    for p in model.graph.parameter:
        shapes[p.name] = ([int(d) for d in p.dims], "float32")
    for inp in model.graph.input:
        if inp.tensor:
            shapes[inp.name] = ([int(d) for d in inp.tensor[0].dims], "float32")
    nodes = []
    known: dict[str, list[int]] = {}
    for node in model.graph.node:
        if not node.op_type.startswith("REF::"):
            continue
        prim = prims.get(node.op_type[5:])  # absent: a call into a sub-graph
        if prim is None or prim.op_type not in COLLECTIVE_TYPES:
            continue
        attrs = {a.name: decode_attribute(a) for a in prim.attribute}
        ranks, name = attrs.get("group_ranks"), str(attrs.get("group", ""))
        if isinstance(ranks, str) and ranks and ranks != "WORLD_GROUP":
            known[name] = sorted(int(r) for r in ranks.split("-"))
        nodes.append((node, prim, attrs))
    out = []
    for node, prim, attrs in nodes:
        name = str(attrs.get("group", ""))
        if name.endswith("world_group") or attrs.get("group_ranks") == "WORLD_GROUP":
            group = list(range(world))
        else:
            group = known.get(name, [])
        # Backward collectives carry only the group name "<size>-<hash>".
        head = name.split("-", 1)[0]
        size = len(group) or (int(head) if head.isdigit() else 0)
        ranks = attrs.get("group_ranks")
        out_shape, dtype = _shape_of(node)
        in_shape = shapes.get(node.input[0], (out_shape, dtype))[0] if node.input else out_shape
        scope = node.domain
        keep = {k: v for k, v in attrs.items() if k in ("op", "sr_tag", "dest_rank", "src_rank",
                                                         "split_dim", "concat_dim", "split_count",
                                                         "fusion", "mean_flag")}
        out.append({
            "type": "AlltoAll" if prim.op_type == "AllToAll" else prim.op_type,
            "pass": "backward" if scope.startswith("Gradients/") else "forward",
            "grad_sync": "_MirrorOperator" in scope or "Mirror" in scope,
            "group": group, "group_size": size,
            "in_shape": in_shape, "out_shape": out_shape, "dtype": dtype, "scope": scope,
            "attrs": keep,
        })
    return out


def read_collectives(cell, phase: str) -> list[dict]:
    """Collectives of ``cell`` compiled under ``phase`` in this process (see above)."""
    from mindspore.communication import get_group_size
    from mindspore.graph.api import _cell_graph_executor
    from mindspore.train import mind_ir_pb2

    model = mind_ir_pb2.ModelProto()
    model.ParseFromString(_cell_graph_executor._get_func_graph_proto(cell, phase, "mind_ir"))
    return collectives_from_model(model, get_group_size())
