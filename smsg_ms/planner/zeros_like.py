"""The forward AllGathers of a folded ``ops.zeros_like(y)`` (:attr:`TensorInfo.zeros_like`).

MindSpore's parallel pass (``StepParallel``, optimizer pass ``"parallel"`` of ``opt_a`` in
``pipeline/jit/ps/pass.cc``) still sees ``ZerosLike(y)`` as an operator: without a strategy it
gets the batch default (its first dimension cut over the stage's devices, ``gen_strategy
((8, 1, 1))`` in the ``merge_comm`` IR dump), and its output is redistributed into each
reader's layout like any operator output (an ``AllGather`` when the reader wants it whole:
``ops.where(mask, zeros_like(y), ...)`` under a broadcast mask). Only later, in ``opt_b``,
``ZeroLikeFillZero`` (``frontend/optimizer/irpass/special_op_eliminate.h``) folds the
``ZerosLike`` into a zero constant of its slice shape: each inserted AllGather then reads a
constant, so the ``cse`` of ``opt_b`` merges every equal one (one per distinct slice and
group in the whole graph: over blocks, and over micro-batches of a pipeline stage), and no
backward collective is left (a constant carries no gradient).

Seen in the dry-run compile (8 devices, 2 blocks of ``ops.where(mask, zeros_like(y),
gelu(y))``): 3 forward AllGathers of ``[2, 8, 32]``, 2 for the ``gelu`` input and 1 for both
zeros; ``ops.zeros(y.shape)`` instead is folded before the parallel pass (type inference) and
adds none (:mod:`smsg_ms.networks.zeros_like`).
"""
from __future__ import annotations

from ..graph.model import OpGraph
from .data_inputs import dataset_layout


def zeros_like_reads(graph: OpGraph, index: dict) -> list[tuple[int, int, str]]:
    """``(operator id, input position, tensor)`` of every planned operator's read of a
    folded ``zeros_like`` constant, in graph order (``index``:
    :func:`smsg_ms.planner.variables.variable_index`)."""
    out = []
    for op in graph.ops:
        if op.id not in index:
            continue
        for pos, name in enumerate(op.inputs):
            t = graph.tensors[name]
            if t.kind == "constant" and t.zeros_like:
                out.append((op.id, pos, name))
    return out


def batch_default_layout(shape: tuple, devices: int):
    """The layout of a strategy-less ``ZerosLike``'s output: the first dimension cut over
    ``devices`` when it divides, else whole (``OperatorInfo::GenerateBatchStrategies``)."""
    first = shape[0] if shape else 1
    cut = devices if isinstance(first, int) and first % devices == 0 else 1
    return dataset_layout(tuple([cut] + [1] * (len(shape) - 1)), devices)


def zeros_like_collectives(graph: OpGraph, model, variables, choice, index: dict):
    """``[(variable, merge key, collectives)]``: the forward collectives of the
    redistribution of each read of a folded ``zeros_like`` constant into its reader's layout
    under ``choice``. Reads of one merge key (shape, dtype, the two layouts' normal forms) are
    one set of collectives wherever one graph compiles them (one step, or one pipeline stage
    over all its micro-batches): the ``cse`` after the fold merges the rest; the plan lists
    each read and ``check`` counts a key once (:func:`~smsg_ms.integration.check.merged_once`)."""
    out = []
    for op_id, pos, name in zeros_like_reads(graph, index):
        v, call = index[op_id]
        tensor = graph.tensors[name]
        dst = variables[v].options[choice[v]][call].in_layouts[pos]
        src = batch_default_layout(tensor.shape, model.devices)
        pair = (model.normalized(src), model.normalized(dst))
        if pair[0] == pair[1]:
            continue
        colls = [c for c in model.redistribution(tensor, src, dst) if c.phase == "forward"]
        if colls:
            key = f"zeros_like {list(tensor.shape)} {tensor.dtype} {pair[0]} -> {pair[1]}"
            out.append((v, key, colls))
    return out
