"""ExpandDims and Squeeze (``ops_info/activation_info.cc``, ``ExpandDimsInfo``,
``SqueezeInfo``): the strategy is the input's. ExpandDims: the output carries the input's cuts
with an uncut dimension of size 1 inserted at ``axis``. Squeeze: the output drops the input's
squeezed dimensions (``axis``, or every size-1 dimension when ``axis`` is empty;
``SqueezeInfo::InferAxis``), which are size 1 and so never cut. No collective, no FLOPs (a
view)."""
from __future__ import annotations

from .base import Einsum
from .letters import Letters, broadcast

TYPES = ("ExpandDims", "Squeeze")


def describe(op, in_shapes, out_shapes):
    if op.type == "Squeeze":
        return _squeeze(op, in_shapes, out_shapes)
    x = tuple(in_shapes[0])
    axis = op.attrs.get("axis", op.attrs.get("input1"))
    if not isinstance(axis, int) or len(tuple(out_shapes[0])) != len(x) + 1:
        return None
    lt = Letters()
    _, letters = broadcast([x], lt)
    at = axis % (len(x) + 1)
    out = letters[:at] + lt.dummy() + letters[at:]
    return Einsum("expand_dims", [letters] + [None] * (len(in_shapes) - 1), [out], lt.sizes,
                  order=letters)


def _squeeze(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    if not x:
        return None
    axis = op.attrs.get("axis", ())
    axis = (axis,) if isinstance(axis, int) else tuple(axis or ())
    dropped = {a % len(x) for a in axis} if axis else {d for d, s in enumerate(x) if s == 1}
    if any(x[d] != 1 for d in dropped) or len(tuple(out_shapes[0])) != len(x) - len(dropped):
        return None
    lt = Letters()
    letters = "".join(lt.dummy() if d in dropped else lt.new(size) for d, size in enumerate(x))
    out = "".join(ch for d, ch in enumerate(letters) if d not in dropped)
    return Einsum("expand_dims", [letters] + [None] * (len(in_shapes) - 1), [out], lt.sizes,
                  order=letters)
