"""OneHot of 1-D indices ``(N,)`` into ``(N, depth)`` (``ops_info/onehot_info.cc``), priced by
its own rule (:func:`options`): the strategy is the *output's* ``((a, b), (), ())``, which no
einsum declaration of the inputs can express; its strategy is written back like any other.

Device matrix ``(a, b)``: the indices cut ``a``-way, the classes ``b``-way (each device writes
its own class range, no collective); ``a·b`` = the device count (MindSpore 2.10 mis-slices the
classes under repeated calculation: the dry-run's compile fails). Other ranks or axes have no
rule here: the cost model gives them MindSpore's batch-parallel default.
"""
from __future__ import annotations

from ..api import MEMORY_KINDS, OpCost
from ..layout import TensorLayout, operator_layout
from .base import divides, divisors

TYPES = ("OneHot", "OneHotExt")


def describe(op, in_shapes, out_shapes):
    """No einsum declaration (the strategy is over the output): see :func:`options`."""
    return None


def options(model, op) -> list[OpCost] | None:
    """Every ``(a, b)`` with ``a·b`` = the device count dividing ``(N, depth)``, in divisor
    order; ``None`` when the rule does not apply (not 1-D indices on the last axis) or no
    ``(a, b)`` fits, so the cost model falls back to the batch-parallel default."""
    graph = model.graph
    shape = tuple(graph.tensors[op.inputs[0]].shape)
    out = tuple(graph.tensors[op.outputs[0]].shape)
    if len(shape) != 1 or len(out) != 2 or op.attrs.get("axis", -1) != -1:
        return None
    n = model.devices
    result = []
    for a in divisors(n):
        for b in divisors(n // a):
            if not (divides(out[0], a) and divides(out[1], b)):
                continue
            if a * b != n:  # with repeated calculation the dry-run's compile fails
                continue      # (the classes end up cut by the repeat count as well)
            ins = [operator_layout([a, b], [0], n)] + [
                TensorLayout.replicated(len(graph.tensors[t].shape), n) for t in op.inputs[1:]]
            result.append(OpCost(((a, b),) + ((),) * (len(op.inputs) - 1), ins,
                                 [operator_layout([a, b], [0, 1], n)], 0, 0, [],
                                 {k: 0 for k in MEMORY_KINDS},
                                 ["OneHot: strategy over the output (N, depth)"]))
    return result or None
