"""Reshape: MindSpore refuses its ``shard()`` ("goes for nothing", ``step_parallel.cc``); its
layout comes from its neighbours, so the planner plans each call on its own and never writes a
strategy back (:data:`SHARD` ``"refused"``).

Options (:func:`options`): one per layout the Reshape passes through with no communication,
keyed by the input cuts (:func:`passthrough_options`, shared with Cast).

The gather rule (D9 in ``docs/known-differences.md``), written here once: a layout that cannot
pass the Reshape (:func:`~smsg_ms.cost.layout.maps_through_reshape`) makes MindSpore gather the
whole tensor, reshape and slice (``TensorRedistribution::InferTensorRedistributionOperatorList
UnExpand``). :func:`gathers` says when; :func:`edge_destination` is the layout a redistribution
into or out of a Reshape then really goes to; :func:`through_reshape_block` applies it to a
block of redistribution seconds; :func:`redistribution_through` prices producer → Reshape →
consumer.
"""
from __future__ import annotations

import dataclasses
import itertools
from math import prod

import numpy as np

from ...graph.model import DTYPE_BYTES
from ..api import MEMORY_KINDS, Collective, OpCost
from ..layout import TensorLayout, front_split, maps_through_reshape, operator_layout
from ..redistribution_reshape import unify_through_reshape
from .base import divides, divisors

TYPES = ("Reshape",)
#: MindSpore refuses ``shard()`` on a Reshape: planned per call, never written back.
SHARD = "refused"


def describe(op, in_shapes, out_shapes):
    """No einsum declaration: a Reshape computes nothing and its options are layouts."""
    return None


def options(model, op) -> list[OpCost]:
    """The Reshape's options: :func:`passthrough_options` (possibly none); with
    ``model.enable_alltoall``, only those that use every device when there are such.

    Why: MindSpore gives a Reshape no layout of its own; it redistributes from the producer's
    layout to the consumer's through it (``ReshapeInfo``, the tensor redistribution of the
    expanded shapes). With AllGather redistribution, a middle layout the planner picks costs
    what MindSpore's direct redistribution costs; with AlltoAll it does not: a replicated middle
    (gather, then slice) is cheaper in the model for small tensors, yet MindSpore moves the cut
    with AlltoAlls (seen in the dry-run, ``tests/test_moe.py``: ``(E, B, C, h)`` cut
    ``(1, 8, 1, 1)`` into a Reshape whose consumer takes ``(4, 2, 1)`` is two AlltoAlls)."""
    got = passthrough_options(model.graph, op, model.devices)
    wanted = parameter_layout_cuts(model.graph, op, model.devices)
    if wanted is not None:
        got = [o for o in got if tuple(o.strategy[0]) == wanted] or got
    if getattr(model, "enable_alltoall", False):
        full = [o for o in got if prod(o.strategy[0]) == model.devices]
        got = full or got
    return [_holding(model, op, o) for o in got]


def parameter_layout_cuts(graph, op, devices: int) -> tuple | None:
    """The input cuts MindSpore gives a Reshape of a parameter that no other operator lays
    out: ``CreateParameterLayout`` (``frontend/parallel/step_parallel_utils.cc``, "shard
    parameter's first dimension when parameter->Reshape->Op") cuts the parameter's first
    dimension over the stage's devices when they divide it, else leaves it whole;
    ``FindParameterNextLayout`` takes the layout of another reader first, skipping Reshapes
    (``None`` here: such a reader decides). Seen in the dry-run (mindcv ConViT's
    ``gating_param (heads,)``, 4 heads): whole on 8 devices (its gradient AllReduced), cut 4
    ways on a pipeline stage of 4 (an AllGather of it instead, no AllReduce;
    :mod:`smsg_ms.networks.reshaped_weight`)."""
    t = graph.tensors[op.inputs[0]]
    if t.kind != "parameter" or not t.shape or \
            any(graph.ops[c].type not in TYPES for c in t.consumers):
        return None
    first = t.shape[0]
    cut = devices if isinstance(first, int) and first % devices == 0 else 1
    return (cut,) + (1,) * (len(t.shape) - 1)


def _holding(model, op, option: OpCost) -> OpCost:
    """``option`` with the trained parameter the Reshape reads (``ops.reshape(self.gate, (1,
    -1, 1, 1))``, mindcv ConViT's ``gating_param``): its slice's memory and its gradient
    AllReduce over the replicas. MindSpore inserts the parameter's mirror (the gradient
    AllReduce) at its first reader, here the Reshape (``ReshapeInfo``; the dry-run files it
    under the Reshape's cell, ``Grad__MirrorOperator``), and no consumer looks through a
    Reshape to the parameter (only through a Cast). A parameter another operator reads first
    pays there (``model.borrowed_inputs``:
    :func:`~smsg_ms.cost.shared_parameters.borrowed_inputs`)."""
    t = model.graph.tensors[op.inputs[0]]
    if t.kind != "parameter" or 0 in model.borrowed_inputs(op):
        return option
    cut = prod(option.strategy[0])
    nbytes = (t.numel or 0) * DTYPE_BYTES.get(t.dtype, 4) / cut
    memory = dict(option.memory, parameter=option.memory.get("parameter", 0) + nbytes)
    colls = list(option.collectives)
    if t.requires_grad:
        memory["gradient"] = memory.get("gradient", 0) + nbytes
        memory["optimizer"] = (memory.get("optimizer", 0)
                               + (t.numel or 0) / cut * 4 * getattr(model, "states", 2))
        if model.devices // cut > 1:
            colls.append(Collective("AllReduce", model.devices // cut, nbytes, "grad_sync",
                                    t.name, "gradient of a weight read by a Reshape"))
    return dataclasses.replace(option, collectives=colls, memory=memory)


def reshape_groups(src: tuple, dst: tuple):
    """Pair runs of input and output dimensions with equal products (a reshape merges or splits
    only within such runs). Returns ``[(input dims, output dims), ...]``, or ``None`` when
    symbolic sizes prevent the pairing."""
    if any(not isinstance(s, int) for s in src + dst):
        return [([i], [i]) for i in range(len(src))] if src == dst else None
    groups, i, j = [], 0, 0
    try:
        while i < len(src) and j < len(dst):
            gi, gj, pi, pj = [i], [j], src[i], dst[j]
            i, j = i + 1, j + 1
            while pi != pj:
                if pi < pj:
                    pi *= src[i]
                    gi.append(i)
                    i += 1
                else:
                    pj *= dst[j]
                    gj.append(j)
                    j += 1
            groups.append((gi, gj))
    except IndexError:
        return None
    groups += [([k], []) for k in range(i, len(src))] + [([], [k]) for k in range(j, len(dst))]
    return groups


def passthrough_options(graph, op, devices: int) -> list[OpCost]:
    """One option per layout a Reshape (or a Cast) of ``graph`` passes through with no
    communication on ``devices`` devices: per group of dimensions it merges or splits
    (:func:`reshape_groups`), a cut count that splits both sides into contiguous chunks
    (:func:`~smsg_ms.cost.layout.front_split`: 32 rows cut 8 into ``(4, 8)`` cut ``(4, 2)``; 768
    cut 4 into 12 heads cut 4 × 64). Keyed by the input cuts: ``in_layouts[0]`` is what it
    takes, ``out_layouts[0]`` what it gives; no FLOPs, no memory, no collective."""
    src = tuple(graph.tensors[op.inputs[0]].shape)
    dst = tuple(graph.tensors[op.outputs[0]].shape)
    groups = [(gi, go) for gi, go in (reshape_groups(src, dst) or []) if gi and go]
    n = devices
    choices = []
    for g_in, g_out in groups:
        row = []
        for c in divisors(n):
            if c == 1:
                row.append((1, [1] * len(g_in), [1] * len(g_out)))
                continue
            sizes_in, sizes_out = [src[i] for i in g_in], [dst[j] for j in g_out]
            if any(not isinstance(x, int) for x in sizes_in + sizes_out):
                if len(g_in) == len(g_out) == 1 and divides(sizes_in[0], c) and \
                        divides(sizes_out[0], c):
                    row.append((c, [c], [c]))
                continue
            a, b = front_split(sizes_in, c), front_split(sizes_out, c)
            if a is not None and b is not None:
                row.append((c, a, b))
        choices.append(row)
    out = []
    for combo in itertools.product(*choices):
        if n % prod(c for c, _, _ in combo):
            continue
        in_cuts = [1] * len(src)
        sides = []
        for dims, pick in ((len(src), 1), (len(dst), 2)):
            axes, where = [], [None] * dims
            for (g_in, g_out), chosen in zip(groups, combo):
                for d, c in zip(g_in if pick == 1 else g_out, chosen[pick]):
                    if c > 1:
                        where[d] = len(axes)
                        axes.append(c)
                        if pick == 1:
                            in_cuts[d] = c
            sides.append(operator_layout(axes, where, n))
        out.append(OpCost(tuple([tuple(in_cuts)]), [sides[0]], [sides[1]], 0, 0, [],
                          {k: 0 for k in MEMORY_KINDS},
                          ["Reshape: layout passed through (not written back; MindSpore "
                           "redistributes around it)"]))
    return out


def gathers(graph, op, layout: TensorLayout, side: str) -> bool:
    """Whether MindSpore gathers the whole tensor at Reshape ``op`` of ``graph`` because
    ``layout`` cannot pass it (:func:`~smsg_ms.cost.layout.maps_through_reshape`):
    ``side="input"``, the producer's layout of the Reshape's input; ``side="output"``, a
    consumer's layout of its output. MindSpore then gathers the input as it comes, reshapes and
    slices (D9 in docs/known-differences.md): so the redistribution into the Reshape goes to the
    replicated layout (input side), or the one out of it first gathers the Reshape's output
    (output side; same collectives, the reshape moves no data). ``False`` for other operators
    (a Cast passing a layout through has equal shapes).

    Raises:
        ValueError: ``side`` is neither ``"input"`` nor ``"output"``.
    """
    if side not in ("input", "output"):
        raise ValueError(f"side {side!r}: expected 'input' or 'output'")
    if op.type not in TYPES:
        return False
    shapes = (tuple(graph.tensors[op.inputs[0]].shape), tuple(graph.tensors[op.outputs[0]].shape))
    mine, other = shapes if side == "input" else shapes[::-1]
    return not maps_through_reshape(layout, mine, other)


def edge_destination(graph, producer, consumer, tensor: str, src: TensorLayout,
                     dst: TensorLayout, devices: int, gathered=None) -> TensorLayout:
    """The layout MindSpore really redistributes ``tensor`` to on the edge ``producer`` →
    ``consumer`` when the producer gives ``src`` and the consumer takes ``dst``: the replicated
    layout when a Reshape at either end gathers (:func:`gathers`: ``src`` cannot enter a
    consumer Reshape, or ``dst`` cannot leave a producer Reshape), else ``dst``.
    ``gathered``: a memoised stand-in for :func:`gathers` (same arguments but ``graph``)."""
    test = gathered or (lambda op, layout, side: gathers(graph, op, layout, side))
    if test(consumer, src, "input") or test(producer, dst, "output"):
        return TensorLayout.replicated(len(graph.tensors[tensor].shape), devices)
    return dst


def through_reshape_block(model, producer, consumer, tensor, src: list, dst: list,
                          block: np.ndarray) -> np.ndarray:
    """``block`` (seconds, ``src`` × ``dst`` layouts of ``tensor`` on the edge ``producer`` →
    ``consumer``) with :func:`edge_destination` applied: a row whose source cannot enter the
    consumer Reshape costs its redistribution to the replicated layout whatever the
    destination; a column whose destination cannot leave the producer Reshape costs, per row,
    the gather of the Reshape's output to the replicated layout. ``block`` itself when neither
    end gathers (``model``: a :class:`~smsg_ms.cost.model.CostModel`)."""
    rows = [i for i, a in enumerate(src) if model.reshape_gathers(consumer, a, "input")]
    cols = [j for j, b in enumerate(dst) if model.reshape_gathers(producer, b, "output")]
    if not rows and not cols:
        return block
    block = np.array(block, dtype=float)
    whole = TensorLayout.replicated(len(tensor.shape), model.devices)
    for i in rows:
        block[i, :] = model.redistribution_seconds(tensor, src[i], whole)
    for j in cols:
        block[:, j] = [model.redistribution_seconds(tensor, a, whole) for a in src]
    return block


def redistribution_through(model, op, src: TensorLayout, dst: TensorLayout) -> list[Collective]:
    """Collectives of moving ``src`` (the producer's layout of Reshape ``op``'s input) to
    ``dst`` (the consumer's layout of its output) through ``op`` (``model``: a
    :class:`~smsg_ms.cost.model.CostModel`).

    When MindSpore can expand both layouts onto one shape and device matrix
    (:func:`~smsg_ms.cost.redistribution_reshape.unify_through_reshape`, its
    ``UnifyDeviceArrangementAndTensorShape``), one redistribution between the expanded layouts,
    as MindSpore infers it (D11 in docs/known-differences.md: a strided merge is three 2-way
    AllGathers, not a 2-way and a 4-way). Otherwise (D9, the tensor is gathered whole) as the
    search charges it: the cheapest option of the two redistributions into and out of the
    Reshape, with :func:`gathers` applied on both sides. Cheapest by a flat price, ring volume over the
    machine's innermost level plus its latency per collective, as MindSpore's own
    communication cost has no levels (``RedistributionOperatorInfer``'s cost is bytes moved):
    the hierarchical time would favour a larger group whose network part is smaller, a layout
    MindSpore does not pick (the dry-run's Reshape bank on 16 devices)."""
    n = model.devices
    t_in, t_out = (model.graph.tensors[op.inputs[0]], model.graph.tensors[op.outputs[0]])
    unified = unify_through_reshape(t_in.shape, src, t_out.shape, dst)
    if unified is not None:
        shape, a, b = unified
        return model.redistribution(t_in, a, b, shape=shape)
    best = None
    for opt in model.options(op):
        head = TensorLayout.replicated(len(t_in.shape), n) \
            if gathers(model.graph, op, src, "input") else opt.in_layouts[0]
        tail = TensorLayout.replicated(len(t_out.shape), n) \
            if gathers(model.graph, op, dst, "output") else dst
        colls = (model.redistribution(t_in, src, head)
                 + model.redistribution(t_out, opt.out_layouts[0], tail))
        if best is None or _flat_seconds(model, colls) < _flat_seconds(model, best):
            best = colls
    return best or []


def _flat_seconds(model, colls) -> float:
    bandwidth, latency = model.hardware.links()[0]
    return sum(float(c.volume) / bandwidth + latency for c in colls)
