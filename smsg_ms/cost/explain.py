"""The symbolic cost of one operator under one strategy, as plain data for plan files.

:meth:`CostModel.symbolic` gives sympy expressions in the letters of the operator's einsum
description (one symbol per dimension for its global size, ``c_<letter>`` for its cut count,
``D`` for the stage's device count). This module turns them into what ``smsg-ms explain`` shows:
the einsum, the letters' sizes and cuts, and each term as a factored formula with its value.
:meth:`CostModel.symbolic` factors its expressions (a few ms per operator); repeated layers are
described once (the planner caches by operator signature and strategy).
"""
from __future__ import annotations

import re

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


#: the collective of the partial sums, by phase, under a MatMul's out_strategy
#: (:func:`~smsg_ms.cost.operators.base.reduce_scatter_variant`; ``MatMul::CheckOutputStrategy``
#: sets ``forward_reduce_scatter_``, ``ops_info/matmul_info.cc``; its bprop is an AllGather)
SCATTERED = {"forward": "ReduceScatter", "backward": "AllGather"}


def with_out_strategy(description: dict) -> dict:
    """``description`` (:func:`describe` of an in_strategy) turned into that of the same
    in_strategy with the out_strategy that reduce-scatters the partial sums onto the output's
    rows (:func:`~smsg_ms.cost.operators.base.reduce_scatter_variant`, the only out_strategy of
    the cost model): the terms ``forward AllReduce of out`` and ``backward AllReduce of out``
    become ``forward ReduceScatter of out`` and ``backward AllGather of out`` (:data:`SCATTERED`)
    at half the bytes. Both move the same tensor ``S`` (the partial sums each device holds,
    whose size the out_strategy does not change) over the same group ``g``: ring volumes
    ``2·(g−1)/g·S`` for the AllReduce, ``(g−1)/g·S`` for the ReduceScatter and the AllGather
    (:meth:`CostModel.symbolic`). Every other term is unchanged; a description already in that
    form comes back equal. A new dict; ``description`` is not changed.

    Plan files store the description of the in_strategy alone (their bytes stay as written), so
    ``explain`` applies this to a decision the plan gives an out_strategy.
    """
    terms = []
    for term in description.get("terms", []):
        phase, _, rest = term["term"].partition(" ")
        if phase in SCATTERED and rest == "AllReduce of out":
            term = dict(term, term=f"{phase} {SCATTERED[phase]} of out",
                        formula=_halved(term["formula"]),
                        value=None if term.get("value") is None else term["value"] / 2)
        terms.append(term)
    return {**description, "terms": terms}


def _halved(formula: str) -> str:
    """``formula`` (a :func:`describe` formula, its names positive integers) divided by 2,
    factored as :meth:`CostModel.symbolic` factors its expressions."""
    from sympy.parsing.sympy_parser import parse_expr

    names = {n: sympy.Symbol(n, positive=True, integer=True)
             for n in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", formula)}
    return str(sympy.factor(parse_expr(formula, local_dict=names) / 2))


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


#: the factor of a collective's ring volume over ``(g − 1)/g·S`` (:meth:`CostModel.symbolic`)
_RING_FACTOR = {"AllReduce": 2}


def with_tensor_bytes(description: dict) -> dict:
    """``description`` (:func:`describe`) with each collective term in ``S``, the bytes of the
    tensor the collective reduces or gathers on each device (:attr:`~smsg_ms.cost.api.
    Collective.full_bytes`: an AllReduce's or a ReduceScatter's input, an AllGather's gathered
    output), the quantity ``smsg-ms check`` lists for the collectives it predicts and for those
    MindSpore inserts (:func:`smsg_ms.integration.check.inserted_bytes`), in place of the ring
    volume each device sends, which plan files store (:meth:`CostModel.symbolic`: ``k·(g − 1)/g
    ·S``, ``k`` 2 for an AllReduce, else 1).

    The group ``g`` is read off the formula: its one factor ``x − y`` is ``g − 1`` times ``y``
    with ``g = x / y`` (``c_k − 1``: ``g = c_k``; ``D − c_k*c_n``: ``g = D / (c_k·c_n)``), so
    ``S = volume · x / (k·(x − y))``. A term without such a factor (a group that is a number)
    stays a ring volume and is named so (``... (bytes sent)``); so does a term whose ring
    volume is 0 (a group of one device at these cuts: nothing is inserted). A new dict;
    ``description`` is not changed."""
    from sympy.parsing.sympy_parser import parse_expr

    values = {sympy.Symbol(ch, positive=True, integer=True): size
              for ch, size in description.get("sizes", {}).items()
              if isinstance(size, int) and size != 1}
    values.update({sympy.Symbol(k, positive=True, integer=True): v
                   for k, v in description.get("cuts", {}).items()})
    values[sympy.Symbol("D", positive=True, integer=True)] = description.get("D")
    terms = []
    for term in description.get("terms", []):
        words = term["term"].split()
        kind = words[2] if words[:2] == ["grad", "sync"] else words[1] if len(words) > 1 else ""
        if (term["unit"] != "bytes" or words[0] == "memory:" or " of " not in term["term"]
                or term.get("value") == 0):
            terms.append(term)
            continue
        names = {n: sympy.Symbol(n, positive=True, integer=True)
                 for n in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", term["formula"])}
        expr = parse_expr(term["formula"], local_dict=names)
        numer, _ = sympy.fraction(sympy.factor(expr))
        minus = [f for f in sympy.Mul.make_args(numer) if isinstance(f, sympy.Add)
                 and len(f.args) == 2 and sum(a.could_extract_minus_sign() for a in f.args) == 1]
        if len(minus) != 1:
            terms.append(dict(term, term=term["term"] + " (bytes sent)"))
            continue
        x = next(a for a in minus[0].args if not a.could_extract_minus_sign())
        whole = sympy.factor(expr * x / (_RING_FACTOR.get(kind, 1) * minus[0]))
        value = whole.subs(values)
        terms.append(dict(term, formula=str(whole),
                          value=float(value) if value.is_number else None))
    return {**description, "terms": terms}
