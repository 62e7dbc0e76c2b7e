"""SoftmaxCrossEntropyWithLogits (``ops_info/loss_info.cc``).

Inputs logits and labels ``(n, classes)`` take the same strategy; the class axis is not cut
(the softmax normalises over it). Outputs: the per-sample loss ``(n,)`` and the gradient
``(n, classes)``, cut like the inputs. No collective. FLOPs per element: forward 8 (softmax 5,
log, multiply, sum), backward 1 per gradient (scales the precomputed gradient).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters

TYPES = ("SoftmaxCrossEntropyWithLogits",)


def describe(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    if len(x) != 2 or tuple(in_shapes[1]) != x:
        return None
    lt = Letters()
    n, c = lt.new(x[0]), lt.new(x[1])
    xc = n + c
    outs = [n, xc][:len(out_shapes)]
    return Einsum("loss", [xc, xc] + [None] * (len(in_shapes) - 2), outs, lt.sizes, order=xc,
                  fixed={c: "class axis of the softmax"},
                  flops_fwd=lambda s: 8 * numel(xc, s), flops_bwd_per_grad=lambda s: numel(xc, s),
                  saves=("out1",))
