"""Loss operators with a parallel implementation in MindSpore (``ops_info/loss_info.cc``,
``ops_info/batch_parallel_info.cc``).

SoftmaxCrossEntropyWithLogits (``SoftmaxCrossEntropyWithLogitsInfo``): logits and labels
``(n, classes)`` take the same strategy; the class axis is not cut (the softmax normalises over
it). Outputs: the per-sample loss ``(n,)`` and the gradient ``(n, classes)``, cut like the inputs.
No collective. FLOPs per element: forward 8 (softmax 5, log, multiply, sum), backward 1 per
gradient (scales the precomputed gradient).

SparseSoftmaxCrossEntropyWithLogits (``SparseSoftmaxCrossEntropyWithLogitsInfo``, a
``BatchParallelInfo``): logits ``(n, classes)``, int labels ``(n,)``, output the scalar mean loss.
``BatchParallelInfo::CheckStrategy`` lets each input cut at most one dimension, by exactly the
stage's device count; only a cut of dimension 0 enters the tensor map. The model offers the
same cut of ``n`` (1 or the device count) on both inputs and nothing else. No collective: each
device's loss is the mean over its own samples (``InferForwardCommunication`` is empty), the
gradient AllReduce of the weights averages the rest. FLOPs per logit: forward 8, backward 6
(the bprop runs the kernel again with ``is_grad``: softmax 5, minus the one-hot 1).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters

TYPES = ("SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits")


def describe(op, in_shapes, out_shapes):
    if op.type == "SparseSoftmaxCrossEntropyWithLogits":
        return _sparse(op, in_shapes, out_shapes)
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


def _batch_cut_rule(n: str):
    def rule(cuts: dict, devices: int) -> str | None:
        cut = cuts.get(n, 1)
        if cut not in (1, devices):
            return (f"batch-parallel loss: the batch cut must be 1 or the device count "
                    f"{devices}, not {cut} (BatchParallelInfo::CheckStrategy)")
        return None
    return rule


def _sparse(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    if len(x) != 2 or len(in_shapes) < 2 or tuple(in_shapes[1]) != x[:1]:
        return None
    lt = Letters()
    n, c = lt.new(x[0]), lt.new(x[1])
    xc = n + c
    outs = [""] * max(1, len(out_shapes))
    return Einsum("loss", [xc, n] + [None] * (len(in_shapes) - 2), outs, lt.sizes, order=xc,
                  fixed={c: "class axis of the softmax (only a batch cut is a valid data "
                            "parallel strategy)"},
                  local=n, rule=_batch_cut_rule(n),
                  flops_fwd=lambda s: 8 * numel(xc, s),
                  flops_bwd_per_grad=lambda s: 6 * numel(xc, s), saves=("in0",),
                  notes=["batch-parallel loss: each device averages its own samples"])
