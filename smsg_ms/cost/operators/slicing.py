"""Concat, Split and StridedSlice (``ops_info/concat_info.cc``, ``split_info.cc``,
``strided_slice_info.cc``).

Concat: every input takes the same strategy, the concat axis is not cut (each input's axis
dimension and the output's get their own fixed letter). Split: the split axis is not cut; every
output keeps the input's cuts. StridedSlice (no masks): a dimension actually sliced (begin ≠ 0,
end ≠ its size or stride ≠ 1) is not cut; the others are batch letters. None makes a collective;
no FLOPs (copies). StridedSlice with a mask falls back to the batch-parallel default.
"""
from __future__ import annotations

from .base import Einsum
from .letters import Letters

TYPES = ("Concat", "Split", "StridedSlice")


def _axis(attrs, rank, key="axis", default=0):
    value = attrs.get(key, attrs.get("input1", default))
    return int(value) % rank


def describe(op, in_shapes, out_shapes):
    if op.type == "Concat":
        return _concat(op, in_shapes, out_shapes)
    if op.type == "Split":
        return _split(op, in_shapes, out_shapes)
    return _strided_slice(op, in_shapes, out_shapes)


def _concat(op, in_shapes, out_shapes):
    shapes = [tuple(s) for s in in_shapes]
    if not shapes or any(len(s) != len(shapes[0]) for s in shapes):
        return None
    rank = len(shapes[0])
    axis = _axis(op.attrs, rank)
    lt = Letters()
    shared = [lt.new(size) if d != axis else "" for d, size in enumerate(shapes[0])]
    fixed = {}

    def with_axis(size):
        ch = lt.new(size)
        fixed[ch] = "Concat axis"
        return "".join(shared[d] or ch for d in range(rank))

    inputs = [with_axis(s[axis]) for s in shapes]
    out = with_axis(out_shapes[0][axis])
    order = "".join(shared[d] or inputs[0][axis] for d in range(rank))
    return Einsum("slicing", inputs, [out], lt.sizes, order=order, fixed=fixed)


def _split(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    axis = _axis(op.attrs, len(x))
    lt = Letters()
    letters = [lt.new(size) for size in x]
    fixed = {letters[axis]: "Split axis"}
    outs = []
    for shape in out_shapes:
        piece = lt.new(shape[axis])
        fixed[piece] = "Split axis"
        outs.append("".join(piece if d == axis else letters[d] for d in range(len(x))))
    inputs = ["".join(letters)] + [None] * (len(in_shapes) - 1)
    return Einsum("slicing", inputs, outs, lt.sizes, order="".join(letters), fixed=fixed)


def _strided_slice(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    attrs = op.attrs
    if any(attrs.get(m, 0) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                     "new_axis_mask", "shrink_axis_mask")):
        return None
    begin, end = list(attrs.get("begin", ())), list(attrs.get("end", ()))
    strides = list(attrs.get("strides", [1] * len(begin)))
    out = tuple(out_shapes[0])
    if len(out) != len(x) or not begin:
        return None
    lt = Letters()
    ins, outs, fixed = "", "", {}
    for d, size in enumerate(x):
        sliced = d < len(begin) and (begin[d] % size != 0 or strides[d] != 1
                                     or (end[d] if end[d] >= 0 else end[d] + size) < size)
        ch = lt.new(size)
        ins += ch
        if sliced:
            fixed[ch] = "StridedSlice sliced dimension"
            piece = lt.new(out[d])
            fixed[piece] = "StridedSlice sliced dimension"
            outs += piece
        else:
            outs += ch
    return Einsum("slicing", [ins] + [None] * (len(in_shapes) - 1), [outs], lt.sizes,
                  order=ins, fixed=fixed)
