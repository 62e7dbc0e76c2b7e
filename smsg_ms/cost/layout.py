"""Tensor layouts with MindSpore's semantics (``frontend/parallel/tensor_layout/tensor_layout.cc``).

A layout is a *device matrix* (a factorisation of the stage's device count, e.g. ``(2, 4)``) and a
*tensor map*: for each tensor dimension, the index of the device-matrix axis that cuts it, counted
from the right (``0`` = last axis), or ``-1`` when the dimension is not cut. Device-matrix axes that
no tensor dimension uses hold *replicas*. Example (``shared/docs/mindspore-notes.md``): MatMul with
strategy ``((a, k), (k, n))`` has device matrix ``(a, k, n)``; ``x`` has tensor map ``(2, 1)``, ``w``
``(1, 0)``, the output ``(2, 0)`` (partial sums over axis 1 until the AllReduce).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from math import prod

#: Entries kept by each layout memo (normal forms, operator layouts), least recent out first.
MEMO_SIZE = 1 << 17


@dataclass(frozen=True, order=True)
class TensorLayout:
    """Device matrix + tensor map of one tensor.

    Attributes:
        device_matrix: axis sizes, product = number of devices of the stage.
        tensor_map: per tensor dimension, the device-matrix axis index counted from the right,
            or -1 (not cut).
    """

    device_matrix: tuple[int, ...]
    tensor_map: tuple[int, ...]

    def __post_init__(self):
        n = len(self.device_matrix)
        used = [m for m in self.tensor_map if m != -1]
        if any(not -1 <= m < n for m in self.tensor_map) or len(used) != len(set(used)):
            raise ValueError(f"invalid tensor map {self.tensor_map} for device matrix "
                             f"{self.device_matrix}")

    @property
    def devices(self) -> int:
        return prod(self.device_matrix)

    def axis_size(self, map_index: int) -> int:
        """Size of the device-matrix axis that tensor-map value ``map_index`` names."""
        return 1 if map_index == -1 else self.device_matrix[len(self.device_matrix) - 1 - map_index]

    @cached_property
    def cuts(self) -> tuple[int, ...]:
        """Number of slices along each tensor dimension (MindSpore's per-tensor strategy);
        computed once per layout (fields frozen; not a field: equality and hash ignore it)."""
        return tuple(self.axis_size(m) for m in self.tensor_map)

    @cached_property
    def shards(self) -> int:
        """Number of distinct slices (product of the cuts); computed once per layout."""
        return prod(self.cuts)

    @property
    def replicas(self) -> int:
        """Devices holding each slice: devices / shards."""
        return self.devices // self.shards

    def replica_span(self) -> tuple[tuple[int, int], ...]:
        """Ranks holding the same slice as rank 0, as ``((size, stride), ...)`` over the device
        matrix (rank = row-major index): the axes no tensor dimension uses
        (``DeviceMatrix::GetDevicesAlongDim``, ``frontend/parallel/device_matrix.cc``)."""
        n = len(self.device_matrix)
        used = {n - 1 - m for m in self.tensor_map if m != -1}
        out, stride = [], 1
        for i in reversed(range(n)):
            size = self.device_matrix[i]
            if size > 1 and i not in used:
                out.append((size, stride))
            stride *= size
        return tuple(reversed(out))

    def slice_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Per-device shape of a tensor of global ``shape``.

        Raises:
            ValueError: a cut does not divide its dimension.
        """
        if len(shape) != len(self.tensor_map):
            raise ValueError(f"shape {shape} has rank {len(shape)}, layout has rank "
                             f"{len(self.tensor_map)}")
        out = []
        for dim, (size, cut) in enumerate(zip(shape, self.cuts)):
            if isinstance(size, int) and size % cut:
                raise ValueError(f"dimension {dim} of size {size} does not divide by cut {cut}")
            out.append(size // cut if isinstance(size, int) else size)
        return tuple(out)

    @classmethod
    def replicated(cls, rank: int, devices: int) -> "TensorLayout":
        """Every device holds the whole tensor."""
        return cls((devices,), (-1,) * rank)

    @classmethod
    def from_cuts(cls, cuts: tuple[int, ...], devices: int) -> "TensorLayout":
        """Layout with one device-matrix axis per cut dimension, replicas on a leading axis.

        Replicas on the left is what MindSpore's ``_VirtualDataset`` does
        (``repeated_num_in_dev_matrix_right_ = false``); ordinary operators put them on the right,
        see :func:`operator_layout`.

        Raises:
            ValueError: the product of the cuts does not divide ``devices``.
        """
        shards = prod(cuts)
        if devices % shards:
            raise ValueError(f"cuts {cuts} (product {shards}) do not divide {devices} devices")
        axes = [c for c in cuts if c > 1]
        rep = devices // shards
        matrix = ([rep] if rep > 1 else []) + axes
        if not matrix:
            matrix = [1]
        n = len(matrix)
        tmap, k = [], 1 if rep > 1 else 0
        for c in cuts:
            if c > 1:
                tmap.append(n - 1 - k)
                k += 1
            else:
                tmap.append(-1)
        return cls(tuple(matrix), tuple(tmap))

    @lru_cache(maxsize=MEMO_SIZE)
    def normalized(self) -> "TensorLayout":
        """The same placement with size-1 device-matrix axes removed (a canonical form).

        MindSpore keeps size-1 axes (MatMul ``((2, 1), (1, 4))`` has device matrix ``(2, 1, 4)``);
        they change no rank's slice, so two layouts place data alike iff their normal forms
        are equal. Memoised (a pure function of the two fields).
        """
        keep = [i for i, s in enumerate(self.device_matrix) if s > 1]
        if len(keep) == len(self.device_matrix):  # already normal
            return self
        if not keep:
            return TensorLayout((self.devices,) if self.devices > 1 else (1,),
                                (-1,) * len(self.tensor_map))
        n = len(self.device_matrix)
        new_index = {}
        for pos, i in enumerate(keep):
            new_index[n - 1 - i] = len(keep) - 1 - pos
        tmap = tuple(new_index.get(m, -1) if m != -1 else -1 for m in self.tensor_map)
        return TensorLayout(tuple(self.device_matrix[i] for i in keep), tmap)

    def dim_groups(self) -> tuple[tuple[int, int] | None, ...]:
        """Per tensor dimension, the device-matrix axis cutting it as ``(size, stride)``
        (stride: product of the axes to its right; rank = row-major index), ``None`` when it
        is not cut (no axis, or an axis of size 1). MindSpore's test of two layouts of one
        parameter (``IsSameTensorLayout``, ``frontend/parallel/step_parallel_utils.cc``, behind
        "has multiple users, but the TensorInfo are different"): per dimension, the ranks along
        the cutting axis (``DeviceMatrix::GetDevicesAlongDim``) must be equal; those ranks are
        ``{r + k·stride}`` over the axis, so equal for every rank exactly when ``(size,
        stride)`` are. Equal cuts over other axes (a replica axis on the other side) differ."""
        n = len(self.device_matrix)
        out = []
        for m in self.tensor_map:
            if m == -1 or self.axis_size(m) == 1:
                out.append(None)
                continue
            k = n - 1 - m
            out.append((self.device_matrix[k], prod(self.device_matrix[k + 1:])))
        return tuple(out)

    def same_placement(self, other: "TensorLayout") -> bool:
        """True when every rank holds the same slice under both layouts."""
        return self.normalized() == other.normalized()


def operator_layout(axes: list[int], tensor_axes: list[int | None], devices: int,
                    repeat_right: bool = True) -> TensorLayout:
    """Layout of one operator tensor as MindSpore derives it (``operator_info.cc``); memoised
    (a pure function of its arguments: equal arguments give one shared, immutable layout).

    Args:
        axes: the operator's device matrix before repeated calculation (one cut per axis).
        tensor_axes: for each tensor dimension, the index (from the left) into ``axes`` of the
            axis cutting it, or ``None``.
        devices: devices of the stage; when ``prod(axes) < devices`` the repeated-calculation
            axis ``devices / prod(axes)`` is appended on the right (MindSpore's default,
            ``repeated_num_in_dev_matrix_right_ = true``) or prepended on the left.

    Raises:
        ValueError: ``prod(axes)`` does not divide ``devices``.
    """
    return _operator_layout(tuple(axes), tuple(tensor_axes), devices, repeat_right)


@lru_cache(maxsize=MEMO_SIZE)
def _operator_layout(axes: tuple[int, ...], tensor_axes: tuple, devices: int,
                     repeat_right: bool) -> TensorLayout:
    shards = prod(axes)
    if shards == 0 or devices % shards:
        raise ValueError(f"device matrix {tuple(axes)} (product {shards}) does not divide "
                         f"{devices} devices")
    rep = devices // shards
    matrix = list(axes)
    if rep > 1:
        matrix = matrix + [rep] if repeat_right else [rep] + matrix
    if not matrix:
        matrix = [1]
    n = len(matrix)
    offset = 1 if rep > 1 and not repeat_right else 0
    tmap = tuple(-1 if a is None else n - 1 - (a + offset) for a in tensor_axes)
    return TensorLayout(tuple(matrix), tmap)


def refined_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The coarsest shape both ``a`` and ``b`` (equal element counts) split into: the union of
    their prefix products (MindSpore's ``ExpandShape``, ``tensor_layout/shape_util.cc``);
    ``None`` when one prefix product does not divide the next (``(6, 4)`` and ``(4, 6)``)."""
    sizes = split_at(set(_prefix_products(a)) | set(_prefix_products(b)))
    return None if sizes is None else tuple(sizes)


def split_at(bounds) -> list[int] | None:
    """Axis sizes whose prefix products are the sorted ``bounds`` (ints): ``{2, 8, 24}`` →
    ``[2, 4, 3]``; ``None`` when one bound does not divide the next. The common refinement of
    two shapes (or device matrices) from the union of their prefix products."""
    out, prev = [], 1
    for p in sorted(bounds):
        if p % prev:
            return None
        out.append(p // prev)
        prev = p
    return out


def _prefix_products(shape) -> list[int]:
    out, p = [], 1
    for s in shape:
        if s != 1:
            p *= s
            out.append(p)
    return out


def maps_through_reshape(layout: TensorLayout, shape: tuple, other: tuple) -> bool:
    """Whether MindSpore can carry ``layout`` of a tensor of ``shape`` (elements) through a
    Reshape to ``other`` without gathering it: ``TensorRedistribution::
    InferTensorRedistributionOperatorList`` expands both layouts onto the common refinement of
    the two shapes (``ReshapeLayoutTransfer::UnifyDeviceArrangementAndTensorShape``); when that
    fails (``ExpandAble`` false) it gathers the whole tensor, reshapes and slices
    (``InferTensorRedistributionOperatorListUnExpand``).

    Rule (``TensorLayout::ExpandTensorShape`` via ``Arrangement::GetFrontElementByValue``): a
    dimension split into refined parts ``q1, q2, ...`` (major first) and cut ``c``-way maps onto
    them when ``c = q1·...·q(j-1)·r`` with ``r`` dividing ``q_j``: the cut fills whole parts
    from the major side, then divides the next one; i.e. each chunk is a whole number of the
    parts after ``q_j``. BERT's hidden 768 = 12 heads × 64 cut 8: chunks of 96 = 1.5 heads,
    ``8`` does not divide 12: not mapped. Symbolic sizes: ``True`` (not checked).
    Not modelled: the device-matrix refinement of the other side can split a dimension further
    (``ExpandDeviceArrangement``); the check is per layout.
    """
    if any(not isinstance(s, int) for s in tuple(shape) + tuple(other)):
        return True
    parts = refined_shape(tuple(shape), tuple(other))
    if parts is None:
        return all(c == 1 for c in layout.cuts)
    k = 0
    for size, cut in zip(shape, layout.cuts):
        if size == 1:
            continue
        mine, p = [], 1
        while p < size:
            mine.append(parts[k])
            p *= parts[k]
            k += 1
        if cut > 1 and front_split(mine, cut) is None:
            return False
    return True


def front_split(parts: list[int], cut: int) -> list[int] | None:
    """Cut counts of ``parts`` (sizes of consecutive dimensions, major first) that cut their
    flattened product ``cut``-way into contiguous chunks: whole parts from the major side, then
    a divisor of the next (``Arrangement::GetFrontElementByValue``): ``([4, 8], 8) → [4, 2]``;
    ``None`` when the chunks straddle (``([12, 64], 8)``)."""
    out, filled = [], 1
    for q in parts:
        if filled == cut:
            out.append(1)
        elif filled * q <= cut:
            out.append(q)
            filled *= q
        elif cut % filled == 0 and q % (cut // filled) == 0:
            out.append(cut // filled)
            filled = cut
        else:
            return None
    return out if filled == cut else None
