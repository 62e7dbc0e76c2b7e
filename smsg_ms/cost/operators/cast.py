"""Cast: no parallel operator to MindSpore 2.10 (``step_parallel_utils.cc``,
``IsParallelCareNode``: a Cast has no ``OperatorInfo``). Its output keeps its input's layout and
a ``shard()`` on it changes nothing (dry-run: ReLU (8,1) → Cast → ReLU (1,8) inserts the same
float16 collectives with no, a (1,8) or an (8,1) Cast strategy), so it is planned as a
pass-through, one call at a time, and never written back (:data:`SHARD` ``"ignored"``):
:func:`passthrough_options`. A Cast of a parameter is looked through: its consumer is costed as
reading the parameter itself, and the parameter takes the consumer's layout
(``CostModel._side``).

Its declaration (:func:`describe`) is the element-wise one (1 FLOP per element each way), used
when a given strategy is priced (``CostModel.check``, scoring another planner's strategies).
"""
from __future__ import annotations

from ..api import OpCost
from . import elementwise
from .reshape import passthrough_options as _layouts_passed_through

TYPES = ("Cast",)
#: MindSpore accepts ``shard()`` on a Cast but ignores it: pass-through, never written back.
SHARD = "ignored"
#: FLOPs per element forward, backward per gradient, tensors saved for the backward pass.
FLOPS = (1, 1, ())


def describe(op, in_shapes, out_shapes):
    """The element-wise declaration of a unary operator with :data:`FLOPS`."""
    return elementwise.unary(op, in_shapes, out_shapes, *FLOPS)


def passthrough_options(model, op) -> list[OpCost]:
    """One free option per layout the Cast's output keeps from its input (equal shapes: the
    Reshape rule, :func:`smsg_ms.cost.operators.reshape.passthrough_options`)."""
    return _layouts_passed_through(model.graph, op, model.devices)
