"""Graphs of one network at many batch sizes from two captures (rescaling the batch axis).

The outer pipeline search needs the network's graph at every micro-batch size ``b`` it tries; one
capture of the 80-layer 70B shape costs about 10 s of MindSpore compile. In the networks planned
here every batch-dependent integer of the graph (tensor dimensions, Reshape targets and other
integer attributes) is ``k · b`` for a constant ``k`` (``b``, ``b · seq``, ``b · heads`` ...), so
two captures at batch sizes ``b1 ≠ b2`` determine all others: an integer ``x1`` (at ``b1``) that
reads ``x2`` at ``b2`` is

* the same at every batch size when ``x1 == x2``;
* ``(x1 / b1) · b`` when ``x1 · b2 == x2 · b1`` and ``b1`` divides ``x1`` (linear in ``b``);
* anything else (affine, non-linear, a structural change) is refused with
  :class:`BatchScaleError`: the caller then captures that batch size instead.

This is exact for graphs whose integers are linear in the batch size (tested against fresh
captures in ``tests/test_batch_scale.py``); a dependence that is linear between the two anchors
but not elsewhere (a special case at one batch size) would not be detected, so the anchors are
two batch sizes the caller actually plans.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable

from .model import OpGraph


class BatchScaleError(ValueError):
    """Two captures do not differ by a batch size factor alone (message names the culprit)."""


class _Linear(int):
    """Marks a template integer ``k`` standing for ``k · batch``."""


def _template(v1: Any, v2: Any, b1: int, b2: int, where: str) -> Any:
    """``v1``/``v2`` (JSON values at batch ``b1``/``b2``) as one value whose batch-linear
    integers are :class:`_Linear` (module docstring's rules)."""
    if isinstance(v1, bool) or isinstance(v2, bool) or not (
            isinstance(v1, (int, list, tuple, dict)) and type(v1) is type(v2)):
        if v1 != v2 or type(v1) is not type(v2):
            raise BatchScaleError(f"{where}: {v1!r} at batch {b1} and {v2!r} at batch {b2} "
                                  "differ")
        return v1
    if isinstance(v1, int):
        if v1 == v2:
            return v1
        if v1 * b2 == v2 * b1 and v1 % b1 == 0:
            return _Linear(v1 // b1)
        raise BatchScaleError(f"{where}: {v1} at batch {b1} and {v2} at batch {b2} are not "
                              "proportional to the batch size")
    if isinstance(v1, dict):
        if sorted(v1) != sorted(v2):
            raise BatchScaleError(f"{where}: keys {sorted(v1)} and {sorted(v2)} differ")
        return {k: _template(v1[k], v2[k], b1, b2, f"{where}.{k}") for k in v1}
    if len(v1) != len(v2):
        raise BatchScaleError(f"{where}: {v1!r} and {v2!r} differ in length")
    return type(v1)(_template(a, c, b1, b2, f"{where}[{i}]")
                    for i, (a, c) in enumerate(zip(v1, v2)))


def _linear_in(t: Any) -> bool:
    if isinstance(t, _Linear):
        return True
    if isinstance(t, dict):
        return any(_linear_in(v) for v in t.values())
    if isinstance(t, (list, tuple)):
        return any(_linear_in(v) for v in t)
    return False


def _instantiate(t: Any, b: int) -> Any:
    if isinstance(t, _Linear):
        return int(t) * b
    if isinstance(t, dict):
        return {k: _instantiate(v, b) for k, v in t.items()}
    if isinstance(t, (list, tuple)):
        return type(t)(_instantiate(v, b) for v in t)
    return t


def _same_except(r1, r2, key: str, b1: int, b2: int, where: str) -> None:
    # every field but ``key`` (names, ids, consumers, dtypes, flags) must be equal
    for f in fields(r1):
        if f.name != key and getattr(r1, f.name) != getattr(r2, f.name):
            raise BatchScaleError(f"{where}: {f.name} differs between batch {b1} and {b2}")


class BatchTemplate:
    """A network's graph as a function of the batch size, from captures ``g1`` (batch ``b1``)
    and ``g2`` (batch ``b2``): every field of the two graphs must be equal except the integers
    of tensor shapes and operator attributes that are proportional to the batch size (module
    docstring). :meth:`graph` instantiates it.

    Raises:
        BatchScaleError: ``b1 == b2``, a non-positive batch size, or a field that is neither
            equal nor proportional (the message names the tensor or operator).
    """

    def __init__(self, g1: OpGraph, b1: int, g2: OpGraph, b2: int):
        for name, v in (("b1", b1), ("b2", b2)):
            _check_batch(name, v)
        if b1 == b2:
            raise BatchScaleError(f"the two anchor captures have the same batch size {b1}")
        if len(g1.ops) != len(g2.ops) or list(g1.tensors) != list(g2.tensors):
            raise BatchScaleError(f"'{g1.name}': operators or tensors differ between batch "
                                  f"{b1} ({len(g1.ops)} operators) and {b2} ({len(g2.ops)})")
        for k in ("name", "inputs", "outputs", "warnings"):
            if getattr(g1, k) != getattr(g2, k):
                raise BatchScaleError(f"graph {k} differ between batch {b1} and {b2}")
        self.base = g1
        self.shapes: dict[str, tuple] = {}       # tensor name -> template, batch-linear only
        for name, t1 in g1.tensors.items():
            t2 = g2.tensors[name]
            where = f"tensor {name}"
            _same_except(t1, t2, "shape", b1, b2, where)
            tmpl = _template(tuple(t1.shape), tuple(t2.shape), b1, b2, f"{where} shape")
            if _linear_in(tmpl):
                self.shapes[name] = tmpl
        self.attrs: dict[int, dict] = {}          # op id -> template, batch-linear only
        for o1, o2 in zip(g1.ops, g2.ops):
            where = f"operator {o1.scope or o1.id}"
            _same_except(o1, o2, "attrs", b1, b2, where)
            tmpl = _template(o1.attrs, o2.attrs, b1, b2, f"{where} attrs")
            if _linear_in(tmpl):
                self.attrs[o1.id] = tmpl

    def graph(self, batch: int) -> OpGraph:
        """The graph at ``batch`` (a new graph; unscaled attribute values are shared)."""
        _check_batch("batch", batch)
        g = self.base
        tensors = {}
        for name, t in g.tensors.items():
            tmpl = self.shapes.get(name)
            tensors[name] = replace(t, shape=_instantiate(tmpl, batch) if tmpl is not None
                                    else t.shape, consumers=list(t.consumers))
        ops = []
        for op in g.ops:
            tmpl = self.attrs.get(op.id)
            ops.append(replace(op, inputs=list(op.inputs), outputs=list(op.outputs),
                               attrs=_instantiate(tmpl, batch) if tmpl is not None
                               else op.attrs))
        return OpGraph(ops, tensors, list(g.inputs), list(g.outputs), g.name, list(g.warnings),
                       built_for=g.built_for)


def _check_batch(name: str, v) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise BatchScaleError(f"{name} must be a positive integer, got {v!r}")


def rescale_batch(g1: OpGraph, b1: int, g2: OpGraph, b2: int, batch: int) -> OpGraph:
    """The graph at ``batch`` from captures ``g1`` (batch ``b1``) and ``g2`` (batch ``b2``):
    ``BatchTemplate(g1, b1, g2, b2).graph(batch)``.

    Raises:
        BatchScaleError: as :class:`BatchTemplate`, or a non-positive ``batch``.
    """
    return BatchTemplate(g1, b1, g2, b2).graph(batch)


class BatchFamily:
    """Graphs of one network by batch size: the first two batch sizes asked for are captured
    (``capture(b)``), later ones derived with :func:`rescale_batch`, or captured when the
    anchors do not rescale. ``captures`` counts the calls of ``capture``."""

    def __init__(self, capture: Callable[[int], OpGraph]):
        self.capture = capture
        self.graphs: dict[int, OpGraph] = {}
        self.anchors: list[int] = []
        self.captures = 0
        self.rescale_error: str | None = None
        self.template: BatchTemplate | None = None

    def _capture(self, b: int) -> OpGraph:
        self.captures += 1
        g = self.capture(b)
        if len(self.anchors) < 2:
            self.anchors.append(b)
        return g

    def __call__(self, b: int) -> OpGraph:
        if b not in self.graphs:
            if len(self.anchors) == 2 and self.rescale_error is None:
                try:
                    if self.template is None:
                        b1, b2 = self.anchors
                        self.template = BatchTemplate(self.graphs[b1], b1, self.graphs[b2], b2)
                    self.graphs[b] = self.template.graph(b)
                    return self.graphs[b]
                except BatchScaleError as exc:
                    self.rescale_error = str(exc)
            self.graphs[b] = self._capture(b)
        return self.graphs[b]


__all__ = ["BatchFamily", "BatchScaleError", "BatchTemplate", "rescale_batch"]
