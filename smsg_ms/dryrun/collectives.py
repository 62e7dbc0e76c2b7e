"""Read the collectives MindSpore inserted into a compiled parallel graph (MindIR).

A node whose primitive ``op_type`` is one of :data:`COLLECTIVE_TYPES` is a collective; its group is
in the primitive attribute ``group_ranks`` (``"0-1-2-3"`` or ``"WORLD_GROUP"``) or ``group``; the
node's ``shape`` attribute is its *output* per-device shape and its input's producer gives the
input shape. Scope ``Gradients/...`` marks the backward pass and ``_MirrorOperator`` the gradient
synchronisation of a parameter (``shared/docs/mindspore-dryrun.md``).

Calls into sub-graphs (``model.functions``: reused or lazy-inlined cells, as mindformers builds
them) and closures (the backward graph) are inlined by the capture's own parser,
:func:`smsg_ms.graph.mindir.parse_model`, so a collective inside a layer called ``n`` times is
counted ``n`` times.
"""
from __future__ import annotations

COLLECTIVE_TYPES = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AllToAll",
                    "NeighborExchangeV2", "NeighborExchange", "Send", "Receive", "Broadcast",
                    "AlltoAllV", "MicroStepAllGather", "MiniStepAllGather")
#: Matrix products and convolutions whose FLOPs the comparison counts.
COMPUTE_TYPES = ("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Dense", "Conv2D",
                 "Conv2DExt", "ConvolutionExt", "Conv3D", "Conv2DBackpropInput",
                 "Conv2DBackpropFilter")
_KEEP_ATTRS = ("op", "sr_tag", "dest_rank", "src_rank", "split_dim", "concat_dim", "split_count",
               "fusion", "mean_flag")


def flatten(model):
    """The compiled ``ModelProto`` as one flat :class:`~smsg_ms.graph.model.OpGraph`, every call
    into a sub-graph or closure inlined (:func:`smsg_ms.graph.mindir.parse_model`)."""
    from ..graph.mindir import parse_model

    return parse_model(model, name="compiled")


def _ints(shape) -> list[int]:
    return [int(d) if isinstance(d, int) else -1 for d in shape]


def _pass(scope: str) -> str:
    return "backward" if scope.startswith("Gradients/") else "forward"


def _named_group_size(name: str) -> int:
    """Devices of the communication group ``name`` as MindSpore's communication layer knows it
    (``mindspore.communication.get_group_size``): the groups a network creates itself
    (mindformers' expert-parallel groups, ``create_group`` with a hashed name) carry neither
    ranks nor a ``<size>-`` prefix in the compiled graph. 0 when it cannot be asked (outside
    an initialised dry-run, or an unknown name)."""
    try:
        from mindspore.communication import get_group_size
        return int(get_group_size(name))
    except Exception:   # noqa: BLE001 - any failure means: not known here
        return 0


def collectives_in(graph, world: int) -> list[dict]:
    """Collectives of a flattened compiled graph (:func:`flatten`), one dict per call: keys
    ``type``, ``pass`` (``forward`` / ``backward``), ``grad_sync`` (bool), ``group`` (sorted
    ranks; ``[]`` where only the group's name is known), ``group_size``, ``in_shape``,
    ``out_shape`` (per-device elements), ``dtype``, ``scope``, ``attrs`` (op, sr_tag, peer ranks
    ... when present); ``named_group_size`` where ``group_size`` is 0 (a group the network
    created: :func:`_named_group_size`; kept apart so ``check`` still keys such calls by group
    0, as the plan's ``own_group`` predictions are keyed)."""
    ops = [op for op in graph.ops if op.type in COLLECTIVE_TYPES]
    known: dict[str, list[int]] = {}
    for op in ops:  # forward collectives carry the ranks; backward ones only the group name
        ranks, name = op.attrs.get("group_ranks"), str(op.attrs.get("group", ""))
        if isinstance(ranks, str) and ranks and ranks != "WORLD_GROUP":
            known[name] = sorted(int(r) for r in ranks.split("-"))
    out = []
    for op in ops:
        name = str(op.attrs.get("group", ""))
        if name.endswith("world_group") or op.attrs.get("group_ranks") == "WORLD_GROUP":
            group = list(range(world))
        else:
            group = known.get(name, [])
        head = name.split("-", 1)[0]  # "<size>-<hash>"
        size = len(group) or (int(head) if head.isdigit() else 0)
        dst = graph.tensors[op.outputs[0]] if op.outputs else None
        out_shape = _ints(dst.shape) if dst else []
        src = graph.tensors[op.inputs[0]] if op.inputs else None
        out.append({
            "type": "AlltoAll" if op.type == "AllToAll" else op.type,
            "pass": _pass(op.scope),
            "grad_sync": "Mirror" in op.scope,
            "group": group, "group_size": size,
            **({"named_group_size": _named_group_size(name)} if not size and name else {}),
            "in_shape": _ints(src.shape) if src else out_shape, "out_shape": out_shape,
            "dtype": dst.dtype if dst else "float32", "scope": op.scope,
            "attrs": {k: op.attrs[k] for k in _KEEP_ATTRS if k in op.attrs},
        })
    return out


def compute_in(graph) -> list[dict]:
    """Matrix products and convolutions (:data:`COMPUTE_TYPES`) of a flattened compiled graph, one
    dict per call: ``type``, ``scope``, ``pass``, ``in_shapes`` (first two inputs, per-device
    elements), ``out_shape``."""
    out = []
    for op in graph.ops:
        if op.type not in COMPUTE_TYPES:
            continue
        shapes = [_ints(graph.tensors[t].shape) for t in op.inputs[:2]]
        out.append({"type": op.type, "scope": op.scope, "pass": _pass(op.scope),
                    "in_shapes": shapes + [None] * (2 - len(shapes)),
                    "out_shape": _ints(graph.tensors[op.outputs[0]].shape) if op.outputs
                    else None})
    return out


def collectives_from_model(model, world: int) -> list[dict]:
    """Collectives of a compiled ``ModelProto``, sub-graph calls included (see
    :func:`collectives_in` for the dict keys)."""
    return collectives_in(flatten(model), world)


def read_collectives(cell, phase: str) -> list[dict]:
    """Collectives of ``cell`` compiled under ``phase`` in this process (see above)."""
    from mindspore.communication import get_group_size

    from .compiled import compiled_model

    return collectives_from_model(compiled_model(cell, phase), get_group_size())


def read_op_counts(cell, phase: str, types) -> dict[str, int]:
    """``{"<type> <pass>": calls}`` of the primitives of ``types`` in ``cell`` compiled under
    ``phase`` (sub-graph calls inlined): a recomputed primitive appears once more, in the
    backward pass."""
    from collections import Counter

    from .compiled import compiled_model

    graph = flatten(compiled_model(cell, phase))
    counts = Counter(f"{op.type} {_pass(op.scope)}" for op in graph.ops if op.type in types)
    return dict(sorted(counts.items()))
