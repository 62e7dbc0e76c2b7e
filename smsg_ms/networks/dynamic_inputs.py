"""Inputs a network declares dynamic (``Cell.set_inputs(Tensor(shape=[None, 16]))``).

MindSpore's semi-auto parallel refuses to cut a dynamic axis unless it is declared with
``mindspore.Symbol(divisor=k)`` and the cut divides ``k``: ``MatMul`` ``((8, 1), (1, 1))`` on an
input declared ``[None, 16]`` fails "shape or divisor 1 at 0 cannot be divisible by strategy
value 8, shape is [-1, 16], divisor is [1, 16]" (seen in the dry-run on 8 devices; with
``Symbol(divisor=8)`` it compiles). The capture records the declared axes on the graph's tensors
(:attr:`smsg_ms.graph.model.TensorInfo.dynamic`), the cost model cuts them only by divisors of
``k`` (:mod:`smsg_ms.cost.dynamic_axes`), and ``check`` compiles with the declared shapes
(:func:`with_declared_dynamic`).
"""
from __future__ import annotations

import math


def declared_axes(net) -> list[dict[int, int]] | None:
    """Per input the network declared with ``set_inputs``, ``{axis: divisor}`` of its dynamic
    axes (divisor 1 for ``None``, ``k`` for ``Symbol(divisor=k)``); ``None`` when it declared
    none or every declared axis is static."""
    getter = getattr(net, "get_inputs", None)
    declared = getter() if callable(getter) else None
    if not declared:
        return None
    out = []
    for tensor in declared:
        shape = tuple(getattr(tensor, "shape", ()) or ())
        symbols = getattr(tensor, "symbolic_shape", None) or [None] * len(shape)
        axes = {}
        for axis, (size, symbol) in enumerate(zip(shape, symbols)):
            if size is None or int(size) < 0:
                divisor = symbol.get("divisor", 1) if isinstance(symbol, dict) else 1
                axes[axis] = int(divisor or 1)
        out.append(axes)
    return out if any(out) else None


def common_divisor(declared: list[dict[int, int]]) -> int:
    """The divisor every dynamic axis derived from the declared ones keeps: the gcd of theirs
    (exact for a single declared axis; an axis MindSpore derives from two can only keep what
    both guarantee)."""
    return math.gcd(*[d for axes in declared for d in axes.values()])


def with_declared_dynamic(net, inputs: tuple, labels: int = 0) -> tuple:
    """``inputs`` (tensors, the network's data inputs then ``labels`` labels) with each declared
    dynamic axis made dynamic again (``None``, or its ``Symbol``), the other axes as given (a
    rank's slice); labels get input 0's first axis when that one is dynamic (the batch).
    Unchanged without declared axes."""
    import mindspore as ms

    declared = declared_axes(net)
    if declared is None:
        return tuple(inputs)
    n = len(inputs) - labels
    out = []
    for i, tensor in enumerate(inputs):
        if i < n and i < len(declared):
            axes = declared[i]
        elif i >= n and 0 in declared[0]:
            axes = {0: declared[0][0]}
        else:
            out.append(tensor)
            continue
        shape = [(None if axes[a] == 1 else ms.Symbol(divisor=axes[a])) if a in axes else int(d)
                 for a, d in enumerate(tensor.shape)]
        out.append(ms.Tensor(shape=shape, dtype=tensor.dtype))
    return tuple(out)



def mark_dynamic_axes(graph, dynamic_graph, declared: list[dict[int, int]]) -> bool:
    """Record on ``graph`` (the capture with the example's static shapes) the axes that
    ``dynamic_graph`` (the same network compiled with its declared dynamic inputs, where
    MindIR writes ``-1``: a ``str`` dimension) has dynamic, tensor by tensor of the operators
    in order: the data inputs' with their declared divisors, the others with
    :func:`common_divisor`. Returns ``False``, marking nothing, when the two graphs' operators
    differ (types, count) so that no tensor can be matched."""
    if len(graph.ops) != len(dynamic_graph.ops) or any(
            a.type != b.type or len(a.inputs) != len(b.inputs) or len(a.outputs) != len(b.outputs)
            for a, b in zip(graph.ops, dynamic_graph.ops)):
        return False
    divisor = common_divisor(declared)
    pairs = list(zip(graph.inputs, dynamic_graph.inputs))
    for a, b in zip(graph.ops, dynamic_graph.ops):
        pairs += list(zip(a.inputs + a.outputs, b.inputs + b.outputs))
    inputs = {name: i for i, name in enumerate(graph.inputs)}
    for name, dyn_name in pairs:
        tensor, dyn = graph.tensors[name], dynamic_graph.tensors.get(dyn_name)
        if dyn is None or tensor.dynamic or len(dyn.shape) != len(tensor.shape):
            continue
        own = declared[inputs[name]] if name in inputs and inputs[name] < len(declared) else {}
        tensor.dynamic = [[axis, own.get(axis, divisor)] for axis, d in enumerate(dyn.shape)
                          if isinstance(d, str)]
    return True
