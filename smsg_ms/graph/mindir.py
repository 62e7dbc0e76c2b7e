"""MindIR protobuf (``mindspore.train.mind_ir_pb2.ModelProto``) → :class:`OpGraph`.

Format facts (MindSpore 2.10, ``shared/docs/mindspore-notes.md``): a node's ``op_type`` is
``REF::<key>`` into ``model.primitives`` or ``Constant``; a node attribute ``shape`` holds the output
shape(s); init arguments of generated primitives arrive as Constant inputs after the tensor inputs.
``Load``/``UpdateState``/``Depend``/``MakeTuple``/``TupleGetItem`` are plumbing and are looked through.

This module needs only the protobuf classes, not a compiled network.
"""
from __future__ import annotations

import hashlib
import logging
import re

from typing import Any

from .model import OpGraph, OpNode, TensorInfo

PLUMBING = {"Load", "UpdateState", "Depend", "MakeTuple", "TupleGetItem", "MakeList", "make_list",
            "ListGetItem", "Return", "TensorMove"}
#: Attributes MindSpore adds to every primitive that say nothing about the operator's maths.
_NOISE_ATTRS = {"smsg_path", "smsg_uid", "input_names", "output_names", "side_effect_propagate",
                "primitive_target", "gen_strategy", "side_effect_mem", "side_effect_io", "side_effect_hidden"}

_DTYPE_NAMES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float64",
}


class _Tensor:
    """A decoded Constant tensor value: shape, dtype, ``value``, the :func:`value_fingerprint`
    of its data (``""`` when the MindIR carries none), and whether every element is 0
    (``zero``: raw data present and all zero bytes; a value without raw data is not zero)."""

    def __init__(self, dims: list[int], dtype: str, value: str = "", zero: bool = False):
        self.dims, self.dtype, self.value, self.zero = dims, dtype, value, zero


#: MindSpore's name of the constant its ``ZeroLikeFillZero`` pass folds ``ops.zeros_like(y)``
#: into (``output = zeros_like_(input)`` in ``ops/function/array_func.py``; the value node
#: keeps the folded node's name, ``output`` or ``output_<n>``)
_ZEROS_LIKE_NAME = re.compile(r"output(_\d+)?")


def value_fingerprint(tensor_proto) -> str:
    """Deterministic fingerprint of a MindIR ``TensorProto``'s value: the first 16 hex digits of
    the SHA-256 of its data type, dimensions and data (``raw_data``, else the typed repeated
    fields); ``""`` when it holds no data. Two constants with equal fingerprints are equal in
    value, shape and dtype (up to hash collision), which is what MindSpore's CSE compares
    (``Tensor::ValueEqual``, ``frontend/optimizer/cse.cc``)."""
    data = bytes(tensor_proto.raw_data)
    if not data:
        for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            values = list(getattr(tensor_proto, field, ()))
            if values:
                data = f"{field}:{values!r}".encode()
                break
    if not data:
        return ""
    head = f"{int(tensor_proto.data_type)}:{list(tensor_proto.dims)}:".encode()
    return hashlib.sha256(head + data).hexdigest()[:16]


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
        zero = bool(t.raw_data) and not any(t.raw_data)
        return _Tensor(list(t.dims), _DTYPE_NAMES.get(t.data_type, "float32"),
                       value_fingerprint(t), zero)
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


def output_types(node) -> list[tuple[tuple, str]]:
    """``[(shape, dtype name)]`` of each output of a MindIR ``NodeProto``, read from its
    ``shape`` attribute (one entry for a tensor, one per element of a tuple output; a dimension
    is an int, or ``"dyn<i>"`` for a dynamic one). An output with no recorded
    tensor type (a scalar, a monad) is ``((), "scalar")``."""
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
    if scope.startswith("Gradients/"):
        scope = scope[len("Gradients/"):]
    parts = scope.split("/")[1:-1]
    names = [p.rsplit("-", 1)[0] for p in parts if "-" in p]
    return ".".join(names[wrappers:])


def pass_of_scope(scope: str) -> str:
    """``"backward"`` for ``Gradients/...`` scopes, ``"optimizer"`` inside an optimizer cell
    (``optimizer-Momentum``), else ``"forward"``."""
    if scope.startswith("Gradients/"):
        return "backward"
    if "/optimizer-" in scope:
        return "optimizer"
    return "forward"


def _primitive_path(tag, op_type: str, scope: str, hints, warnings: list[str],
                    wrappers: int = 0):
    """The primitive path of a node: its tag, corrected from the scope where MindSpore lost it.

    In a semi-auto compile MindSpore rebuilds un-annotated ``MatMul`` primitives (the tag is
    lost and all calls share one primitive), and it can merge instances with equal attributes.
    ``hints`` (cell path → op type → tagged paths) recovers the path from the node's scope.
    """
    if hints is None:
        return tag
    cell = cell_path_of_scope(scope, wrappers)
    candidates = hints.get(cell, {}).get(op_type, [])
    if tag in candidates or (tag and not candidates and cell == tag.rpartition(".")[0]):
        return tag
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        match = re.search(r"-op(\d+)$", scope)
        k = int(match.group(1)) if match else 0
        if k < len(candidates):
            # routine for a cell with several MatMuls (MindSpore rebuilt them): a debug line,
            # not a capture warning
            logging.getLogger(__name__).debug(
                "%s: %d %s primitives in cell '%s' and the call lost its tag; assumed %s (call "
                "order)", scope, len(candidates), op_type, cell, candidates[k])
            return candidates[k]
    return tag if tag and cell == tag.rpartition(".")[0] else None


#: Primitives that mean tensor-dependent control flow survived the compile.
CONTROL_FLOW = {"Switch", "SwitchLayer", "While", "If", "make_range"}
#: how the warning about one of them starts (:meth:`smsg_ms.graph.model.OpGraph.control_flow`)
CONTROL_FLOW_WARNING = "control flow: "


class _Partial:
    """A sub-graph with its first arguments bound (``Partial(fg, a, b)``), called later."""

    def __init__(self, func, args: list):
        self.func, self.args = func, args


def parse_model(model, name: str = "network", arg_names=None,
                trainable: dict[str, bool] | None = None, path_hints=None,
                wrappers: int = 0) -> OpGraph:
    """Build an :class:`OpGraph` from a parsed ``ModelProto`` (forward or training compile).

    Calls into sub-graphs (``model.functions``: lazy-inlined or reused cells) are inlined, each call
    in its own name space, so the result is one flat operator list.

    Args:
        model: ``mind_ir_pb2.ModelProto``.
        name: network name recorded in the graph.
        arg_names: callable ``op_type -> list[str] | None`` giving the names of a primitive's
            inputs in order (tensor inputs then init arguments); used to name Constant inputs.
        trainable: parameter name → ``requires_grad``.
        path_hints: cell path → primitive type → tagged primitive paths (see
            :func:`smsg_ms.graph.capture.path_hints`), to recover tags MindSpore dropped.
        wrappers: number of wrapper cells (training cell, loss cell) above the user's network
            in node scopes; they are dropped from cell paths.

    Returns:
        The graph, operators in MindIR order (which is topological). Symbolic (dynamic) dimensions
        are named ``dyn<axis>`` and listed in ``warnings``; so are control-flow primitives.
    """
    return _Walker(model, arg_names, trainable, path_hints, wrappers).run(name)


class _Walker:
    """Walks the MindIR graph and, recursively, the sub-graphs it calls."""

    def __init__(self, model, arg_names, trainable, path_hints, wrappers=0):
        self.wrappers = wrappers
        self.model = model
        self.prims = {p.name: p for p in model.primitives}
        self.funcs = {f.name: f for f in model.functions}
        self.arg_names, self.trainable, self.hints = arg_names, trainable or {}, path_hints
        self.tensors: dict[str, TensorInfo] = {}
        self.constants: dict[str, Any] = {}
        self.alias: dict[str, Any] = {}
        self.multi_out: dict[str, list[str]] = {}
        self.depends: set[str] = set()       # names of Depend outputs (and formals bound to one)
        self.depend_args: list[bool] = []    # per input of the node being walked
        self.ops: list[OpNode] = []
        self.warnings: list[str] = []
        self.calls: dict[str, int] = {}
        self.n_calls = 0
        self.depth = 0
        #: per active call: (cell path the sub-graph was parsed from, cell path of this call)
        self.remap: list[tuple[str, str] | None] = []

    # names: a graph-local name "<graph>:x" becomes "<ns>x"; constants are global
    @staticmethod
    def _local(n: str, graph_name: str) -> str:
        prefix = graph_name + ":"
        return n[len(prefix):] if n.startswith(prefix) else n

    def resolve(self, n: str):
        seen = 0
        while n in self.alias and self.alias[n] != n and seen < 10000:
            nxt = self.alias[n]
            if not isinstance(nxt, str):
                return nxt
            n, seen = nxt, seen + 1
        return n

    def through_depend(self, n: str) -> bool:
        """True when name ``n`` reaches its tensor through the output of a ``Depend``."""
        seen = 0
        while n in self.alias and seen < 10000:
            if n in self.depends:
                return True
            nxt = self.alias[n]
            if not isinstance(nxt, str) or nxt == n:
                return False
            n, seen = nxt, seen + 1
        return False

    def resolve_key(self, n: str) -> str:
        """Like :meth:`resolve` but stops at the last name (to look up a closure)."""
        seen = 0
        while n in self.alias and isinstance(self.alias[n], str) and self.alias[n] != n \
                and seen < 10000:
            n, seen = self.alias[n], seen + 1
        return n

    def run(self, name: str) -> OpGraph:
        g = self.model.graph
        for p in g.parameter:
            pname = p.ref_key or self._local(p.name, g.name)
            self.tensors[pname] = TensorInfo(pname, self._dims(p, pname),
                                             _DTYPE_NAMES.get(p.data_type, "float32"),
                                             kind="parameter",
                                             requires_grad=self.trainable.get(pname, True))
            self.alias[self._local(p.name, g.name)] = pname
        inputs = []
        for inp in g.input:
            n = self._local(inp.name, g.name)
            t = inp.tensor[0] if inp.tensor else None
            self.tensors[n] = TensorInfo(n, self._dims(t, n) if t else (),
                                         _DTYPE_NAMES.get(t.data_type, "float32") if t else
                                         "float32", kind="input")
            self.alias[n] = n
            inputs.append(n)
        outs = self.walk(g, "")
        outputs: list[str] = []
        for r in outs:
            outputs.extend([x for x in r if isinstance(x, str)] if isinstance(r, tuple) else [r])
        graph = OpGraph(self.ops, self.tensors, inputs,
                        [o for o in outputs if o in self.tensors], name, self.warnings)
        return _canonical_names(graph)

    def _dims(self, tensor_proto, where: str) -> tuple:
        dims = _dims(tensor_proto)
        if any(isinstance(d, str) for d in dims):
            self.warnings.append(f"{where}: dynamic shape {list(tensor_proto.dims)} recorded with "
                                 f"symbolic dims {list(dims)}")
        return dims

    def walk(self, g, ns: str) -> list:
        """Add the operators of graph ``g`` (names prefixed ``ns``); return its resolved outputs."""
        def key(n: str) -> str:
            return ns + self._local(n, g.name) if n.startswith(g.name + ":") else n

        for node in g.node:
            out_name = key(node.output[0] if node.output else node.name)
            if node.op_type == "Constant":
                value = next((decode_attribute(a) for a in node.attribute if a.name == "value"),
                             None)
                self.constants[out_name] = value
                self.alias[out_name] = out_name
                continue
            args = [self.resolve(key(i)) for i in node.input]
            self.depend_args = [self.through_depend(key(i)) for i in node.input]
            target = node.op_type[5:] if node.op_type.startswith("REF::") else node.op_type
            if target in self.funcs:
                self.call(self.funcs[target], args, out_name, node.domain, self.depend_args)
                continue
            closure = self.alias.get(self.resolve_key(key(target)))
            if isinstance(closure, _Partial):  # e.g. the backward graph returned by the forward
                self.call(closure.func, closure.args + args, out_name, node.domain)
                continue
            if target in self.prims and self.prims[target].op_type == "Partial" and node.input \
                    and node.input[0] in self.funcs:
                self.alias[out_name] = _Partial(self.funcs[node.input[0]], args[1:])
                continue
            callee = self.resolve(key(target))
            if isinstance(callee, str) and callee in self.tensors and \
                    self.tensors[callee].producer is not None and \
                    self.ops[self.tensors[callee].producer].type in CONTROL_FLOW:
                self.opaque(node, out_name)  # the branch taken; already warned at the Switch
                continue
            if target not in self.prims:
                self.warnings.append(f"{node.domain or out_name}: call of '{node.op_type}' that is "
                                     "neither a primitive nor a sub-graph; its operators are not "
                                     "captured")
                self.opaque(node, out_name)
                continue
            self.primitive(node, self.prims[target], args, out_name)
        return [self.resolve(key(o.name)) for o in g.output]

    def call(self, func, args, out_name: str, scope: str, depends=None) -> None:
        """Walk sub-graph ``func`` with ``args``; ``depends``: per argument, whether it came
        through a ``Depend`` (its formal is marked so)."""
        if self.depth > 64:
            raise RecursionError(f"{scope}: sub-graph calls nest deeper than 64 (recursion?)")
        self.n_calls += 1
        ns = f"c{self.n_calls}/"
        for i, (formal, actual) in enumerate(zip(func.input, args)):
            self.alias[ns + self._local(formal.name, func.name)] = actual
            if depends and i < len(depends) and depends[i]:
                self.depends.add(ns + self._local(formal.name, func.name))
        for p in func.parameter:  # parameters owned by the sub-graph itself
            pname = p.ref_key or self._local(p.name, func.name)
            self.tensors.setdefault(pname, TensorInfo(
                pname, self._dims(p, pname), _DTYPE_NAMES.get(p.data_type, "float32"),
                kind="parameter", requires_grad=self.trainable.get(pname, True)))
            self.alias[ns + self._local(p.name, func.name)] = pname
        self.depth += 1
        self.remap.append(self._reuse_remap(func, args))
        outs = self.walk(func, ns)
        self.remap.pop()
        self.depth -= 1
        self.alias[out_name] = outs[0] if len(outs) == 1 else tuple(outs)

    def _reuse_remap(self, func, args) -> tuple[str, str] | None:
        """For a reused cell (one graph for identical layers, ``cell_init_args``): the graph's
        primitives carry the tags of the instance it was parsed from; the weights passed in name
        the instance called. Returns ``(parsed cell, called cell)`` when they differ."""
        tags = [p.attribute for p in (self.prims.get(n.op_type[5:]) for n in func.node
                                      if n.op_type.startswith("REF::")) if p is not None]
        home = _common_prefix([decode_attribute(a) for attrs in tags for a in attrs
                               if a.name == "smsg_path"])
        params = [a for a in args if isinstance(a, str) and a in self.tensors
                  and self.tensors[a].kind == "parameter"]
        site = _common_prefix([p.rpartition(".")[0] for p in params])
        if not home or not site or home == site or home.count(".") != site.count("."):
            return None
        return home, site

    def opaque(self, node, out_name: str) -> None:
        shape, dtype = output_types(node)[0]
        self.alias[out_name] = out_name
        self.tensors[out_name] = TensorInfo(out_name, shape, dtype, kind="input")

    def constant_tensor(self, value: _Tensor, source: str = "") -> str:
        """A new ``constant`` tensor of ``value``'s shape, dtype and value fingerprint; returns
        its name. ``source``: the MindIR name of the Constant node, which marks a folded
        ``ops.zeros_like`` of an activation (:attr:`TensorInfo.zeros_like`)."""
        name = f"const{len(self.tensors)}"
        self.tensors[name] = TensorInfo(
            name, tuple(value.dims), value.dtype, kind="constant", value=value.value,
            zeros_like=bool(value.dims) and value.zero
            and _ZEROS_LIKE_NAME.fullmatch(source.rpartition(":")[2]) is not None)
        return name

    def primitive(self, node, prim, args, out_name: str) -> None:
        op_type = prim.op_type
        tensors, constants, alias = self.tensors, self.constants, self.alias
        if op_type in PLUMBING:
            if op_type in ("Load", "Depend", "TensorMove"):  # TensorMove: a copy (reused cells)
                alias[out_name] = args[0]
                if op_type == "Depend":
                    self.depends.add(out_name)
            elif op_type in ("MakeTuple", "MakeList", "make_list"):  # make_list: a Python list
                alias[out_name] = tuple(args)
            elif op_type in ("TupleGetItem", "ListGetItem"):
                src, idx = args[0], constants.get(args[1], 0)
                if isinstance(src, tuple):
                    alias[out_name] = src[idx]
                elif src in self.multi_out:
                    alias[out_name] = self.multi_out[src][idx]
                else:
                    alias[out_name] = src
            return
        if op_type in CONTROL_FLOW:
            cell = cell_path_of_scope(node.domain, self.wrappers) or "<top>"
            self.warnings.append(f"{CONTROL_FLOW_WARNING}{op_type} in cell '{cell}' ({node.domain}) "
                                 "branches on a tensor value; the operators of its branches are "
                                 "not captured (rewrite with ops.select or a Python-level "
                                 "condition)")
        pattrs = {a.name: decode_attribute(a) for a in prim.attribute}
        names = (self.arg_names(op_type) if self.arg_names else None) or []
        attrs: dict[str, Any] = {}
        data_inputs: list[str] = []
        depend_inputs: list[int] = []
        for i, a in enumerate(args):
            if isinstance(a, tuple):  # a tuple of tensors (Concat) — flatten
                # a constant tensor in the tuple is one of the operator's inputs too: MindSpore
                # wants a strategy for each (Concat of ``(x, zeros)``, mindformers' MTP roll)
                for el in a:
                    if isinstance(el, str) and el in tensors:
                        data_inputs.append(el)
                    elif isinstance(el, str) and isinstance(constants.get(el), _Tensor):
                        data_inputs.append(self.constant_tensor(constants[el], el))
                continue
            if a in tensors:
                if i < len(self.depend_args) and self.depend_args[i]:
                    depend_inputs.append(len(data_inputs))
                data_inputs.append(a)
            elif a in constants:
                v = constants[a]
                if v == "<monad>":
                    continue
                if isinstance(v, _Tensor):
                    data_inputs.append(self.constant_tensor(v, a))
                    continue
                k = names[i] if i < len(names) else f"input{i}"
                attrs[k] = v
        for k, v in pattrs.items():
            if k not in _NOISE_ATTRS and k not in attrs and not k.startswith("in_") \
                    and not k.startswith("out_") and _jsonable(v):
                attrs[k] = v
        phase = pass_of_scope(node.domain)
        path = None if phase != "forward" else _primitive_path(
            pattrs.get("smsg_path"), op_type, node.domain, self.hints, self.warnings, self.wrappers)
        remap = self.remap[-1] if self.remap else None
        if path and remap and (path + ".").startswith(remap[0] + "."):
            path = remap[1] + path[len(remap[0]):]
        op_id = len(self.ops)
        outs = []
        types = output_types(node)
        for k, (shape, dtype) in enumerate(types):
            tname = out_name if len(types) == 1 else f"{out_name}:{k}"
            if any(isinstance(d, str) for d in shape):
                self.warnings.append(f"{op_type} '{path or node.domain}': output has a dynamic "
                                     f"shape, recorded with symbolic dims {list(shape)}")
            tensors[tname] = TensorInfo(tname, shape, dtype, kind="activation", producer=op_id)
            outs.append(tname)
        if len(types) > 1:
            self.multi_out[out_name] = outs
        alias[out_name] = out_name
        for t in data_inputs:
            tensors[t].consumers.append(op_id)
        if phase == "forward" and not path:   # a functional read of a weight passed in
            cell = cell_path_of_scope(node.domain, self.wrappers)
            for t in set(data_inputs):
                if tensors[t].kind == "parameter" and t.rpartition(".")[0] != cell:
                    tensors[t].foreign_reads += 1
        call_index = self.calls.get(path, 0) if path else 0
        if path:
            self.calls[path] = call_index + 1
        self.ops.append(OpNode(op_id, op_type, data_inputs, outs, attrs, path, call_index,
                               node.domain, phase, depend_inputs))


def _common_prefix(paths: list) -> str:
    """Longest common dotted prefix of ``paths`` (``""`` when none or empty)."""
    split = [p.split(".") for p in paths if isinstance(p, str) and p]
    if not split:
        return ""
    out = []
    for parts in zip(*split):
        if any(x != parts[0] for x in parts):
            break
        out.append(parts[0])
    return ".".join(out)


def _jsonable(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, list):
        return all(_jsonable(x) for x in v)
    return False


def _canonical_name(name: str) -> str:
    """``CNode_116$v$h:118`` → ``CNode_116$h$v:118``: MindSpore lists the closure variables a
    node name carries (after ``$``) in an order that differs between runs (BERT's attention,
    seen in the reference plans), so they are sorted to keep plans byte-identical."""
    head, sep, tail = name.partition(":")
    parts = head.split("$")
    if len(parts) <= 2:
        return name
    return "$".join([parts[0]] + sorted(parts[1:])) + sep + tail


def _canonical_names(graph: OpGraph) -> OpGraph:
    """``graph`` with every tensor renamed by :func:`_canonical_name` (collisions keep the
    original name)."""
    rename = {}
    taken = set(graph.tensors)
    for n in sorted(graph.tensors):
        c = _canonical_name(n)
        if c != n and c not in taken:
            rename[n] = c
            taken.add(c)
    if not rename:
        return graph
    tensors = {}
    for n, t in graph.tensors.items():
        t.name = rename.get(n, n)
        tensors[t.name] = t
    for op in graph.ops:
        op.inputs = [rename.get(n, n) for n in op.inputs]
        op.outputs = [rename.get(n, n) for n in op.outputs]
    return OpGraph(graph.ops, tensors, [rename.get(n, n) for n in graph.inputs],
                   [rename.get(n, n) for n in graph.outputs], graph.name, graph.warnings)
