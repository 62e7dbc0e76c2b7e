"""GroupedMatmul: one matrix product per expert over a token list sorted by expert
(``ops_info/grouped_matmul_info.cc``, ``GroupedMatmulInfo``), as mindformers' MoE experts call it
(``split_item=3, group_type=0``: ``x (N, h)`` one tensor, ``w (E, h, m)`` one stacked tensor,
``group_list (E,)`` tokens per expert, ``y (N, m)``).

Letters: ``n`` token rows, ``k`` = ``h`` contracting, ``m`` columns, ``e`` experts. MindSpore's
device matrix is x's strategy without its last entry, then w's ``h`` and ``m`` cuts
(``InferDevMatrixShape``); w's tensor map is ``{-1, 1, 0}`` (``InferTensorMap``): the expert axis
is never cut here (expert parallelism of mindformers' MoE is a Morph layout around the experts,
priced by :mod:`smsg_ms.cost.experts`). ``CheckStrategy`` wants x's last cut equal to w's
second-from-last (the shared letter ``k``); a cut ``k`` leaves partial sums, reduced by one
forward AllReduce of ``y`` (``InferForwardCommunication``); ``group_list`` is replicated
(tensor map ``{-1}``).

FLOPs (derivation): every token row meets one expert's ``(h, m)`` matrix, ``2·n·k·m`` forward
(multiply + add), the same again for each input gradient (``dx = dy·wᵀ`` per group, ``dw = xᵀ·dy``
per group).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters

TYPES = ("GroupedMatmul",)
#: the (split_item, group_type) mindformers' experts use: x and y one tensor, grouped on rows
SUPPORTED = (3, 0)


def describe(op, in_shapes, out_shapes):
    if len(in_shapes) < 2:
        return None
    x, w = tuple(in_shapes[0]), tuple(in_shapes[1])
    split_item = op.attrs.get("split_item", op.attrs.get("input8", 3))
    group_type = op.attrs.get("group_type", op.attrs.get("input9", 0))
    if (split_item, group_type) != SUPPORTED or len(x) != 2 or len(w) != 3 or x[-1] != w[-2]:
        return None
    lt = Letters()
    n, k, m = lt.new(x[0], "n"), lt.new(x[1], "k"), lt.new(w[2], "m")
    e = lt.new(w[0], "e")
    rest = []
    for shape in in_shapes[2:]:
        # group_list (E,) replicated; other optional inputs are absent (None) in training
        rest.append(e if tuple(shape) == (w[0],) else None)
    flops = lambda s: 2 * numel(n + k + m, s)  # noqa: E731
    return Einsum("grouped_matmul", [n + k, e + k + m] + rest, [n + m], lt.sizes,
                  order=e + n + k + m, fixed={e: "GroupedMatmul's expert axis (tensor map -1)"},
                  flops_fwd=flops, flops_bwd_per_grad=flops, saves=("in0", "in1"))
