"""Element-wise operators with NumPy broadcasting, BiasAdd, activations, Dropout
(``ops_info/arithmetic_info.cc``, ``activation_info.cc``, ``bias_add_info.cc``,
``dropout_info.cc``).

Every dimension is a batch letter; a broadcast dimension (size 1 facing a larger one) must stay
uncut. Device matrix = the output's cuts. No collective of their own. FLOPs: a few per output
element (estimates from the operation count of each function, forward and per input gradient).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast

#: type → (FLOPs per element forward, backward per gradient, saved tensors)
BINARY = {
    "Add": (1, 0, ()), "AddExt": (1, 0, ()), "Sub": (1, 0, ()), "SubExt": (1, 0, ()),
    "Mul": (1, 1, ("in0", "in1")), "RealDiv": (1, 3, ("in0", "in1")), "Div": (1, 3, ("in0", "in1")),
    "Maximum": (1, 1, ("in0", "in1")), "Minimum": (1, 1, ("in0", "in1")),
    "SquaredDifference": (2, 2, ("in0", "in1")), "Pow": (10, 12, ("in0", "in1")),
    "FloorDiv": (1, 0, ()), "Equal": (1, 0, ()), "Less": (1, 0, ()), "Greater": (1, 0, ()),
    "LogicalAnd": (1, 0, ()), "Select": (1, 1, ("in0",)),
    # ArithmeticBase too (``arithmetic_info.h``: LogicalOrInfo, MaskedFillInfo, whose third
    # input, the fill value, is a scalar left whole; ``comparison_function_info.h``:
    # LessEqualInfo, GreaterEqualInfo): a sliding-window or padding mask
    # ``masked_fill(scores, ~(j <= i), -1e9)``. NotEqual (NotEqualInfo) is one too, but as a
    # family it gives mindformers' ``casual_mask.not_equal`` (a tensor and a scalar) a
    # strategy and changes the reference plans: left to a change checked on them
    "LogicalOr": (1, 0, ()), "LessEqual": (1, 0, ()), "GreaterEqual": (1, 0, ()),
    "MaskedFill": (1, 1, ("in1",)),
}
UNARY = {
    "ReLU": (1, 1, ("out0",)), "GeLU": (12, 16, ("in0",)), "FastGeLU": (8, 12, ("in0",)),
    "SiLU": (5, 8, ("in0",)), "Sigmoid": (4, 3, ("out0",)), "Tanh": (6, 3, ("out0",)),
    "Exp": (4, 1, ("out0",)), "Log": (4, 1, ("in0",)), "Sqrt": (4, 2, ("out0",)),
    "Rsqrt": (4, 3, ("out0",)), "Square": (1, 2, ("in0",)), "Neg": (1, 1, ()),
    "Abs": (1, 1, ("in0",)), "Erf": (8, 6, ("in0",)),
    "Dropout": (2, 1, ("out1",)), "Reciprocal": (1, 2, ("out0",)), "ReLU6": (2, 1, ("in0",)),
    "LeakyReLU": (2, 1, ("in0",)), "Elu": (5, 3, ("out0",)), "Softplus": (6, 4, ("in0",)),
    "OnesLike": (0, 0, ()), "ZerosLike": (0, 0, ()), "StopGradient": (0, 0, ()),
    "Identity": (0, 0, ()),
    # ActivationOther (``activation_info.h``): mindformers' rotary embedding takes cos/sin of
    # its angle table; Muls (tensor × scalar, ``arithmetic_info.h`` MulsInfo: an Activation,
    # the scalar input whole)
    "Cos": (4, 5, ("in0",)), "Sin": (4, 5, ("in0",)), "Muls": (1, 1, ()),
    "LogicalNot": (1, 0, ()),   # ActivationOther (``activation_info.h``: LogicalNotInfo)
}
TYPES = tuple(BINARY) + tuple(UNARY) + ("BiasAdd",)


def describe(op, in_shapes, out_shapes) -> Einsum:
    lt = Letters()
    if op.type == "BiasAdd":
        x = in_shapes[0]
        ins, out = broadcast([tuple(x)], lt)
        channel = out[1] if len(x) > 1 else out[0]
        return Einsum("elementwise", [out, channel] + [None] * (len(in_shapes) - 2), [out],
                      lt.sizes, order=out, flops_fwd=lambda s: numel(out, s),
                      flops_bwd_per_grad=lambda s: numel(out, s) / 2)
    if op.type not in BINARY:
        return unary(op, in_shapes, out_shapes, *UNARY.get(op.type, (1, 1, ())))
    fwd, bwd, saves = BINARY[op.type]
    # Select(cond, x, y) reads three tensors under one strategy (``select_info.cc``: every
    # input's tensor map is the output's), broadcast together as ``ops.where`` allows
    n = 3 if op.type == "Select" else 2
    ins, out = broadcast([tuple(s) for s in in_shapes[:n]], lt)
    return _declare(ins + [None] * (len(in_shapes) - n), out, out_shapes, lt, fwd, bwd, saves)


def unary(op, in_shapes, out_shapes, fwd, bwd, saves) -> Einsum:
    """Declaration of a unary element-wise operator: ``fwd`` FLOPs per output element forward,
    ``bwd`` per element and gradient backward, ``saves`` kept for the backward pass (also the
    Cast family's, :mod:`.cast`)."""
    lt = Letters()
    ins, out = broadcast([tuple(in_shapes[0])], lt)
    inputs = ins + [None] * (len(in_shapes) - 1)
    return _declare(inputs, out, out_shapes, lt, fwd, bwd, saves)


def _declare(inputs, out, out_shapes, lt, fwd, bwd, saves) -> Einsum:
    outs = [out] * max(1, len(out_shapes))
    return Einsum("elementwise", inputs, outs, lt.sizes, order=out,
                  flops_fwd=lambda s: fwd * numel(out, s),
                  flops_bwd_per_grad=lambda s: bwd * numel(out, s), saves=saves)
