"""LayerNorm and RmsNorm (``ops_info/layer_norm_info.cc``, ``rms_norm_info.cc``).

The normalised dimensions (from ``begin_norm_axis``; RmsNorm: the gamma dims) must not be cut;
gamma/beta span them, so they stay replicated and their gradients are AllReduced over every
device. Outputs besides ``y`` (mean/variance, rstd) keep the batch letters with broadcast 1s.
FLOPs per element: LayerNorm forward 8, backward 12 per gradient; RmsNorm 4 and 8 (operation
counts of the formulas).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast

TYPES = ("LayerNorm", "RmsNorm", "LayerNormV3", "AddRmsNorm")


def describe(op, in_shapes, out_shapes) -> Einsum:
    lt = Letters()
    x = tuple(in_shapes[0])
    _, out = broadcast([x], lt)
    if op.type == "RmsNorm":
        begin = len(x) - len(in_shapes[1])
        fwd, bwd = 4, 8
    else:
        begin = op.attrs.get("begin_norm_axis", op.attrs.get("input3", -1))
        begin = begin % len(x)
        fwd, bwd = 8, 12
    norm = out[begin:]
    fixed = {ch: f"{op.type} normalised axis" for ch in norm}
    params = [norm[len(norm) - len(s):] if len(s) else "" for s in in_shapes[1:]]
    inputs = [out] + params
    outs = [out]
    for shape in out_shapes[1:]:
        outs.append("".join(out[d] if shape[d] == x[d] else lt.dummy()
                            for d in range(len(shape))) if len(shape) == len(x) else
                    out[:len(shape)])
    return Einsum("norm", inputs, outs, lt.sizes, order=out, fixed=fixed,
                  flops_fwd=lambda s: fwd * numel(out, s),
                  flops_bwd_per_grad=lambda s: bwd * numel(out, s), saves=("in0", "out1"))
