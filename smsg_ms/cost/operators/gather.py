"""Gather / embedding lookup along axis 0 (``ops_info/gather_info.cc``, ``ShardAxisImpl``), and
along another axis with that axis uncut (``NormalImpl``). Without a strategy MindSpore cuts the
indices' first dimension and leaves the table whole (``GatherInfo::GenerateBatchStrategies``).

Letters: table ``v h…``, indices ``t…``, output ``t… h…``. Column split (``h`` cut) and index
split need no collective. Row split (``v`` cut, ``v`` is contracting) does a masked lookup whose
partial results are summed over the ``v`` group: by a ReduceScatter onto the output's first
dimension when the indices' first dimension divides by the ``v`` cut (the output then comes out
cut there by ``v``; bprop: AllGather), else by an AllReduce (output replicated). MindSpore's
checks for a row split (``CheckSplitAxisStrategy``): the indices uncut; with repeated calculation
(table cuts below the device count) the other table dimension uncut. With a row split the
repeated-calculation axis goes to the left of the device matrix unless the table cuts are 1 or
the device count (``ShardAxisImpl::SetAttribute``, called from ``ShardAxisImpl::CheckStrategy``
only); without one (``NormalImpl``: ``GatherInfo::GetGatherMode`` gives ``NORMAL`` where the
table's axis 0 is uncut) it stays on the right, the ``OperatorInfo`` default, and the device
matrix is the indices' cuts first, then the table's (``NormalImpl::InferDevMatrixShape``:
``[f, g, c, 1, e]``; a row split needs the indices uncut, so the order is the same). Seen in
the dry-run: a table ``(1, 2)`` on 4 devices lays the output's hidden cut over ranks ``0-2``,
not ``0-1`` (docs/networks.md, gpt p2). No FLOPs forward; the backward scatter-adds one value
per output element.
"""
from __future__ import annotations

from math import prod

from .base import Einsum, numel
from .letters import Letters

#: ``Embedding`` (indices first) is :mod:`.embedding`
TYPES = ("Gather", "GatherV2")


def describe(op, in_shapes, out_shapes):
    axis = op.attrs.get("axis", op.attrs.get("input2", 0))
    table, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    if not isinstance(axis, int):  # not a constant: MindSpore's GatherInfo::GetAttrs fails too
        return None
    if op.attrs.get("batch_dims", 0) or not idx or not table:
        return None
    if axis % len(table) != 0:
        return _normal(axis % len(table), table, idx, len(in_shapes))
    lt = Letters()
    v = lt.new(table[0], "v")
    rest = "".join(lt.new(s) for s in table[1:])
    t = "".join(lt.new(s) for s in idx)
    out = t + rest
    table_letters = v + rest

    def repeat_left(cuts, devices):
        if cuts.get("v", 1) == 1:            # NormalImpl: the OperatorInfo default (right)
            return False
        n = prod(cuts.get(ch, 1) for ch in table_letters)
        return n not in (1, devices)

    def rule(cuts, devices):
        if cuts.get("v", 1) == 1:
            return None
        if any(cuts.get(ch, 1) > 1 for ch in t):
            return "row split (table axis 0 cut) needs the indices uncut"
        if prod(cuts.get(ch, 1) for ch in table_letters) != devices and any(
                cuts.get(ch, 1) > 1 for ch in rest):
            return ("row split with repeated calculation needs the other table dimensions "
                    "uncut")
        return None

    return Einsum("gather", [table_letters, t] + [None] * (len(in_shapes) - 2), [out], lt.sizes,
                  order=t + table_letters, flops_fwd=lambda s: 0,
                  flops_bwd_per_grad=lambda s: numel(out, s), saves=("in1",),
                  notes=["row split (table axis 0 cut): indices uncut; ReduceScatter onto the "
                         "output's first dimension when it divides, else AllReduce"],
                  rule=rule, scatter=t[0], repeat_left=repeat_left, default_input=1)


def _normal(axis: int, table: tuple, idx: tuple, n_inputs: int) -> Einsum:
    """Gather on an axis other than 0 (``x[:, :, idx]`` as ``ops.gather(x, idx, 2)``), with
    the gathered axis uncut: MindSpore's ``NormalImpl`` (``gather_info.cc``; the other modes of
    an axis other than 0 need axis 1 cut with a 2-D table, not modelled). Letters: table
    ``p… a q…``, indices ``t…``, output ``p… t… q…``; device matrix indices first
    (``NormalImpl::InferDevMatrixShape``: ``[f, g, c, 1, e]``); no collective, repeated
    calculation allowed."""
    lt = Letters()
    a = lt.new(table[axis], "a")
    pre = "".join(lt.new(s) for s in table[:axis])
    post = "".join(lt.new(s) for s in table[axis + 1:])
    t = "".join(lt.new(s) for s in idx)
    out = pre + t + post
    return Einsum("gather", [pre + a + post, t] + [None] * (n_inputs - 2), [out], lt.sizes,
                  order=t + pre + a + post, flops_fwd=lambda s: 0,
                  flops_bwd_per_grad=lambda s: numel(out, s), saves=("in1",),
                  fixed={a: "normal mode (gather_info.cc, NormalImpl): the gathered axis is "
                            "not cut"},
                  notes=[f"gather on axis {axis}: the gathered axis uncut (NormalImpl)"],
                  default_input=1)
