"""Conv2D, NCHW (``ops_info/conv2d_info.cc``, ``Conv2DInfo::CheckStrategy``).

Letters: input ``n c h w``, weight ``o c`` + kernel, output ``n o h w``; device matrix
``(n, c, h, w, o)`` (``InferDevMatrixShape``). Rules kept from MindSpore: the kernel dimensions
uncut; the input's and the weight's C_in cut equal; with ``group != 1`` neither C_in nor C_out
cut; an H/W cut needs the output's H/W divisible by the cut, and (MindSpore 2.10,
``CheckHWStrategyPadModeByDimension`` / ``...ValidMode``): 'valid' mode kernel ≤ stride and the
slice divisible by the stride; 'pad'/'same' mode with kernel ≤ stride no padding and the slice
divisible by the stride, with kernel > stride ``(in + pads − k) % s == 0`` and
``(out·s − in) % cut == 0``. Cutting C_in (contracting) leaves partial sums:
forward AllReduce of the local output, bprop AllReduce. Cutting C_out or N: no collective.

An H/W cut with kernel (dilated) > stride in 'pad'/'same' mode makes MindSpore exchange halo
rows with the neighbours (forward NeighborExchangeV2 over the stage's devices); the model counts
``kernel − stride`` rows (columns) of the local slice, MindSpore's node carries the whole local
input (docs/known-differences.md D6: bytes differ, kind/group/count match).

FLOPs: forward ``2·N·C_out·H_out·W_out·(C_in/group)·kh·kw`` (multiply + add per kernel tap);
backward the same per input needing a gradient (dx: transposed convolution, dw: correlation).
"""
from __future__ import annotations

from .base import Einsum
from .letters import Letters

TYPES = ("Conv2D",)


def pair(value, rank_tail=2):
    """Last two entries of an int or a 2/4-tuple attribute (MindSpore's kernel/stride forms)."""
    if isinstance(value, int):
        return (value, value)
    value = list(value)
    return tuple(value[-rank_tail:])


def pad_mode(attrs) -> str:
    mode = attrs.get("pad_mode", "valid")
    if isinstance(mode, int):  # PadMode enum: 0 pad, 1 same, 2 valid
        return ("pad", "same", "valid")[mode]
    return str(mode).lower()


def same_pads(size, k, s):
    """Total padding of 'same' mode along one dimension (output ``ceil(size / s)``)."""
    return max(0, (-(-size // s) - 1) * s + k - size)


def conv_hw_rule(mode, in_hw, out_hw, kernel, stride, pads):
    """Refusal reason for an H/W cut of Conv2D, or ``None`` (``Conv2DInfo::CheckHWStrategy``:
    ``CheckHWStrategyBase``, ``...PadModeByDimension`` for 'pad'/'same', ``...ValidMode``)."""
    def rule(cuts, devices):
        for letter, size, out, k, s, pad in zip("hw", in_hw, out_hw, kernel, stride, pads):
            c = cuts.get(letter, 1)
            if c == 1 or not isinstance(size, int):
                continue
            name = letter.upper()
            if out % c:
                return f"output {name} {out} not divisible by its cut {c}"
            if mode == "valid":
                if k > s:
                    return f"'valid' mode: {name} cut with kernel {k} > stride {s}"
                if (size // c) % s:
                    return f"{name} slice {size // c} not divisible by stride {s}"
            elif k <= s:
                if pad:
                    return f"'{mode}' mode: {name} cut with kernel {k} <= stride {s} and padding"
                if (size // c) % s:
                    return f"{name} slice {size // c} not divisible by stride {s}"
            else:
                if (size + pad - k) % s:
                    return f"{name} + padding - kernel not divisible by stride {s}"
                if (out * s - size) % c:
                    return f"{name}: output·stride − input not divisible by the cut {c}"
        return None
    return rule


def pool_hw_rule(in_hw, kernel, stride):
    """Refusal reason for an H/W cut of MaxPool/AvgPool (``MaxPoolInfo::CheckHWStrategy``)."""
    def rule(cuts, devices):
        for letter, size, k, s in zip("hw", in_hw, kernel, stride):
            c = cuts.get(letter, 1)
            if c == 1 or not isinstance(size, int):
                continue
            if k > s:
                return f"{letter.upper()} cut with kernel {k} > stride {s}"
            if (size // c) % s:
                return f"{letter.upper()} slice {size // c} not divisible by stride {s}"
        return None
    return rule


def describe(op, in_shapes, out_shapes):
    x, wt = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(x) != 4 or len(wt) != 4 or str(op.attrs.get("format", "NCHW")) != "NCHW":
        return None
    group = int(op.attrs.get("group", op.attrs.get("groups", 1)) or 1)
    dilation = pair(op.attrs.get("dilation", 1))
    kernel = tuple(d * (k - 1) + 1 for d, k in zip(dilation, wt[2:]))
    stride = pair(op.attrs.get("stride", 1))
    out = tuple(out_shapes[0])
    lt = Letters()
    n, c = lt.new(x[0], "n"), lt.new(x[1], "c")
    h, w = lt.new(x[2], "h"), lt.new(x[3], "w")
    o = lt.new(wt[0], "o")
    ci = c if group == 1 else lt.new(wt[1], "i")
    kh, kw = lt.new(wt[2], "K"), lt.new(wt[3], "L")
    fixed = {kh: "kernel dimension", kw: "kernel dimension"}
    if group != 1:
        for ch in (c, ci, o):
            fixed[ch] = f"group {group}: channels cannot be cut"
    h_out, w_out = out[2], out[3]
    mode = pad_mode(op.attrs)
    if mode == "valid":
        pads = (0, 0)
    elif mode == "same":
        pads = tuple(same_pads(size, k, s) for size, k, s in zip(x[2:], kernel, stride))
    else:
        plist = list(op.attrs.get("pad_list", op.attrs.get("pad", (0, 0, 0, 0))))
        plist = plist * 4 if len(plist) == 1 else plist
        pads = (plist[0] + plist[1], plist[2] + plist[3])

    def halo(cuts, s):
        """Elements sent per device: ``kernel − stride`` rows (columns) of the local slice."""
        total = 0
        for letter, other, k, st in ((h, w, kernel[0], stride[0]), (w, h, kernel[1], stride[1])):
            if cuts.get(letter, 1) != 1 and k > st:
                total = total + (k - st) * s[n] * s[c] * s[other]
        return total

    def flops(s):
        hl = s[h] * h_out // x[2] if isinstance(s[h], int) else s[h] * h_out / x[2]
        wl = s[w] * w_out // x[3] if isinstance(s[w], int) else s[w] * w_out / x[3]
        return 2 * s[n] * s[o] * hl * wl * s[ci] * s[kh] * s[kw]

    return Einsum("conv", [n + c + h + w, o + ci + kh + kw] + [None] * (len(in_shapes) - 2),
                  [n + o + h + w], lt.sizes, order=n + c + h + w + o, fixed=fixed,
                  flops_fwd=flops, flops_bwd_per_grad=flops, saves=("in0", "in1"),
                  rule=conv_hw_rule(mode, x[2:], (h_out, w_out), kernel, stride, pads),
                  output_sizes={h: h_out, w: w_out}, halo=halo,
                  notes=["Conv2D: C_in cut → AllReduce of the output; H/W cut with kernel > "
                         "stride → forward NeighborExchangeV2 of the halo rows"])
