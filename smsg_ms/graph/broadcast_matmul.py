"""BatchMatMul with broadcast batch dimensions, compiled through a stand-in MindSpore accepts.

MindSpore 2.10's ``BatchMatMul`` shape inference refuses inputs of different ranks on the CPU and
GPU targets ("For BatchMatMul, inputs shape cannot be broadcast on CPU/GPU"), the targets the
dry-run compiles for; Ascend accepts them. mindformers' LLaMA rotates half of each head with
``BatchMatMul(x (B, N, S, D), swap_mask (D, D))`` (``modules/layers.py``, ``RotaryEmbedding.
rotate_half``, its default ``use_rope_slice=False``), so neither the capture nor ``check`` of
such a network compiled.

When a compile fails with that message, :func:`stand_in` gives each ``BatchMatMul`` primitive
without transpose flags a ``MatMulExt`` in its place (same cell attribute, so the same primitive
path; its ``shard()`` and smsg's tags copied) and the compile is run again. The stand-in is
MindSpore's own rule for the original: ``MatMulExtInfo`` is a ``MatMul`` operator info whose
``GetAttrs`` fixes both transpose flags to false, and ``BatchMatMulInfo`` is one too
(``frontend/parallel/ops_info/matmul_info.cc``): the same strategy check (x's column cut equals
w's row cut; ``MatMulBase::CheckBatchDimensions``: the shorter input's batch cuts equal the
longer's right-aligned ones, a size-1 axis exempt as a broadcast), the same device matrix
(``GetCommonShape``: the batch axes of the longer strategy, then ``m, k, n``) and the same
forward AllReduce over the ``k`` cut. Its shape inference broadcasts on every target.

The captured operator keeps the original's name (:func:`restore_types`, prim attribute
:data:`STANDS_FOR_ATTR`), so the cost model prices a ``BatchMatMul`` with broadcast batch axes
(:mod:`smsg_ms.cost.operators.matmul`) and a plan names the primitive the user's network has
(on Ascend the plan's strategy is written to the real ``BatchMatMul``).

A ``BatchMatMul`` with a transpose flag has no such stand-in (``MatMulExt`` takes none): a
network that broadcasts one still fails with MindSpore's message.
"""
from __future__ import annotations

from typing import Any

#: MindSpore's refusal (``BatchMatMul``'s shape inference on CPU/GPU)
REFUSAL = "inputs shape cannot be broadcast on CPU/GPU"
#: prim attribute of a stand-in: the type of the primitive it replaces
STANDS_FOR_ATTR = "smsg_stands_for"
#: attributes of the original that are not the stand-in's (``MatMulExt`` has no transpose flag)
_OWN_ATTRS = ("transpose_a", "transpose_b", "input_names", "output_names")


def refused_broadcast(exc: BaseException) -> bool:
    """Whether ``exc`` is MindSpore refusing a broadcast ``BatchMatMul`` on CPU/GPU."""
    return REFUSAL in str(exc)


def stand_in(net) -> list[str]:
    """Put a ``MatMulExt`` in place of every ``BatchMatMul`` primitive of ``net`` (any cell of
    it) whose transpose flags are false, the original's attributes (``in_strategy``,
    ``out_strategy``, layouts, smsg's tags) copied and :data:`STANDS_FOR_ATTR` set.

    Returns:
        ``"cell.attr"`` of each primitive replaced (``net``'s own cell names), in
        ``cells_and_names`` order.
    """
    from mindspore.ops.auto_generate import MatMulExt

    replaced = []
    for cell_name, cell in net.cells_and_names():
        for attr, prim in list(getattr(cell, "_primitives", {}).items()):
            if prim is None or prim.name != "BatchMatMul" or _transposed(prim):
                continue
            new = MatMulExt()
            for key, value in prim.attrs.items():
                if key not in _OWN_ATTRS:
                    new.add_prim_attr(key, value)
            new.add_prim_attr(STANDS_FOR_ATTR, "BatchMatMul")
            setattr(cell, attr, new)
            replaced.append(f"{cell_name}.{attr}" if cell_name else attr)
    return replaced


def _transposed(prim) -> bool:
    return bool(prim.attrs.get("transpose_a", False) or prim.attrs.get("transpose_b", False))


def restore_types(ops: list[Any]) -> int:
    """Give each captured operator of a stand-in (attribute :data:`STANDS_FOR_ATTR`) the type
    of the primitive it replaced, without the marking attribute. Returns how many."""
    count = 0
    for op in ops:
        original = op.attrs.pop(STANDS_FOR_ATTR, None)
        if original:
            op.type = original
            op.attrs.setdefault("transpose_a", False)
            op.attrs.setdefault("transpose_b", False)
            count += 1
    return count
