"""Operator families: one module per family declares which dimensions may be cut, the layouts
and the costs (:mod:`.base` turns a declaration into strategies and amounts).

:func:`describe` maps an operator to its declaration, or ``None`` when no family knows it (the
cost model then offers MindSpore's batch-parallel layout only).
"""
from __future__ import annotations

from . import (batchnorm, conv, elementwise, embedding, expand_dims, flash_attention, gather,
               loss, matmul, norm, pool, reduce, slicing, softmax, transpose)

FAMILIES = {}
for _module in (matmul, elementwise, softmax, norm, gather, transpose, reduce, conv, pool,
                batchnorm, slicing, loss, expand_dims, embedding, flash_attention):
    for _type in _module.TYPES:
        FAMILIES[_type] = _module

#: Operators handled by the cost model itself (no einsum declaration).
SPECIAL = ("Reshape",)


def describe(op, in_shapes, out_shapes):
    """Einsum declaration of ``op`` given its input and output shapes, or ``None``."""
    module = FAMILIES.get(op.type)
    if module is None:
        return None
    return module.describe(op, in_shapes, out_shapes)
