"""Gather / embedding lookup along axis 0 (``ops_info/gather_info.cc``).

Letters: table ``v h…``, indices ``t…``, output ``t… h…``. Column split (``h`` cut) and index
split need no collective; row split (``v`` cut) does a masked lookup whose partial results are
summed by an AllReduce over the ``v`` group (``v`` is contracting). A row split here keeps the
indices uncut and the rest of the table uncut (the plain row-split mode). No FLOPs forward; the
backward scatter-adds one value per output element.
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters

TYPES = ("Gather", "GatherV2", "Embedding")


def describe(op, in_shapes, out_shapes):
    axis = op.attrs.get("axis", op.attrs.get("input2", 0))
    table, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    if axis % max(len(table), 1) != 0 or op.attrs.get("batch_dims", 0):
        return None
    lt = Letters()
    v = lt.new(table[0], "v")
    rest = "".join(lt.new(s) for s in table[1:])
    t = "".join(lt.new(s) for s in idx)
    out = t + rest
    return Einsum("gather", [v + rest, t] + [None] * (len(in_shapes) - 2), [out], lt.sizes,
                  order=v + rest + t, flops_fwd=lambda s: 0,
                  flops_bwd_per_grad=lambda s: numel(out, s), saves=("in1",),
                  notes=["row split (table axis 0 cut) requires the indices and the other table "
                         "dims uncut"], rule=_row_split_rule)


def _row_split_rule(cuts: dict) -> str | None:
    if cuts.get("v", 1) > 1 and any(c > 1 for ch, c in cuts.items() if ch != "v"):
        return "row split (table axis 0 cut) needs every other dimension uncut"
    return None
