"""A redistribution across a Reshape, as MindSpore infers it: both layouts expanded onto one
tensor shape and one device matrix, then one redistribution between them.

``TensorRedistribution::InferTensorRedistributionOperatorList``
(``frontend/parallel/tensor_layout/tensor_redistribution.cc``) squeezes the size-1 dimensions,
refines the two device matrices to a common one (``RedistributionLayoutTransfer``, each layout
through ``TensorLayout::ExpandDeviceArrangement``), then runs
``ReshapeLayoutTransfer::UnifyDeviceArrangementAndTensorShape``
(``tensor_layout/reshape_layout_transfer.cc``): the from-layout's shape is expanded to the
common refinement of the two shapes (``TensorLayout::ExpandTensorShape``, which may split a
device axis), the to-layout follows the new device matrix (``ExpandDeviceArrangement``), then
the same from the to-side, until both shapes agree. When a step fails (``ExpandAble`` false)
MindSpore gathers the whole tensor instead (:func:`~smsg_ms.cost.layout.maps_through_reshape`,
D9); :func:`unify_through_reshape` then returns ``None``.

The two expansion rules (``tensor_layout/tensor_layout.cc``):

- *device matrix*: a device axis of size ``c`` refined into ``(c1, ..., cj)`` (major first)
  splits the tensor dimension ``s`` it cuts into ``(c1, ..., c(j-1), s / (c1···c(j-1)))``, one
  sub-axis each (``ExpandDeviceArrangement``'s examples: ``512`` cut by ``8 = (4, 2)`` becomes
  ``(4, 128)``);
- *tensor shape*: a dimension cut ``c``-way split into parts ``(q1, ..., qk)`` takes the cut
  from the major side (:func:`~smsg_ms.cost.layout.front_split`); a cut spread over several
  parts splits its device axis into those factors, major first.

Seen in the dry-run (docs/known-differences.md, D11): ``(16, 8)`` with device matrix ``(2, 4)``
cut ``(4, 2)`` (the 4-way cut on the minor axis) into ``128`` cut 8 unifies on ``(2, 2, 4, 8)``
over three 2-way device axes, every one of which moves: three 2-way AllGathers.
"""
from __future__ import annotations

from math import prod

from .layout import TensorLayout, front_split, refined_shape, split_at

#: one layout in MindSpore's form: (tensor shape, device matrix major first, per dimension the
#: position of its device axis from the left or None)
_Layout = tuple[tuple[int, ...], tuple[int, ...], tuple]


def _from_layout(shape, layout: TensorLayout) -> _Layout:
    n = len(layout.device_matrix)
    return (tuple(shape), tuple(layout.device_matrix),
            tuple(None if m == -1 else n - 1 - m for m in layout.tensor_map))


def _to_layout(lay: _Layout) -> TensorLayout:
    n = len(lay[1])
    return TensorLayout(lay[1], tuple(-1 if a is None else n - 1 - a for a in lay[2]))


def _squeeze(lay: _Layout) -> _Layout:
    keep = [i for i, s in enumerate(lay[0]) if s != 1]
    return (tuple(lay[0][i] for i in keep), lay[1], tuple(lay[2][i] for i in keep))


def _expand_devices(lay: _Layout, matrix: tuple[int, ...]) -> _Layout | None:
    """``ExpandDeviceArrangement``: ``lay`` on the finer device ``matrix``; ``None`` when
    ``matrix`` does not refine ``lay``'s or a cut dimension does not split."""
    shape, old, axes = lay
    bounds = [prod(old[:i + 1]) for i in range(len(old))]
    cum = [prod(matrix[:i + 1]) for i in range(len(matrix))]
    if prod(matrix) != prod(old) or not set(bounds) <= set(cum):
        return None
    spans, lo = [], 1
    for hi in bounds:
        spans.append([i for i, c in enumerate(cum) if lo < c <= hi] or [])
        lo = hi
    new_shape, new_axes = [], []
    for size, a in zip(shape, axes):
        if a is None or len(spans[a]) <= 1:
            new_shape.append(size)
            new_axes.append(None if a is None else (spans[a][0] if spans[a] else None))
            continue
        heads = [matrix[x] for x in spans[a][:-1]]
        if size % prod(heads):
            return None
        new_shape += heads + [size // prod(heads)]
        new_axes += spans[a]
    return tuple(new_shape), tuple(matrix), tuple(new_axes)


def _expand_shape(lay: _Layout, target: tuple[int, ...]) -> _Layout | None:
    """``ExpandTensorShape``: ``lay`` on the finer tensor shape ``target``, splitting a device
    axis whose cut spreads over several parts; ``None`` when a cut straddles the parts."""
    shape, matrix, axes = lay
    parts, k = [], 0
    for size in shape:
        mine, p = [], 1
        while p < size:
            if k >= len(target):
                return None
            mine.append(target[k])
            p *= target[k]
            k += 1
        if p != size:
            return None
        parts.append(mine)
    factors = {}          # device axis -> its factors, major first
    cuts_of = []
    for size, a, mine in zip(shape, axes, parts):
        cut = 1 if a is None else matrix[a]
        cuts = front_split(mine, cut) if cut > 1 else [1] * len(mine)
        if cuts is None:
            return None
        cuts_of.append(cuts)
        if a is not None:
            factors[a] = [c for c in cuts if c > 1]
    new_matrix, position = [], {}
    for i, size in enumerate(matrix):
        position[i] = len(new_matrix)
        new_matrix += factors.get(i) or [size]
    new_axes = []
    for a, cuts in zip(axes, cuts_of):
        j = 0
        for c in cuts:
            if c > 1:
                new_axes.append(position[a] + j)
                j += 1
            else:
                new_axes.append(None)
    return tuple(target), tuple(new_matrix), tuple(new_axes)


def expand_device_matrix(shape, layout: TensorLayout, matrix: tuple[int, ...]):
    """``layout`` of a tensor of ``shape`` (elements) on the finer device ``matrix``
    (``TensorLayout::ExpandDeviceArrangement``): ``(expanded shape, layout)``, or ``None`` when
    ``matrix`` does not refine ``layout``'s device matrix or a cut dimension does not split."""
    got = _expand_devices(_from_layout(shape, layout), tuple(matrix))
    return None if got is None else (got[0], _to_layout(got))


def unify_through_reshape(src_shape, src: TensorLayout, dst_shape, dst: TensorLayout):
    """The two layouts of a redistribution through a Reshape on MindSpore's common expanded
    shape: ``(shape, src', dst')`` (elements; ``src'``/``dst'`` on one device matrix), or
    ``None`` when MindSpore cannot expand them (it gathers the whole tensor, D9) or a size is
    symbolic.

    ``src_shape``/``dst_shape``: the Reshape's input and output shapes (equal element counts);
    ``src``: the producer's layout of the input, ``dst``: the consumer's of the output.
    """
    if any(not isinstance(s, int) for s in tuple(src_shape) + tuple(dst_shape)):
        return None
    a, b = _squeeze(_from_layout(src_shape, src)), _squeeze(_from_layout(dst_shape, dst))
    matrix = split_at({prod(a[1][:i + 1]) for i in range(len(a[1]))}
                      | {prod(b[1][:i + 1]) for i in range(len(b[1]))})
    if matrix is None:
        return None
    a, b = _expand_devices(a, tuple(matrix)), _expand_devices(b, tuple(matrix))
    for _ in range(4 * (len(src_shape) + len(dst_shape) + len(matrix)) + 4):
        if a is None or b is None:
            return None
        if a[0] == b[0]:
            return a[0], _to_layout(a), _to_layout(b)
        common = refined_shape(a[0], b[0])
        if common is None:
            return None
        a = _expand_shape(a, common)
        b = None if a is None else _expand_devices(b, a[1])
        if b is None:
            return None
        common = refined_shape(b[0], a[0])
        b = None if common is None else _expand_shape(b, common)
        a = None if b is None else _expand_devices(a, b[1])
    return None
