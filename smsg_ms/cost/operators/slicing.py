"""Concat, Split, Stack and StridedSlice (``ops_info/concat_info.cc``, ``split_info.cc``,
``pack_info.cc``, ``strided_slice_info.cc``).

Concat: every input takes the same strategy, the concat axis is not cut (each input's axis
dimension and the output's get their own fixed letter). Split: the split axis is not cut; every
output keeps the input's cuts. StridedSlice (no masks): a dimension actually sliced (begin ≠ 0,
end ≠ its size or stride ≠ 1) is not cut; the others are batch letters. Its masks as
``StridedSliceInfo::GetAttrs`` reads them: ``begin_mask``/``end_mask`` bit ``i`` fetches
dimension ``i`` from its start/to its end, a ``shrink_axis_mask`` dimension is not cut and
leaves the output (``InferTensorMap``); with ``ellipsis_mask`` or ``new_axis_mask`` it falls
back to the batch-parallel default. Stack (``StackInfo``): every input takes the same strategy,
any dimension may be cut, the output carries it with an uncut dimension (the inputs' count)
inserted at ``axis``. None makes a collective; no FLOPs (copies).
"""
from __future__ import annotations

from .base import Einsum
from .letters import Letters

TYPES = ("Concat", "Split", "Stack", "StridedSlice")


def _axis(attrs, rank, key="axis", default=0):
    value = attrs.get(key, attrs.get("input1", default))
    return int(value) % rank


def describe(op, in_shapes, out_shapes):
    if op.type == "Concat":
        return _concat(op, in_shapes, out_shapes)
    if op.type == "Split":
        return _split(op, in_shapes, out_shapes)
    if op.type == "Stack":
        return _stack(op, in_shapes, out_shapes)
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


def _stack(op, in_shapes, out_shapes):
    shapes = [tuple(x) for x in in_shapes]
    out = tuple(out_shapes[0])
    if not shapes or any(x != shapes[0] for x in shapes) or len(out) != len(shapes[0]) + 1:
        return None
    at = _axis(op.attrs, len(out))
    lt = Letters()
    letters = "".join(lt.new(size) for size in shapes[0])
    stacked = lt.new(out[at])
    return Einsum("slicing", [letters] * len(shapes), [letters[:at] + stacked + letters[at:]],
                  lt.sizes, order=letters, fixed={stacked: "Stack axis"})


def _bits(attrs, name) -> list[bool]:
    """``StridedSliceInfo``'s ``Dec2Bin``: bit ``i`` of a mask (lowest first)."""
    value = int(attrs.get(name, 0) or 0)
    return [bool(value >> i & 1) for i in range(8)]


def _strided_slice(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    attrs = op.attrs
    if any(attrs.get(m, 0) for m in ("ellipsis_mask", "new_axis_mask")):
        return None
    begin, end = list(attrs.get("begin", ())), list(attrs.get("end", ()))
    strides = list(attrs.get("strides", [1] * len(begin)))
    begin_mask, end_mask = _bits(attrs, "begin_mask"), _bits(attrs, "end_mask")
    shrink = _bits(attrs, "shrink_axis_mask")
    out = tuple(out_shapes[0])
    kept = [d for d in range(len(x)) if not (d < len(begin) and shrink[d])]
    if len(out) != len(kept) or not begin:
        return None
    lt = Letters()
    ins, outs, fixed = "", "", {}
    for d, size in enumerate(x):
        ch = lt.new(size)
        ins += ch
        if d >= len(begin):
            outs += ch
            continue
        start = 0 if begin_mask[d] else begin[d]
        stop = size if end_mask[d] else (end[d] if end[d] >= 0 else end[d] + size)
        if shrink[d]:
            fixed[ch] = "StridedSlice shrunk dimension"
        elif start % size != 0 or strides[d] != 1 or stop < size:
            fixed[ch] = "StridedSlice sliced dimension"
            piece = lt.new(out[len(outs)])
            fixed[piece] = "StridedSlice sliced dimension"
            outs += piece
        else:
            outs += ch
    return Einsum("slicing", [ins] + [None] * (len(in_shapes) - 1), [outs], lt.sizes,
                  order=ins, fixed=fixed)
