"""ExpandDims (``ops_info/activation_info.cc``, ``ExpandDimsInfo``): the strategy is the
input's; the output carries the input's cuts with an uncut dimension of size 1 inserted at
``axis``. No collective, no FLOPs (a view)."""
from __future__ import annotations

from .base import Einsum
from .letters import Letters, broadcast

TYPES = ("ExpandDims",)


def describe(op, in_shapes, out_shapes):
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
