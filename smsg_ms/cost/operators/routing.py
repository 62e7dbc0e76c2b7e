"""The routing operators of a mixture-of-experts layer: TopK (``ops_info/topk_info.cc``) and
CumSum (``CumSumInfo``, a ``CumOpBase`` of ``ops_info/activation_info.cc``).

* TopK ``(..., n)`` → values and indices ``(..., k)``: the strategy is the input's; its last
  dimension must not be cut ("Now we can not support to split last dimension",
  ``TopKInfo::CheckStrategy``); both outputs take the input's tensor map
  (``TopKInfo::InferTensorMap``). FLOPs (a derivation, not a datasheet figure): ``k``
  comparisons per input element forward (a selection of ``k`` by ``k`` passes); backward, one
  per input element (the values' gradient scattered back into ``n`` slots).
* CumSum along ``axis``: element-wise otherwise; the axis must not be cut ("The axis can not be
  split"). FLOPs: one addition per element forward, one per element backward (the reversed
  cumulative sum).

No collective in either: a cut of any other dimension leaves each device its own rows.
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast
from .softmax import axes_of

TYPES = ("TopK", "CumSum")


def describe(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    if not x:
        return None
    lt = Letters()
    _, letters = broadcast([x], lt)
    rest = [None] * (len(in_shapes) - 1)
    if op.type == "TopK":
        if len(out_shapes) != 2 or len(tuple(out_shapes[0])) != len(x):
            return None
        last, k = letters[-1], tuple(out_shapes[0])[-1]
        return Einsum("topk", [letters] + rest, [letters, letters], lt.sizes, order=letters,
                      fixed={last: "TopK's last dimension"}, output_sizes={last: k},
                      flops_fwd=lambda s: k * numel(letters, s),
                      flops_bwd_per_grad=lambda s: numel(letters, s))
    axis = op.attrs.get("axis", op.attrs.get("input1"))
    if not isinstance(axis, int):
        return None
    fixed = {letters[a]: "CumSum axis" for a in axes_of({"axis": axis}, len(x))}
    return Einsum("cumsum", [letters] + rest, [letters], lt.sizes, order=letters, fixed=fixed,
                  flops_fwd=lambda s: numel(letters, s),
                  flops_bwd_per_grad=lambda s: numel(letters, s))
