"""Reductions ReduceSum/Mean/Max/Min/Prod, ArgMax… (``ops_info/reduce_method_info.cc``).

Reduced dimensions are contracting letters: cutting one leaves partial results that MindSpore
combines with an AllReduce (sum for Sum/Mean, max/min for Max/Min). Device matrix = the input's
cuts; the output drops the reduced letters (keep_dims: a broadcast 1). FLOPs: one per input
element forward, one per element backward (broadcast of the gradient).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast
from .softmax import axes_of

TYPES = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "SumExt", "MeanExt")
_OP = {"ReduceMax": "max", "ReduceMin": "min", "ReduceProd": None}


def describe(op, in_shapes, out_shapes) -> Einsum:
    lt = Letters()
    x = tuple(in_shapes[0])
    _, letters = broadcast([x], lt)
    axes = axes_of(op.attrs, len(x), default=())
    if not axes:
        axes = list(range(len(x)))
    keep = bool(op.attrs.get("keep_dims", op.attrs.get("input2", False)))
    out = "".join((lt.dummy() if keep else "") if d in axes else letters[d]
                  for d in range(len(x)))
    return Einsum("reduce", [letters] + [None] * (len(in_shapes) - 1), [out], lt.sizes,
                  order=letters, reduce_op=_OP.get(op.type, "sum"),
                  flops_fwd=lambda s: numel(letters, s),
                  flops_bwd_per_grad=lambda s: numel(letters, s))
