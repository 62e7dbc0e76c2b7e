"""Which operator pays for a parameter that several operators read.

MindSpore gives a parameter one tensor layout whatever the number of its users (a second layout
fails with "multiple users, but the TensorInfo are different"), accumulates the gradients of all
users into one gradient, synchronises it once (one ``_MirrorOperator``, one AllReduce) and keeps
one copy of the weight, its gradient and its optimizer state. The cost model therefore charges
those to one user, the *owner*: the first operator in graph (topological) order that reads the
parameter, directly or through Casts (a Cast hands its consumer the parameter's layout, see
:meth:`smsg_ms.cost.model.CostModel.borrowed_inputs`). The other users still pay their own computation,
including the backward FLOPs of their share of the weight gradient. Charging one user is exact
because the search forbids users that disagree on the layout (an infinite edge), so every user
would charge the same amounts. "Agree" is MindSpore's test (``IsSameTensorLayout``,
``frontend/parallel/step_parallel_utils.cc``): the same ranks along each dimension's cutting
axis (:meth:`smsg_ms.cost.layout.TensorLayout.dim_groups`), not only the same cuts; two users
cutting the weight alike over other device-matrix axes fail the compile
(:mod:`smsg_ms.networks.shared_weight`).

Seen in the dry-run on :mod:`smsg_ms.networks.tied` (a table read by a Gather and by the output
head): two gradient AllReduces (table and ``w``), not three.
"""
from __future__ import annotations

from ..graph.model import OpGraph
from .operators import passes_layout_through


def parameter_source(graph: OpGraph, name: str) -> str:
    """The parameter behind tensor ``name`` when it is a parameter or a Cast of one (through any
    chain of Casts); ``name`` itself otherwise."""
    seen = name
    while True:
        t = graph.tensors[seen]
        if t.kind == "parameter" or t.producer is None:
            return seen if t.kind == "parameter" else name
        op = graph.ops[t.producer]
        if not passes_layout_through(op.type):
            return name
        seen = op.inputs[0]


def readers(graph: OpGraph, parameter: str) -> list[int]:
    """Ids of the operators reading ``parameter`` directly or through Casts (the Casts
    themselves left out), ascending (topological order)."""
    out, todo = [], [parameter]
    while todo:
        for op_id in graph.tensors[todo.pop()].consumers:
            op = graph.ops[op_id]
            if passes_layout_through(op.type):
                todo.extend(op.outputs)
            else:
                out.append(op_id)
    return sorted(set(out))


def borrowed_inputs(graph: OpGraph, op_id: int) -> tuple[int, ...]:
    """Positions of the inputs of operator ``op_id`` that are parameters another operator pays
    for: one that reads the parameter earlier (empty for almost every operator)."""
    op = graph.ops[op_id]
    if passes_layout_through(op.type):
        return ()
    out = []
    for i, name in enumerate(op.inputs):
        src = parameter_source(graph, name)
        if graph.tensors[src].kind == "parameter" and readers(graph, src)[0] != op_id:
            out.append(i)
    return tuple(out)


def synced_per_reader(graph: OpGraph, parameter: str) -> bool:
    """Does every reader of ``parameter`` get its own gradient AllReduce? Yes when it has
    several readers, all read it directly (no Cast) and all are functional operators outside
    the cell owning it (:attr:`~smsg_ms.graph.model.TensorInfo.foreign_reads`): the weight was
    passed once as a call argument (``nn.GRU``/``nn.RNN``'s ``_DynamicRNNBase`` gets its
    weights once and reads them in every unrolled step). MindSpore's auto-monad loads a
    parameter once per node of the calling graph that uses it, so such a weight has one
    ``Load`` feeding every reader; ``DoInsertMirrorOps`` (``frontend/parallel/step_parallel.cc``)
    shares a ``_MirrorOperator`` only through ``FindCNode`` on the parameter's own users, which
    happens when the parameter has several users (``is_shared_param``: the mirror goes before
    the Load); with one Load each reader gets a mirror of its own. Seen in the dry-run: nn.GRU
    over 12 steps, 12 AllReduces per weight; the same weight read in each step by
    ``self.w`` (a Load per read) gets one."""
    t = graph.tensors[parameter]
    users = readers(graph, parameter)
    return (t.kind == "parameter" and len(users) > 1 and t.foreign_reads >= len(users)
            and all(parameter in graph.ops[i].inputs for i in users))


def self_synced_inputs(graph: OpGraph, op_id: int) -> tuple[int, ...]:
    """Positions of the :func:`borrowed_inputs` of operator ``op_id`` whose gradient it
    nevertheless synchronises itself (:func:`synced_per_reader`)."""
    op = graph.ops[op_id]
    return tuple(i for i in borrowed_inputs(graph, op_id)
                 if synced_per_reader(graph, op.inputs[i]))


def kept_whole(graph: OpGraph, name: str) -> bool:
    """Does MindSpore's batch-parallel default leave tensor ``name`` whole as a parameter? Only
    a parameter that requires a gradient: ``ExtractInputParameterByNode``
    (``frontend/parallel/step_parallel_utils.cc``) sets an input's parameter flag, which turns
    its batch split flag off, to ``ParameterRequireGrad``; a non-trainable parameter
    (mindformers' MoE router ``fi_accu`` under its strategy-less ``AssignAdd``) is cut like
    data."""
    t = graph.tensors[name]
    return t.kind == "parameter" and bool(t.requires_grad)


def kept_whole_by(graph: OpGraph, op, name: str) -> bool:
    """:func:`kept_whole` for ``name`` read by the strategy-less ``op``, except where ``name`` is
    ``op``'s only non-constant input and ``op`` is no pass-through (Cast): then the base rule
    ``OperatorInfo::ReComputeBatchSplitFlagList`` (``ops_info/operator_info.cc``: input 0's
    split flag on) cuts the parameter's first dimension like data. Seen in the dry-run: a
    functional ``ops.transpose(w, (1, 0))`` (``F.linear``-style ``x @ w.T``,
    ``nn.MultiheadAttention``'s ``out_proj``) cuts ``w`` 8 ways on 8 devices, so its gradient
    needs no AllReduce and the matmul behind it gathers it."""
    if not kept_whole(graph, name):
        return False
    data = [n for n in op.inputs if graph.tensors[n].kind != "constant"]
    return data != [name] or passes_layout_through(op.type)
