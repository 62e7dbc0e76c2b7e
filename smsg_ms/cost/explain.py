"""The symbolic cost of one operator under one strategy, as plain data for plan files.

:meth:`CostModel.symbolic` gives sympy expressions in the letters of the operator's einsum
description (one symbol per dimension for its global size, ``c_<letter>`` for its cut count,
``D`` for the stage's device count). This module turns them into what ``smsg-ms explain`` shows:
the einsum, the letters' sizes and cuts, and each term as a factored formula with its value.
:meth:`CostModel.symbolic` factors its expressions (a few ms per operator); repeated layers are
described once (the planner caches by operator signature and strategy).
"""
from __future__ import annotations

import sympy

from ..graph.model import OpGraph, OpNode

#: Order and labels of the term kinds in a description.
_FLOPS = {"flops_fwd": "FLOPs forward", "flops_bwd": "FLOPs backward"}


def describe(model, graph: OpGraph, op: OpNode, strategy) -> dict | None:
    """Symbolic cost of ``op`` under ``strategy`` (one cut tuple per strategy input).

    Returns ``None`` for an operator without an einsum description (Reshape, fallbacks), else::

        {"einsum": "mk,kn->mn", "sizes": {"m": 4096, ...}, "cuts": {"c_m": 4, ...}, "D": 8,
         "terms": [{"term": "forward AllReduce of out", "unit": "bytes",
                    "formula": "8*m*n*(c_k - 1)/(c_k*c_m*c_n)", "value": 1048576.0}, ...]}

    Units: FLOPs per device for ``FLOPs`` terms; bytes per device for the rest (collectives:
    bytes each device sends, ring volumes, AllReduce counted twice; memory: bytes held).
    Formulas come from the families' einsum rules (:mod:`smsg_ms.cost.operators`).

    Raises:
        smsg_ms.cost.api.StrategyError: ``strategy`` is invalid for ``op``.
    """
    spec = model.spec(op)
    if spec is None:
        return None
    exprs = model.symbolic(op, tuple(tuple(c) for c in strategy))
    letters = [x for x in spec.inputs if x is not None]
    cuts = {}
    if len(letters) == len(strategy):
        for word, cut in zip(letters, strategy):
            for ch, c in zip(word, cut):
                if ch in spec.cuttable():
                    cuts[f"c_{ch}"] = int(c)
    values = {sympy.Symbol(ch, positive=True, integer=True): size
              for ch, size in spec.sizes.items() if isinstance(size, int) and size != 1}
    values.update({sympy.Symbol(k, positive=True, integer=True): v for k, v in cuts.items()})
    values[sympy.Symbol("D", positive=True, integer=True)] = model.devices
    terms = []
    for key in sorted(exprs, key=lambda k: (_rank(k), k)):
        expr = exprs[key]
        if expr == 0:
            continue
        value = expr.subs(values)
        terms.append({"term": _label(key, graph, op), "unit": "FLOPs" if key in _FLOPS else "bytes",
                      "formula": str(expr),
                      "value": float(value) if value.is_number else None})
    return {"einsum": ",".join(x or "" for x in letters) + "->" + ",".join(spec.outputs),
            "sizes": {ch: size for ch, size in sorted(spec.sizes.items())},
            "cuts": dict(sorted(cuts.items())), "D": model.devices, "terms": terms}


def _rank(key: str) -> int:
    if key in _FLOPS:
        return list(_FLOPS).index(key)
    phase = key.split(":", 1)[0]
    return {"forward": 2, "backward": 3, "grad_sync": 4, "memory": 5}.get(phase, 6)


def _label(key: str, graph: OpGraph, op: OpNode) -> str:
    """``forward:AllReduce:CNode_33:13`` → ``forward AllReduce of out``; tensors are named by
    their role for ``op`` (``in0``, ``out``, ``weight in1``)."""
    if key in _FLOPS:
        return _FLOPS[key]
    phase, _, rest = key.partition(":")
    if phase == "memory":
        return f"memory: {rest}"
    kind, _, tensor = rest.partition(":")
    return f"{phase.replace('_', ' ')} {kind} of {_role(tensor, graph, op)}"


def _role(tensor: str, graph: OpGraph, op: OpNode) -> str:
    """A name that holds for every operator of the same signature (identical layers share one
    description): input/output position, ``weight`` for a parameter."""
    info = graph.tensors.get(tensor)
    if tensor in op.inputs and info is not None and info.kind == "parameter":
        return f"weight in{op.inputs.index(tensor)}"
    if tensor in op.outputs:
        return "out" if len(op.outputs) == 1 else f"out{op.outputs.index(tensor)}"
    if tensor in op.inputs:
        return f"in{op.inputs.index(tensor)}"
    return tensor
