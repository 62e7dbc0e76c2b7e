"""``Morph`` regions: the body of a ``Morph`` primitive whose layout the network fixes, as one
region of the captured graph with the network's layout on its inputs and output.

MindSpore's ``Morph`` pass (``frontend/optimizer/irpass/morph.cc``) replaces the primitive by a
call of its ``fn``'s graph early in the compile, so a capture sees only the body (Reshape,
MatMul, Cast...). In the parallel compile the ``Morph`` still carries the network's layouts
(``shard()`` with ``Layout`` objects, prim attr ``self_define_shard``: ``SelfDefineShardInfo``,
``frontend/parallel/ops_info/self_define_shard_info.cc``): MindSpore redistributes each input
to its layout there, runs the body on the slices with no collective of its own, and gives the
output the ``out_layout``. mindformers' ``parallel_core`` models (Qwen3, TeleChat3) build their
embeddings and linear layers so.

:func:`mark_morph_fns` (before the capture's compile) wraps each such ``Morph``'s ``fn`` so that
every input and the output pass an ``Identity`` carrying attributes :data:`MORPH_ATTR` (the
Morph's path), :data:`ARG_ATTR` (input index, ``-1`` for the output) and :data:`LAYOUT_ATTR`
(that tensor's layout, JSON: ``device_matrix``, ``tensor_map``, ``alias_name``).
:func:`fold_morph_markers` (on the captured :class:`~smsg_ms.graph.model.OpGraph`) removes
those Identities and records on the body operators: :data:`MORPH_ATTR` on every one,
:data:`ENTRY_ATTR` (``{input index: layout}``) on the first non-Cast operator reading a Morph
input, :data:`EXIT_ATTR` (``{output index: layout}``) on the last non-Cast operator producing
its output (a Cast keeps its input's layout: MindSpore gives it no ``OperatorInfo``). The cost
model prices the region so (:mod:`smsg_ms.cost.morph_region`). :func:`set_global_outputs`
reshapes a ``fn``'s output to the ``Morph``'s ``infer_shape`` (its global shape) where the two
differ (mindformers' MoE token permute), for a second compile.
"""
from __future__ import annotations

import json
from math import prod

from .model import OpGraph, OpNode

MORPH_ATTR = "smsg_morph"
ARG_ATTR = "smsg_morph_arg"
LAYOUT_ATTR = "smsg_morph_layout"
ENTRY_ATTR = "smsg_morph_entry"
EXIT_ATTR = "smsg_morph_exit"
#: most inputs of a Morph ``fn`` the wrapper handles (mindformers' have 2 or 3)
MAX_ARGS = 6


def _layout_json(layout: dict) -> str:
    return json.dumps({"device_matrix": [int(v) for v in layout["device_matrix"]],
                       "tensor_map": [list(v) if isinstance(v, (tuple, list)) else int(v)
                                      for v in layout["tensor_map"]],
                       "alias_name": [str(v) for v in layout.get("alias_name") or ()]},
                      sort_keys=True)


def _morph_layouts(prim) -> tuple[list[dict], list[dict]] | None:
    """``(in layouts, out layouts)`` of a ``self_define_shard`` ``Morph`` set with ``Layout``
    objects, or ``None``."""
    if not prim.attrs.get("__metamorphosis__") or prim.attrs.get("self_define_shard") is not True:
        return None
    ins, outs = prim.attrs.get("in_layout"), prim.attrs.get("out_layout")
    if not ins or not all(isinstance(v, dict) and "device_matrix" in v for v in ins):
        return None
    outs = [v for v in outs or () if isinstance(v, dict) and "device_matrix" in v]
    return list(ins), outs


def _arity(fn) -> tuple[int, tuple] | None:
    """``(positional parameters, their defaults)`` of ``fn``, or ``None`` when it takes
    ``*args``, ``**kwargs`` or keyword-only parameters (MindSpore's ``Morph`` refuses those:
    ``ops/operations/debug_ops.py``). mindformers' MoE ``permute_reshape_fn(x, shp)`` takes a
    shape tuple besides its one laid-out input; its ``forward_func`` a defaulted
    ``num_tokens_per_expert=None``."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return None
    return len(params), tuple(p.default for p in params if p.default is not p.empty)


def mark_morph_fns(prims: dict) -> list[str]:
    """Wrap the ``fn`` of every ``self_define_shard`` ``Morph`` in ``prims`` (``{path:
    Primitive}``, :func:`smsg_ms.graph.capture.tag_primitives`) with marking Identities (see the
    module docstring). The ``k``-th layout marks the ``fn``'s ``k``-th argument where that
    argument is a tensor (MindSpore's ``SelfDefineShardInfo`` lays out the Morph's tensor
    inputs; a shape tuple or a ``None`` beside them passes unmarked, and arguments past the last
    layout too); the wrapper keeps the ``fn``'s defaults. A Morph whose ``fn`` takes more than
    :data:`MAX_ARGS` arguments, ``*args`` or keyword-only ones (:func:`_arity`), whose layouts
    are not ``Layout`` objects, or with more layouts than arguments, is left as it is. Returns
    the paths wrapped, sorted."""
    import types

    from mindspore import Tensor, nn
    from mindspore.ops import operations as P  # noqa: N812

    class MarkedFn(nn.Cell):
        """The Morph's ``fn`` between Identities (MindSpore parses ``fn``: fixed arity, no
        closure, so one method per argument count; ``isinstance`` is decided while MindSpore
        compiles, so a non-tensor argument is passed as it is)."""

        def __init__(self, fn, path: str, ins: list[dict], out: dict | None):
            super().__init__(auto_prefix=False)
            self.fn = fn
            self.marks = [P.Identity().add_prim_attr(MORPH_ATTR, path).add_prim_attr(
                ARG_ATTR, i).add_prim_attr(LAYOUT_ATTR, _layout_json(lay))
                for i, lay in enumerate(ins)]
            self.marks += [P.Identity() for _ in range(MAX_ARGS - len(ins))]
            self.m0, self.m1, self.m2, self.m3, self.m4, self.m5 = self.marks
            self.l0, self.l1, self.l2, self.l3, self.l4, self.l5 = (
                k < len(ins) for k in range(MAX_ARGS))
            self.has_out = out is not None
            self.has_target, self.target = False, ()   # set by set_global_outputs
            self.reshape = P.Reshape()
            self.mo = P.Identity()
            if out is not None:
                self.mo.add_prim_attr(MORPH_ATTR, path).add_prim_attr(ARG_ATTR, -1)
                self.mo.add_prim_attr(LAYOUT_ATTR, _layout_json(out))

        def g0(self, a):
            if self.l0 and isinstance(a, Tensor):
                return self.m0(a)
            return a

        def g1(self, a):
            if self.l1 and isinstance(a, Tensor):
                return self.m1(a)
            return a

        def g2(self, a):
            if self.l2 and isinstance(a, Tensor):
                return self.m2(a)
            return a

        def g3(self, a):
            if self.l3 and isinstance(a, Tensor):
                return self.m3(a)
            return a

        def g4(self, a):
            if self.l4 and isinstance(a, Tensor):
                return self.m4(a)
            return a

        def g5(self, a):
            if self.l5 and isinstance(a, Tensor):
                return self.m5(a)
            return a

        def go(self, a):
            if self.has_target:
                a = self.reshape(a, self.target)
            if self.has_out:
                return self.mo(a)
            return a

        def f1(self, a):
            return self.go(self.fn(self.g0(a)))

        def f2(self, a, b):
            return self.go(self.fn(self.g0(a), self.g1(b)))

        def f3(self, a, b, c):
            return self.go(self.fn(self.g0(a), self.g1(b), self.g2(c)))

        def f4(self, a, b, c, d):
            return self.go(self.fn(self.g0(a), self.g1(b), self.g2(c), self.g3(d)))

        def f5(self, a, b, c, d, e):
            return self.go(self.fn(self.g0(a), self.g1(b), self.g2(c), self.g3(d), self.g4(e)))

        def f6(self, a, b, c, d, e, f):
            return self.go(self.fn(self.g0(a), self.g1(b), self.g2(c), self.g3(d), self.g4(e),
                                   self.g5(f)))

    wrapped = []
    for path, prim in sorted(prims.items()):
        layouts = _morph_layouts(prim)
        arity = None if layouts is None else _arity(prim.__morph_fn__)
        if (arity is None or not 1 <= arity[0] <= MAX_ARGS
                or not 1 <= len(layouts[0]) <= arity[0]):
            continue
        ins, outs = layouts
        marked = MarkedFn(prim.__morph_fn__, path, ins, outs[0] if len(outs) == 1 else None)
        marked.original = prim.__morph_fn__
        method = getattr(marked, f"f{arity[0]}")
        if arity[1]:   # the fn's defaults on the wrapper's last parameters
            func = method.__func__
            method = types.MethodType(types.FunctionType(
                func.__code__, func.__globals__, func.__name__, arity[1], func.__closure__),
                marked)
        prim.__morph_fn__ = method
        wrapped.append(path)
    return wrapped


def _entry_shapes(graph: OpGraph, out_mark: OpNode, path: str) -> list[list[int]] | None:
    """The shapes of the tensors entering one call of Morph ``path`` (its input marks met
    walking back from ``out_mark``), in argument order; ``None`` when the marked arguments are
    not ``0 .. k`` (a non-tensor argument between them)."""
    shapes = {}
    for op_id in _body(graph, out_mark, path) + [out_mark.id]:
        for name in graph.ops[op_id].inputs:
            mark = graph.producer_of(name)
            if (mark is not None and mark.attrs.get(MORPH_ATTR) == path
                    and mark.type == "Identity" and mark.attrs.get(ARG_ATTR, -1) >= 0):
                shapes[int(mark.attrs[ARG_ATTR])] = [int(v) for v in
                                                     graph.tensors[mark.inputs[0]].shape]
    if sorted(shapes) != list(range(len(shapes))):
        return None
    return [shapes[k] for k in range(len(shapes))]


def set_global_outputs(graph: OpGraph, prims: dict) -> list[str]:
    """Give each marked ``Morph`` of ``prims`` whose ``fn``, compiled on the global tensors,
    returns another shape than its ``infer_shape`` a Reshape to that shape after the ``fn``;
    ``graph`` is the capture compiled with :func:`mark_morph_fns` (marks not yet folded).

    A ``Morph``'s ``fn`` runs on each device's slices, and MindSpore's parallel compile gives
    its output the shape of its ``infer_shape`` (the ``Morph``'s global shape): mindformers'
    MoE ``local_reshape_permute`` reshapes its ``(B·S, H)`` slice to ``(1, -1, H)``, one row
    per device, global ``(dp, B·S/dp, H)`` (``transformer/moe/moe_layer.py``). The capture
    compiles the ``fn`` on the global tensor, ``(1, B·S, H)``, so the operators after it would
    have other shapes than in the parallel compile. ``infer_shape`` is called as MindSpore's
    ``PrimitiveWithInfer`` calls it: one shape (a list) per tensor input. A ``Morph`` whose
    calls disagree on the shape, whose ``infer_shape`` raises or changes the element count is
    left as it is. Compile again after a non-empty return. Returns the paths changed, sorted."""
    targets: dict[str, set] = {}
    for out_mark in graph.ops:
        if out_mark.type != "Identity" or out_mark.attrs.get(ARG_ATTR) != -1:
            continue
        path = out_mark.attrs.get(MORPH_ATTR)
        prim = prims.get(path)
        marked = getattr(getattr(prim, "__morph_fn__", None), "__self__", None)
        shapes = _entry_shapes(graph, out_mark, path)
        got = tuple(int(v) for v in graph.tensors[out_mark.inputs[0]].shape)
        if not hasattr(marked, "has_target") or shapes is None:
            targets.setdefault(path, set()).add(None)
            continue
        try:
            want = tuple(int(v) for v in prim.infer_shape(*shapes))
        except Exception:  # noqa: BLE001 (the network's own function: any error, no reshape)
            want = got
        fits = want != got and -1 not in want and prod(want) == prod(got)
        targets.setdefault(path, set()).add(want if fits else None)
    changed = sorted(path for path, wants in targets.items()
                     if len(wants) == 1 and None not in wants)
    for path in changed:
        marked = prims[path].__morph_fn__.__self__
        marked.has_target, marked.target = True, next(iter(targets[path]))
    return changed


def unmark_morph_fns(prims: dict) -> None:
    """Undo :func:`mark_morph_fns` on ``prims`` (the network as it was built)."""
    for prim in prims.values():
        marked = getattr(getattr(prim, "__morph_fn__", None), "__self__", None)
        if hasattr(marked, "original") and hasattr(marked, "marks"):
            prim.__morph_fn__ = marked.original


def _through_casts(graph: OpGraph, name: str, index: int):
    """``(op, input index)`` of each first non-Cast reader of tensor ``name`` (read at
    ``index`` by a direct reader), looking through Casts."""
    out = []
    for op in graph.consumers_of(name):
        for i, n in enumerate(op.inputs):
            if n != name:
                continue
            if op.type == "Cast" and i == 0:
                out += _through_casts(graph, op.outputs[0], index)
            else:
                out.append((op, i))
    return out


def _body(graph: OpGraph, exit_op: OpNode, path: str) -> list[int]:
    """Ids of the operators from the Morph's input marks to ``exit_op`` (its output mark),
    walking producers backwards."""
    seen, todo = set(), [exit_op.id]
    while todo:
        op = graph.ops[todo.pop()]
        for name in op.inputs:
            p = graph.tensors[name].producer
            if p is None or p in seen:
                continue
            prod = graph.ops[p]
            if prod.attrs.get(MORPH_ATTR) == path and prod.attrs.get(ARG_ATTR, -1) >= 0:
                continue
            seen.add(p)
            todo.append(p)
    return sorted(seen)


def fold_morph_markers(graph: OpGraph) -> OpGraph:
    """The captured ``graph`` without the marking Identities of :func:`mark_morph_fns`, with
    the region attributes of the module docstring on the body operators. A Morph whose output
    mark is missing (a tuple output) keeps its entry layouts only. A graph without marks is
    returned unchanged."""
    marks = [op for op in graph.ops if op.type == "Identity" and MORPH_ATTR in op.attrs]
    if not marks:
        return graph
    for out_mark in (m for m in marks if m.attrs[ARG_ATTR] == -1):
        path = out_mark.attrs[MORPH_ATTR]
        for op_id in _body(graph, out_mark, path):
            graph.ops[op_id].attrs[MORPH_ATTR] = path
    for mark in marks:
        lay = json.loads(mark.attrs[LAYOUT_ATTR])
        if mark.attrs[ARG_ATTR] >= 0:
            for op, i in _through_casts(graph, mark.outputs[0], mark.attrs[ARG_ATTR]):
                op.attrs.setdefault(ENTRY_ATTR, {})[str(i)] = lay
                op.attrs.setdefault(MORPH_ATTR, mark.attrs[MORPH_ATTR])
            continue
        src = graph.producer_of(mark.inputs[0])
        while src is not None and src.type == "Cast":
            src = graph.producer_of(src.inputs[0])
        if src is not None:
            out_name = mark.inputs[0]
            while graph.tensors[out_name].producer != src.id:
                out_name = graph.producer_of(out_name).inputs[0]
            src.attrs.setdefault(EXIT_ATTR, {})[str(src.outputs.index(out_name))] = lay
    for op in graph.ops:   # JSON text: attributes stay plain strings
        for key in (ENTRY_ATTR, EXIT_ATTR):
            if isinstance(op.attrs.get(key), dict):
                op.attrs[key] = json.dumps(op.attrs[key], sort_keys=True)
    return _without(graph, {m.id for m in marks})


def _without(graph: OpGraph, drop: set[int]) -> OpGraph:
    """``graph`` without the one-input, one-output operators ``drop``: their readers read
    their input instead; ids renumbered, producers and consumers rebuilt."""
    alias = {}
    for i in drop:
        op = graph.ops[i]
        alias[op.outputs[0]] = op.inputs[0]

    def real(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    kept = [op for op in graph.ops if op.id not in drop]
    new_id = {op.id: k for k, op in enumerate(kept)}
    for name in alias:
        graph.tensors.pop(name, None)
    for t in graph.tensors.values():
        t.producer = new_id.get(t.producer) if t.producer is not None else None
        t.consumers = []
    for k, op in enumerate(kept):
        op.id = k
        op.inputs = [real(n) for n in op.inputs]
        for n in op.inputs:
            if k not in graph.tensors[n].consumers:
                graph.tensors[n].consumers.append(k)
    graph.ops = kept
    graph.outputs = [real(n) for n in graph.outputs]
    return graph
