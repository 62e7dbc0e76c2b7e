"""Read what MindSpore's parallel compiler decided from a compiled graph (MindIR) in the child:
the primitive calls, and the strategy each primitive path got.

``get_strategy`` keys its strategies by the scoped name of each call (``Default/network-
Net/fc1-Dense/MatMul-op0``); the plan knows primitive paths (``fc1.matmul``). The capture tags
every primitive with its path (``smsg_path``, :func:`smsg_ms.graph.capture.tag_primitives`), and
the compiled MindIR keeps that attribute on the call's primitive, so a call's path is read off
its node.
"""
from __future__ import annotations

from ..graph.mindir import cell_path_of_scope, decode_attribute, output_types, pass_of_scope


def compiled_model(cell, phase: str):
    """The ``ModelProto`` (MindIR) of ``cell`` compiled under ``phase`` in this process, read
    through MindSpore's graph executor (no public API exposes the compiled parallel graph)."""
    from mindspore.graph.api import _cell_graph_executor
    from mindspore.train import mind_ir_pb2

    model = mind_ir_pb2.ModelProto()
    model.ParseFromString(_cell_graph_executor._get_func_graph_proto(cell, phase, "mind_ir"))
    return model


def node_table(model):
    """``(shapes, calls)`` of a compiled ``ModelProto``: ``shapes``, the shape of every value by
    name (parameters, inputs, node outputs; ``-1`` for a dynamic dimension), and ``calls``,
    ``[(node, primitive proto, decoded attributes)]`` of every primitive call, sub-graphs'
    (``model.functions``) included, in the MindIR's node order."""
    prims = {p.name: p for p in model.primitives}
    shapes = {}
    for p in model.graph.parameter:
        shapes[p.name] = [int(d) for d in p.dims]
    for inp in model.graph.input:
        if inp.tensor:
            shapes[inp.name] = [int(d) for d in inp.tensor[0].dims]
    calls = []
    nodes = list(model.graph.node) + [n for f in model.functions for n in f.node]
    for node in nodes:
        types = output_types(node)
        if node.output and types:
            shapes[node.output[0]] = [int(d) if isinstance(d, int) else -1 for d in types[0][0]]
        if node.op_type.startswith("REF::") and node.op_type[5:] in prims:
            prim = prims[node.op_type[5:]]
            attrs = {a.name: decode_attribute(a) for a in prim.attribute}
            calls.append((node, prim, attrs))
    return shapes, calls


def strategies_by_path(raw: dict, calls, hints: dict, wrappers: int) -> tuple[dict, list[str]]:
    """``get_strategy`` output (keyed by scoped node name) → ``{primitive path: in_strategy}``.

    The path comes from the node's ``smsg_path`` tag in the compiled MindIR; where MindSpore lost
    the tag, from the scope's cell path (:func:`smsg_ms.graph.mindir.cell_path_of_scope`) and the
    one primitive of that type the cell holds. A primitive called several times keeps its first
    call's strategy; disagreeing calls are listed in the notes.
    """
    tag_of = {node.domain: attrs.get("smsg_path") for node, _, attrs in calls}
    out: dict[str, list] = {}
    notes: list[str] = []
    for scope in sorted(raw):
        path = tag_of.get(scope)
        if not path:
            cell = cell_path_of_scope(scope, wrappers)
            op_type = scope.rsplit("/", 1)[-1].rsplit("-", 1)[0]
            candidates = hints.get(cell, {}).get(op_type, [])
            path = candidates[0] if len(candidates) == 1 else None
        if not path:
            continue
        strategy = [[int(x) for x in s] for s in raw[scope]]
        if path in out and out[path] != strategy:
            notes.append(f"{path}: calls disagree ({out[path]} kept, {strategy} at {scope})")
            continue
        out.setdefault(path, strategy)
    return out, notes


def strategies_per_call(raw: dict, calls) -> dict[str, list]:
    """``{primitive path: [in_strategy of each call]}`` for the primitives whose calls got
    different strategies (an ``auto_parallel`` planner may give each call its own).

    Calls are numbered in the order of the compiled MindIR's nodes (the order
    :mod:`smsg_ms.graph.mindir` numbers ``call_index`` in a capture); only nodes that carry the
    ``smsg_path`` tag and have a strategy in ``raw`` count.
    """
    seen: dict[str, list] = {}
    for node, _, attrs in calls:
        path = attrs.get("smsg_path")
        if not path or node.domain not in raw or pass_of_scope(node.domain) != "forward":
            continue
        seen.setdefault(path, []).append([[int(x) for x in s] for s in raw[node.domain]])
    return {p: v for p, v in sorted(seen.items()) if any(s != v[0] for s in v[1:])}
