"""Swiglu, the fused SwiGLU activation ``silu(a) * b`` with ``(a, b)`` the two halves of ``x``
along ``dim`` (MindSpore's ``Swiglu(x, dim)``, used by mindformers' fused MLPs and experts).

MindSpore's rule (``ops_info/activation_info.h``: ``class SwigluInfo : public Softmax``): the
strategy is ``Softmax``'s, so the ``dim`` dimension must not be cut ("The strategy
corresponding to axis dimension is not 1", ``Softmax::CheckStrategy``,
``ops_info/activation_info.cc``) and every other dimension is a batch letter; the output keeps
the input's tensor map with ``dim`` halved (``SwigluInfo::InferOutputTensorInfo``); no forward
collective (``ActivationBase::InferForwardCommunication`` inserts none).

Shapes: ``x (..., 2F, ...)`` → ``(..., F, ...)`` (elements). FLOPs per output element: forward
5 (sigmoid as exp, add, divide; two multiplies), backward 8 (operation counts of
``d silu(a) = s (1 + a (1 - s))`` with ``s = sigmoid(a)``, times ``b`` and ``silu(a)``).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast
from .softmax import axes_of

TYPES = ("Swiglu",)


def describe(op, in_shapes, out_shapes) -> Einsum | None:
    x = tuple(in_shapes[0])
    if not x:
        return None
    lt = Letters()
    _, letters = broadcast([x], lt)
    (axis,) = axes_of(op.attrs, len(x))[:1] or (len(x) - 1,)
    cut_free = letters[axis]
    half = x[axis] // 2 if isinstance(x[axis], int) else x[axis]

    def out_elements(s):  # local output elements: the input's with dim halved
        return numel(letters, s) / 2

    return Einsum("swiglu", [letters] + [None] * (len(in_shapes) - 1), [letters], lt.sizes,
                  order=letters, fixed={cut_free: f"Swiglu dim {axis}"},
                  output_sizes={cut_free: half},
                  flops_fwd=lambda s: 5 * out_elements(s),
                  flops_bwd_per_grad=lambda s: 8 * out_elements(s), saves=("in0",))
