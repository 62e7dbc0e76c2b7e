"""Transpose (``ops_info/transpose_info.cc``): any dimension may be cut; the output carries the
permuted cuts. No collective, no FLOPs (a copy)."""
from __future__ import annotations

from .base import Einsum
from .letters import Letters, broadcast

TYPES = ("Transpose", "TransposeExt")


def describe(op, in_shapes, out_shapes) -> Einsum:
    lt = Letters()
    x = tuple(in_shapes[0])
    _, letters = broadcast([x], lt)
    perm = op.attrs.get("dims", op.attrs.get("perm", op.attrs.get("input1")))
    if perm is None:
        perm = list(range(len(x)))[::-1]
    out = "".join(letters[p % len(x)] for p in perm)
    return Einsum("transpose", [letters] + [None] * (len(in_shapes) - 1), [out], lt.sizes,
                  order=letters)
