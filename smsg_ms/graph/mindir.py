"""MindIR protobuf (``mindspore.train.mind_ir_pb2.ModelProto``) → :class:`OpGraph`.

Format facts (MindSpore 2.10, ``shared/docs/mindspore-notes.md``): a node's ``op_type`` is
``REF::<key>`` into ``model.primitives`` or ``Constant``; a node attribute ``shape`` holds the output
shape(s); init arguments of generated primitives arrive as Constant inputs after the tensor inputs.
``Load``/``UpdateState``/``Depend``/``MakeTuple``/``TupleGetItem`` are plumbing and are looked through.

This module needs only the protobuf classes, not a compiled network.
"""
from __future__ import annotations

import re

from typing import Any

from .model import OpGraph, OpNode, TensorInfo

PLUMBING = {"Load", "UpdateState", "Depend", "MakeTuple", "TupleGetItem", "MakeList",
            "ListGetItem", "Return"}
#: Attributes MindSpore adds to every primitive that say nothing about the operator's maths.
_NOISE_ATTRS = {"smsg_path", "smsg_uid", "input_names", "output_names", "side_effect_propagate",
                "primitive_target", "gen_strategy", "side_effect_mem", "side_effect_io", "side_effect_hidden"}

_DTYPE_NAMES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float64",
}


class _Tensor:
    """A decoded Constant tensor value (shape and dtype only)."""

    def __init__(self, dims: list[int], dtype: str):
        self.dims, self.dtype = dims, dtype


def _dims(tensor_proto) -> tuple:
    return tuple(int(d) if d >= 0 else f"dyn{i}" for i, d in enumerate(tensor_proto.dims))


def decode_attribute(attr) -> Any:
    """Python value of an ``AttributeProto`` (ints, floats, bools, strings, tuples, tensors)."""
    kind = attr.AttributeType.Name(attr.type) if attr.type else ""
    if kind in ("TUPLE", "LIST"):
        return [decode_attribute(v) for v in attr.values]
    if kind == "BOOL":
        return bool(attr.i)
    if kind.startswith("INT") or kind.startswith("UINT"):
        if attr.ints:  # a tuple element carries its value in ints[0]
            return int(attr.ints[0]) if len(attr.ints) == 1 else [int(v) for v in attr.ints]
        return int(attr.i)
    if kind in ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16"):
        return float(attr.f or attr.d)
    if kind == "STRING":
        return attr.s.decode() if isinstance(attr.s, bytes) else attr.s
    if kind == "TENSORS" and attr.tensors:
        t = attr.tensors[0]
        return _Tensor(list(t.dims), _DTYPE_NAMES.get(t.data_type, "float32"))
    if kind in ("UMONAD", "IOMONAD"):
        return "<monad>"
    if kind == "NONE":
        return None
    if kind == "TYPE" or kind == "TENSOR":
        return str(attr.s or attr.i or kind)
    if attr.ints:
        return [int(v) for v in attr.ints]
    if attr.s:
        return attr.s.decode() if isinstance(attr.s, bytes) else attr.s
    return int(attr.i) if attr.i else (float(attr.f) if attr.f else None)


def _output_types(node) -> list[tuple[tuple, str]]:
    for a in node.attribute:
        if a.name != "shape":
            continue
        kind = a.AttributeType.Name(a.type)
        if kind == "TENSORS":
            t = a.tensors[0]
            return [(_dims(t), _DTYPE_NAMES.get(t.data_type, "float32"))]
        if kind in ("TUPLE", "LIST"):
            out = []
            for v in a.values:
                if v.tensors:
                    t = v.tensors[0]
                    out.append((_dims(t), _DTYPE_NAMES.get(t.data_type, "float32")))
                else:
                    out.append(((), "scalar"))
            return out
        return [((), "scalar")]
    return [((), "scalar")]


def cell_path_of_scope(scope: str, wrappers: int = 0) -> str:
    """``Default/layers-CellList/0-Layer/wq-Linear/MatMul-op0`` → ``layers.0.wq``.

    The cell part of a scope is a chain of ``attr-Class``; ``wrappers`` leading cells (training
    wrappers around the user's network) are dropped.
    """
    parts = scope.split("/")[1:-1]
    names = [p.rsplit("-", 1)[0] for p in parts if "-" in p]
    return ".".join(names[wrappers:])


def _primitive_path(tag, op_type: str, scope: str, hints, warnings: list[str]):
    """The primitive path of a node: its tag, corrected from the scope where MindSpore lost it.

    In a semi-auto compile MindSpore rebuilds un-annotated ``MatMul`` primitives (the tag is
    lost and all calls share one primitive), and it can merge instances with equal attributes.
    ``hints`` (cell path → op type → tagged paths) recovers the path from the node's scope.
    """
    if hints is None:
        return tag
    cell = cell_path_of_scope(scope)
    candidates = hints.get(cell, {}).get(op_type, [])
    if tag in candidates or (tag and not candidates and cell == tag.rpartition(".")[0]):
        return tag
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        match = re.search(r"-op(\d+)$", scope)
        k = int(match.group(1)) if match else 0
        if k < len(candidates):
            warnings.append(f"{scope}: {len(candidates)} {op_type} primitives in cell '{cell}' "
                            f"and the call lost its tag; assumed {candidates[k]} (call order)")
            return candidates[k]
    return tag if tag and cell == tag.rpartition(".")[0] else None


def parse_model(model, name: str = "network", arg_names=None,
                trainable: dict[str, bool] | None = None, path_hints=None) -> OpGraph:
    """Build an :class:`OpGraph` from a parsed ``ModelProto`` of a forward (predict) compile.

    Args:
        model: ``mind_ir_pb2.ModelProto``.
        name: network name recorded in the graph.
        arg_names: callable ``op_type -> list[str] | None`` giving the names of a primitive's
            inputs in order (tensor inputs then init arguments); used to name Constant inputs.
        trainable: parameter name → ``requires_grad``.
        path_hints: cell path → primitive type → tagged primitive paths (see
            :func:`smsg_ms.graph.capture.path_hints`), to recover tags MindSpore dropped.

    Returns:
        The graph, operators in MindIR order (which is topological).
    """
    prims = {p.name: p for p in model.primitives}
    g = model.graph
    graph_prefix = g.name + ":"

    def short(n: str) -> str:
        return n[len(graph_prefix):] if n.startswith(graph_prefix) else n

    tensors: dict[str, TensorInfo] = {}
    for p in g.parameter:
        pname = p.ref_key or short(p.name)
        tensors[pname] = TensorInfo(pname, _dims(p), _DTYPE_NAMES.get(p.data_type, "float32"),
                                    kind="parameter",
                                    requires_grad=(trainable or {}).get(pname, True))
    alias: dict[str, Any] = {short(p.name): (p.ref_key or short(p.name)) for p in g.parameter}
    inputs = []
    for inp in g.input:
        n = short(inp.name)
        t = inp.tensor[0] if inp.tensor else None
        tensors[n] = TensorInfo(n, _dims(t) if t else (), _DTYPE_NAMES.get(t.data_type, "float32")
                                if t else "float32", kind="input")
        alias[n] = n
        inputs.append(n)

    constants: dict[str, Any] = {}
    ops: list[OpNode] = []
    warnings: list[str] = []
    calls: dict[str, int] = {}
    multi_out: dict[str, list[str]] = {}

    def resolve(n: str):
        n = short(n)
        while n in alias and alias[n] != n:
            nxt = alias[n]
            if not isinstance(nxt, str):
                return nxt
            n = nxt
        return n

    for node in g.node:
        out_name = short(node.output[0]) if node.output else short(node.name)
        if node.op_type == "Constant":
            value = next((decode_attribute(a) for a in node.attribute if a.name == "value"), None)
            constants[out_name] = value
            alias[out_name] = out_name
            continue
        if not node.op_type.startswith("REF::"):
            warnings.append(f"call into sub-graph '{node.op_type}' at {node.domain or out_name}: "
                            "control flow or an un-inlined cell; its operators are not captured")
            alias[out_name] = out_name
            shape, dtype = _output_types(node)[0]
            tensors[out_name] = TensorInfo(out_name, shape, dtype, kind="input")
            continue
        prim = prims[node.op_type[5:]]
        op_type = prim.op_type
        args = [resolve(i) for i in node.input]
        if op_type in PLUMBING:
            if op_type in ("Load", "Depend"):
                alias[out_name] = args[0]
            elif op_type in ("MakeTuple", "MakeList"):
                alias[out_name] = tuple(args)
            elif op_type in ("TupleGetItem", "ListGetItem"):
                src, idx = args[0], constants.get(args[1], 0)
                if isinstance(src, tuple):
                    alias[out_name] = src[idx]
                elif src in multi_out:
                    alias[out_name] = multi_out[src][idx]
                else:
                    alias[out_name] = src
            continue
        pattrs = {a.name: decode_attribute(a) for a in prim.attribute}
        names = (arg_names(op_type) if arg_names else None) or []
        attrs: dict[str, Any] = {}
        data_inputs: list[str] = []
        for i, a in enumerate(args):
            if isinstance(a, tuple):  # a tuple of tensors (Concat) — flatten
                for el in a:
                    if isinstance(el, str) and el in tensors:
                        data_inputs.append(el)
                continue
            if a in tensors:
                data_inputs.append(a)
            elif a in constants:
                v = constants[a]
                if v == "<monad>":
                    continue
                if isinstance(v, _Tensor):
                    cname = f"const{len(tensors)}"
                    tensors[cname] = TensorInfo(cname, tuple(v.dims), v.dtype, kind="constant")
                    data_inputs.append(cname)
                    continue
                key = names[i] if i < len(names) else f"input{i}"
                attrs[key] = v
        for k, v in pattrs.items():
            if k not in _NOISE_ATTRS and k not in attrs and not k.startswith("in_") \
                    and not k.startswith("out_") and _jsonable(v):
                attrs[k] = v
        path = _primitive_path(pattrs.get("smsg_path"), op_type, node.domain, path_hints,
                               warnings)
        op_id = len(ops)
        outs = []
        types = _output_types(node)
        for k, (shape, dtype) in enumerate(types):
            tname = out_name if len(types) == 1 else f"{out_name}:{k}"
            tensors[tname] = TensorInfo(tname, shape, dtype, kind="activation", producer=op_id)
            outs.append(tname)
        if len(types) > 1:
            multi_out[out_name] = outs
            alias[out_name] = out_name
        else:
            alias[out_name] = out_name
        for t in data_inputs:
            tensors[t].consumers.append(op_id)
        call_index = calls.get(path, 0) if path else 0
        if path:
            calls[path] = call_index + 1
        ops.append(OpNode(op_id, op_type, data_inputs, outs, attrs, path, call_index, node.domain))

    outputs = []
    for o in g.output:
        r = resolve(o.name)
        outputs.extend([x for x in r if isinstance(x, str)] if isinstance(r, tuple) else [r])
    return OpGraph(ops, tensors, inputs, [o for o in outputs if o in tensors], name, warnings)


def _jsonable(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, list):
        return all(_jsonable(x) for x in v)
    return False

