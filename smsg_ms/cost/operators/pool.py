"""MaxPool and AvgPool, NCHW (``ops_info/maxpool_info.cc``; ``AvgPoolInfo`` derives from it).

Letters ``n c h w`` for input and output, device matrix ``(n, c, h, w)``. N and C cut freely;
H/W only when kernel ≤ stride and the input slice divides by the stride
(``MaxPoolInfo::CheckHWStrategy``). No collective. FLOPs: ``kh·kw`` per output element forward
(one compare or add per window tap), the same backward.
"""
from __future__ import annotations

from .base import Einsum
from .conv import pair, pool_hw_rule
from .letters import Letters

TYPES = ("MaxPool", "AvgPool")


def describe(op, in_shapes, out_shapes):
    x, out = tuple(in_shapes[0]), tuple(out_shapes[0])
    if len(x) != 4 or str(op.attrs.get("format", "NCHW")) != "NCHW":
        return None
    kernel = pair(op.attrs.get("kernel_size", 1))
    stride = pair(op.attrs.get("strides", op.attrs.get("stride", 1)))
    lt = Letters()
    letters = "".join(lt.new(size, ch) for size, ch in zip(x, "nchw"))
    taps = kernel[0] * kernel[1]

    def flops(s):
        return taps * s["n"] * s["c"] * (s["h"] * out[2] // x[2] if isinstance(s["h"], int)
                                         else s["h"] * out[2] / x[2]) * (
            s["w"] * out[3] // x[3] if isinstance(s["w"], int) else s["w"] * out[3] / x[3])

    saves = ("in0", "out0") if op.type == "MaxPool" else ()
    return Einsum("pool", [letters] + [None] * (len(in_shapes) - 1), [letters], lt.sizes,
                  order=letters, flops_fwd=flops, flops_bwd_per_grad=flops, saves=saves,
                  rule=pool_hw_rule(x[2:], kernel, stride),
                  output_sizes={"h": out[2], "w": out[3]})
