"""Fused rotary position embedding: ``RotaryPositionEmbedding(x, cos, sin, mode)`` (mindspore
``ops.rotary_position_embedding``; ``x`` 4-D in BNSD, BSND or SBND, ``cos``/``sin`` the same
rank with size-1 dimensions broadcast, e.g. ``11SD``), ``y = x·cos + rotate(x)·sin``.

MindSpore's rule (class ``RotaryPositionEmbeddingInfo`` of MindSpore 2.10's parallel frontend,
named in its messages; its ``ops_info/*_info.cc`` source is not in the mirror this was written
from, so the rule was established against MindSpore's own compiler in the dry-run,
``tests/test_cost_fused_llm_ops.py``, and agrees with the layout table of
``mindspore.ops.rotary_position_embedding``): the head
dimension ``D`` (last) is never cut (rotate-half and interleaved modes pair elements across
``D``); every other dimension of ``x`` is a batch letter; ``cos``/``sin`` take ``x``'s cut on
each dimension they span and 1 on a broadcast one. No collective of its own; ``cos``/``sin``
without gradient.

Shapes in elements. FLOPs per output element: forward 4 (two multiplies, one add, the negation
of the rotated half), backward 3 per gradient (operation counts of the formula).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters, broadcast

TYPES = ("RotaryPositionEmbedding",)


def describe(op, in_shapes, out_shapes) -> Einsum | None:
    shapes = [tuple(s) for s in in_shapes[:3]]
    if len(shapes) < 3 or not shapes[0] or any(len(s) != len(shapes[0]) for s in shapes):
        return None
    lt = Letters()
    ins, out = broadcast(shapes, lt)
    if ins[0] != out:  # x itself broadcast: not a layout MindSpore supports
        return None
    return Einsum("rotary", ins + [None] * (len(in_shapes) - 3), [out], lt.sizes, order=out,
                  fixed={out[-1]: "RotaryPositionEmbedding head dimension D"},
                  flops_fwd=lambda s: 4 * numel(out, s),
                  flops_bwd_per_grad=lambda s: 3 * numel(out, s), saves=("in1", "in2"))
