"""MatMul and BatchMatMul, every transpose flag (``ops_info/matmul_info.cc``); Dense as a
MatMul with ``transpose_b``.

Letters: batch dims (broadcast right-aligned), ``m`` rows of x, ``k`` contracting, ``n`` columns
of w. Device matrix ``[batch..., m, k, n]`` (``MatMulInfo::InferDevMatrixShape``: x's strategy
then w's ``n`` cut). Cutting ``k`` leaves partial sums: forward AllReduce of the local output.
A 2-D MatMul with ``k`` cut also has the option of an out_strategy that reduce-scatters the
partial sums onto ``m`` (``MatMul::CheckOutputStrategy``; sequence parallel:
:func:`.base.reduce_scatter_variant`). FLOPs: ``2·m·k·n`` per batch element forward (multiply + add), the same again for the gradient of
each input that needs one (dx = dy·wᵀ, dw = xᵀ·dy).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast

TYPES = ("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Dense")


def _flag(attrs, *names):
    return any(bool(attrs.get(n, False)) for n in names)


def describe(op, in_shapes, out_shapes) -> Einsum:
    a, b = in_shapes[0], in_shapes[1]
    ta = _flag(op.attrs, "transpose_a", "transpose_x1")
    # Dense is ``x · wᵀ + b`` with w of shape (out, in) (``mindspore.ops.Dense``; mindformers'
    # MoE router): its weight is always read transposed, without a flag saying so
    tb = op.type == "Dense" or _flag(op.attrs, "transpose_b", "transpose_x2")
    lt = Letters()
    batch_ins, batch = broadcast([tuple(a[:-2]), tuple(b[:-2])], lt)
    m = lt.new(a[-1] if ta else a[-2], "m")
    k = lt.new(a[-2] if ta else a[-1], "k")
    n = lt.new(b[-2] if tb else b[-1], "n")
    x = batch_ins[0] + (k + m if ta else m + k)
    w = batch_ins[1] + (n + k if tb else k + n)
    out = batch + m + n
    scatter = m if op.type == "MatMul" and len(a) == 2 and len(b) == 2 else ""
    flops = lambda s: 2 * numel(batch + m + k + n, s)  # noqa: E731
    return Einsum("matmul", [x, w] + [None] * (len(in_shapes) - 2), [out], lt.sizes,
                  order=batch + m + k + n, flops_fwd=flops, flops_bwd_per_grad=flops,
                  saves=("in0", "in1"), out_scatter=scatter)
