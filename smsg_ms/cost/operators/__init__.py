"""The operator registry: one module per operator family, the one place an operator's
sharding rules live (as PyTorch DTensor registers each operator's strategies, or MindSpore has
one ``ops_info/*_info.cc`` per operator).

A family module declares:

* ``TYPES``: the MindSpore primitive names it covers;
* ``describe(op, in_shapes, out_shapes)``: its einsum declaration
  (:class:`~smsg_ms.cost.operators.base.Einsum`: which dimensions may be cut, the layouts, the
  FLOPs, collectives and memory), or ``None`` when this instance has none; the cost model
  enumerates the strategies from it (:func:`~smsg_ms.cost.operators.base.enumerate_cuts`);
* optionally ``options(model, op)``: its own rule, the costed options
  (:class:`~smsg_ms.cost.api.OpCost`) of ``op`` under ``model`` instead of the declaration's,
  or ``None`` when the rule does not apply to this instance (OneHot of 2-D indices);
* optionally ``SHARD``: what MindSpore does with a ``shard()`` on the primitive: ``"accepted"``
  (the default), ``"refused"`` (Reshape: planned per call, never written back) or
  ``"ignored"`` (Cast: a pass-through of its input's layout, planned per call, never written
  back; its options for the planner are ``passthrough_options(model, op)``).

Adding a family: write the module, add it to :data:`MODULES`. The queries below are what the
cost model and the planner ask of the registry instead of naming operator types.
"""
from __future__ import annotations

from . import (batchnorm, cast, conv, elementwise, embedding, expand_dims, flash_attention,
               gather, grouped_matmul, loss, matmul, norm, onehot, pool, reduce, reshape, rotary,
               routing, slicing, softmax, swiglu, tile, transpose)

#: Every family module, in registration order.
MODULES = (matmul, elementwise, softmax, norm, gather, transpose, reduce, conv, pool, batchnorm,
           slicing, loss, expand_dims, embedding, flash_attention, routing, reshape, onehot, cast,
           swiglu, rotary, tile, grouped_matmul)
#: Primitive name → its family module.
FAMILIES = {}
for _module in MODULES:
    for _type in _module.TYPES:
        if _type in FAMILIES:
            raise ImportError(f"operator {_type} is declared by two families: "
                              f"{FAMILIES[_type].__name__} and {_module.__name__}")
        FAMILIES[_type] = _module
SHARD_MODES = ("accepted", "refused", "ignored")


def describe(op, in_shapes, out_shapes):
    """Einsum declaration of ``op`` given its input and output shapes, or ``None`` (no family,
    or a family without a declaration for it)."""
    module = FAMILIES.get(op.type)
    if module is None:
        return None
    return module.describe(op, in_shapes, out_shapes)


def own_options(model, op):
    """The options of ``op``'s family's own rule (``options(model, op)``), or ``None`` when its
    family has none or the rule does not apply: the declaration (or the default) then decides."""
    rule = getattr(FAMILIES.get(op.type), "options", None)
    return None if rule is None else rule(model, op)


def shard_mode(op_type: str) -> str:
    """What MindSpore does with ``shard()`` on a primitive of ``op_type``: one of
    :data:`SHARD_MODES` (``"accepted"`` for a type no family declares)."""
    return getattr(FAMILIES.get(op_type), "SHARD", "accepted")


def shard_refused(op_type: str) -> bool:
    """MindSpore refuses this primitive's ``shard()``: plan it per call, never write it back
    (Reshape)."""
    return shard_mode(op_type) == "refused"


def passes_layout_through(op_type: str) -> bool:
    """MindSpore ignores this primitive's ``shard()`` and its output keeps its input's layout:
    plan it per call as a pass-through (:func:`passthrough_options`), never write it back, and
    look through it to a parameter it reads (Cast)."""
    return shard_mode(op_type) == "ignored"


def priced_by_own_rule(op_type: str) -> bool:
    """This primitive's options come from its family's own rule, not an einsum declaration,
    and its strategy is written back (OneHot)."""
    module = FAMILIES.get(op_type)
    return hasattr(module, "options") and shard_mode(op_type) == "accepted"


def passthrough_options(model, op):
    """The free options of a pass-through operator (:func:`passes_layout_through`): one per
    layout its output keeps from its input.

    Raises:
        ValueError: ``op``'s type is no pass-through.
    """
    if not passes_layout_through(op.type):
        raise ValueError(f"{op.type} is not a pass-through operator")
    return FAMILIES[op.type].passthrough_options(model, op)
