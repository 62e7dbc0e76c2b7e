"""Which tensors of a captured network get a gradient that depends on the data.

MindSpore's compiled training step has no backward collective on a tensor whose gradient is
nothing or a constant: ``GradOperation`` builds no bprop for an output the loss does not read
(the router's ``afb_reduce_mean``, whose output feeds ``AssignAdd`` only), and the bprop of a
forward ``AllReduce`` (``grad_comm_ops.py``: ``AllReduce(dout)``) is folded away when ``dout``
is a constant (the MoE auxiliary loss ``reduce_mean_aux_2d``: the step's sens, 1, times the
constant coefficients of ``mul_noshard`` and the additions into the returned loss). Dry-run of
mindformers' DeepSeek-V3 at 8 devices (``docs/networks.md``): of the 6 backward AllReduces of
its 6 reductions to a scalar or a ``(E,)`` vector, only the two loss numerators' (their
gradient ``1/denominator``) are in the compiled graph.

The gradient is propagated from the network's outputs against the operators' order: an output
of one element (a network that returns its own loss: the training wrapper's mean of it is the
loss itself) starts constant, any other output data-dependent (the loss of the outputs reads
them). An operator passes its outputs' gradient on unchanged in kind to an input it is linear
in with constant coefficients (:data:`LINEAR`; ``Mul``/``Div`` by constants); any other
operator makes it data-dependent.
"""
from __future__ import annotations

from math import prod

from ..graph.model import OpGraph

#: operators whose bprop for every input is ``dout`` reshaped, summed, sliced or scaled by a
#: constant (``mindspore/ops/_grad_experimental``): no forward value enters the gradient
LINEAR = frozenset({
    "Add", "AddExt", "AddN", "Sub", "SubExt", "Neg", "Muls", "Divs",
    "Reshape", "Cast", "ExpandDims", "Squeeze", "Transpose", "Identity", "Flatten",
    "BroadcastTo", "Tile", "Concat", "StridedSlice", "Split", "SplitWithSize",
    "ReduceSum", "ReduceMean", "SumExt", "MeanExt",
})
#: linear in the inputs listed when every other input is a constant
_SCALED = {"Mul": (0, 1), "Div": (0,), "RealDiv": (0,)}
#: operators whose bprop returns zeros for every input (``ReturnZeros`` in
#: ``frontend/expander/bprop/grad_ops/grad_array_ops.cc``): no gradient reaches their inputs
#: and their outputs carry none, so a redistribution of such an output has no backward part
#: (``mint.zeros_like(y)`` gathered for a Select: no ReduceScatter in the dry-run)
NO_GRADIENT = frozenset({"ZerosLike", "ZerosLikeExt", "OnesLike", "OnesLikeExt"})

CONSTANT, VARYING = 1, 2


def _input_kind(graph: OpGraph, op, index: int, out_kind: int) -> int:
    """Kind of the gradient ``op`` gives its input ``index`` from its outputs' ``out_kind``."""
    if op.type in LINEAR:
        return out_kind
    if index in _SCALED.get(op.type, ()):
        others = [n for i, n in enumerate(op.inputs) if i != index]
        if all(graph.tensors[n].kind == "constant" for n in others):
            return out_kind
    return VARYING


def data_dependent_gradients(graph: OpGraph) -> set[str]:
    """Names of the tensors whose gradient depends on the data (see the module docstring);
    tensors the outputs do not read, or read with a constant gradient, are not in it."""
    return {n for n, k in gradient_kinds(graph).items() if k == VARYING}


def gradient_kinds(graph: OpGraph) -> dict[str, int]:
    """``{tensor name: CONSTANT or VARYING}`` of every tensor the outputs read (see the module
    docstring); a tensor they do not read (no gradient at all) is left out."""
    kind: dict[str, int] = {}
    for name in graph.outputs:
        shape = graph.tensors[name].shape
        kind[name] = CONSTANT if prod(int(d) for d in shape) == 1 else VARYING
    for op in reversed(graph.ops):          # topological order, reversed
        out_kind = max((kind.get(n, 0) for n in op.outputs), default=0)
        if not out_kind or op.type in NO_GRADIENT:
            continue
        for i, name in enumerate(op.inputs):
            if graph.tensors[name].kind == "constant":
                continue
            kind[name] = max(kind.get(name, 0), _input_kind(graph, op, i, out_kind))
    return kind


def folds_loss_gradient(graph: OpGraph) -> bool:
    """Whether a one-stage compile of ``graph`` folds the loss's bprop to a constant
    ``ValueNode``, so that ``AllReduceConstElim`` (``frontend/optimizer/irpass/
    special_op_eliminate.h``: an ``AllReduce`` whose input is a ``ValueNode``) drops the
    backward AllReduce of a constant gradient: every output of ``graph`` (the returned loss, or
    the outputs smsg-ms's default loss averages) has rank 0 or 1.

    Seen in the dry-run (MindSpore 2.10, ``opt_a`` IR dumps; ``networks/stage_aux``, 8
    devices): a ``(1, 1)`` loss leaves the default loss mean's bprop
    ``RealDiv(Tensor[[1]], 1)`` a CNode and every constant gradient downstream an expression
    (2 and 3 backward AllReduces kept); a ``()`` loss (``stage_aux`` with its means not kept)
    or a ``(1,)`` one (``networks/aux_loss``) folds the bprop to ``Tensor(0.125)`` and its
    ``Mul``/``RealDiv`` chain on rank-0 tensors too, and the AllReduce goes. mindformers'
    models return a rank-0 loss (Qwen3-MoE's ``opt_a`` dump: ``Tensor[0.125]``). Not modelled:
    the ``Mul``/``RealDiv`` of a rank-2 constant stays a CNode even under a folded loss
    (``(1, 1)`` blocks reshaped to a ``(1,)`` loss: kept, by hand); mindformers' routers,
    ``(1, E)`` pieces, fold only through their zero coefficient (``moe_aux_loss_coeff`` 0)."""
    return all(len(graph.tensors[name].shape) <= 1 for name in graph.outputs
               if name in graph.tensors)
