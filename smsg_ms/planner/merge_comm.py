"""How many backward collectives the redistributions of one tensor read by several operators
get: MindSpore's ``MergeComm`` pass (``frontend/parallel/pass/merge_comm.cc``, 2.10).

MindSpore's ``StepParallel`` inserts a redistribution per consumer edge (node, input index:
``StepRedistribution`` → ``Redistribution``), on the forward graph: autodiff runs later
(``GetOptPassesA`` in ``pipeline/jit/ps/pass.cc``: ``"parallel"`` (``StepParallel``), then
``"merge_comm"`` (``MergeComm``), then ``"meta_fg_expand"``, which expands the gradient, and
only then ``"cse"``). So every inserted AllGather gets its own bprop ReduceScatter, each of
its own edge's gradient; the common-subexpression elimination after autodiff merges the equal
forward chains (one AllGather counted) but not the backward ones (different inputs).

Before autodiff, ``MergeAllGather`` replaces AllGathers of one input by one:
``AllGatherInputMap`` keys each AllGather by its input walked back through ``Reshape``\\ s, then
through one ``Cast`` (attribute ``cast_type``), then through one ``TupleGetItem`` (attribute
``get_item_index``, the key becomes the tuple's producer), keeping only keys that are primitive
CNodes; a key's AllGathers are merged only if *all* of them agree on the communication group,
on whether their direct input is a ``Reshape`` (and its target shape), on the func graph, on
``cast_type`` and on ``get_item_index`` (``MergeAllGather``: ``std::all_of``, else none is
merged). Only the first AllGather of a chain reads the tensor itself; a later one reads its own
chain's nodes, so its ReduceScatter stays one per edge.

Seen in MindSpore's compile (``MS_DEV_SAVE_GRAPHS``, ``merge_comm_*.ir``): BERT's q/k/v
``Dense`` read one ``LayerNorm`` output (``get_item_index`` 0 for all three): merged, one
ReduceScatter; DeepSeek-V3's rotary ``strideslice`` reads ``q_pe`` twice, item 1 of the
attention's ``SplitWithSize`` whose item 0 (``q_nope``) is gathered too: the key's AllGathers
disagree on ``get_item_index``, none merged, two ReduceScatters for ``q_pe``.

A ``Depend`` (``ops.depend``) on the walk ends it: the capture looks through it, MindSpore's
walk does not, so the AllGathers behind it have a key of their own (TeleChat3's rotary ``Cast``
of ``key``, read by a ``Depend`` after the QKV split: its two AllGathers merged, one
ReduceScatter, seen in ``merge_comm_*.ir`` at 4 devices a stage).

Not modelled: the capture's graph is the compiled one, after MindSpore's CSE, so operators that
were separate calls of one computation (``nn.MultiheadAttention``'s three ``swapaxes`` of one
tensor, each read by one projection: three keys, three ReduceScatters) look like one producer
here; a Reshape the redistribution inserts itself; func graphs (lazy-inlined cells) are taken
as one; a tensor without a producing operator (a weight, a data input) keeps one backward part.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..cost.operators import reshape
from ..graph.model import OpGraph


@dataclass(frozen=True)
class FirstGather:
    """The first AllGather of the redistribution chains of one tensor to one layout.

    Attributes:
        source: id of the operator ``AllGatherInputMap`` keys it by (:func:`gather_source`).
        agree: what ``MergeAllGather`` compares between AllGathers of one key: the gather's
            communication group (size, span), the tensor's shape when its producer is a
            Reshape (else ``None``), the ``Cast`` passed and the output index.
    """

    source: int | tuple
    agree: tuple


def gather_source(graph: OpGraph, tensor: str) -> tuple[int, tuple] | None:
    """``(operator id, (reshape target shape or None, cast, output index or None))``: the key
    and the compared attributes ``AllGatherInputMap`` gives an AllGather inserted on
    ``tensor``; ``None`` when the walk ends at no operator (a weight or a data input; MindSpore
    then sees a ``Load`` or the dataset's ``TupleGetItem``, not modelled)."""
    op = graph.producer_of(tensor)
    reshaped = tuple(graph.tensors[tensor].shape) if op is not None and \
        op.type in reshape.TYPES else None
    name = tensor
    while op is not None and op.type in reshape.TYPES and op.inputs:
        if 0 in op.depend_inputs:
            return None
        name = op.inputs[0]
        op = graph.producer_of(name)
    cast = None
    if op is not None and op.type == "Cast" and op.inputs:
        if 0 in op.depend_inputs:       # the walk stops at the Depend: a key of its own
            return ("depend", op.id), (reshaped, repr(sorted(op.attrs.items())), None)
        cast = repr(sorted(op.attrs.items()))
        name = op.inputs[0]
        op = graph.producer_of(name)
    if op is None:
        return None
    index = op.outputs.index(name) if len(op.outputs) > 1 and name in op.outputs else None
    return op.id, (reshaped, cast, index)


def first_gather(graph: OpGraph, tensor: str, collectives) -> FirstGather | None:
    """The :class:`FirstGather` of a redistribution of ``tensor`` whose collectives
    (:meth:`~smsg_ms.cost.model.CostModel.redistribution`, forward/backward twins in order)
    start with an AllGather; ``None`` otherwise or without a source operator."""
    forward = [c for c in collectives if c.phase == "forward"]
    if not forward or forward[0].kind != "AllGather":
        return None
    got = gather_source(graph, tensor)
    if got is None:
        return None
    source, attrs = got
    return FirstGather(source, ((forward[0].group, tuple(forward[0].span)),) + attrs)


def merged_sources(gathers) -> set[int]:
    """The keys whose AllGathers ``MergeAllGather`` merges into one: all of them agree."""
    seen: dict[int, set] = defaultdict(set)
    for g in gathers:
        seen[g.source].add(g.agree)
    return {s for s, agree in seen.items() if len(agree) == 1}


def another_edge_backward(collectives, merged: bool) -> list:
    """The backward collectives one more consumer edge of the same redistribution adds: every
    backward collective of its chain, less the first AllGather's ReduceScatter when
    ``merged`` (that AllGather is shared, its bprop sums the edges' gradients first)."""
    backward = [c for c in collectives if c.phase == "backward"]
    forward = [c for c in collectives if c.phase == "forward"]
    if merged and forward and forward[0].kind == "AllGather" and backward \
            and backward[0].kind == "ReduceScatter":
        return backward[1:]
    return backward
