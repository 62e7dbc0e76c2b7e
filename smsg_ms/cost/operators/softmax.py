"""Softmax and LogSoftmax (``ops_info/softmax_info.cc``): the axis dimensions must not be cut
("The strategy corresponding to axis dimension is not 1"), every other dimension is a batch letter.
FLOPs per element: forward 5 (max, subtract, exp, sum, divide), backward 4.
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast

TYPES = ("Softmax", "LogSoftmax", "SoftmaxExt")


def axes_of(attrs, rank: int, default=(-1,)) -> list[int]:
    axis = attrs.get("axis", attrs.get("dim", attrs.get("input1", default)))
    if axis is None:
        axis = default
    if isinstance(axis, int):
        axis = [axis]
    return sorted({a % rank for a in axis}) if rank else []


def describe(op, in_shapes, out_shapes) -> Einsum:
    lt = Letters()
    x = tuple(in_shapes[0])
    ins, out = broadcast([x], lt)
    fixed = {out[a]: f"{op.type} axis {a}" for a in axes_of(op.attrs, len(x))}
    return Einsum("softmax", [out] + [None] * (len(in_shapes) - 1), [out], lt.sizes, order=out,
                  fixed=fixed, flops_fwd=lambda s: 5 * numel(out, s),
                  flops_bwd_per_grad=lambda s: 4 * numel(out, s), saves=("out0",))
