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
from math import prod


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

    @property
    def cuts(self) -> tuple[int, ...]:
        """Number of slices along each tensor dimension (MindSpore's per-tensor strategy)."""
        return tuple(self.axis_size(m) for m in self.tensor_map)

    @property
    def shards(self) -> int:
        """Number of distinct slices (product of the cuts)."""
        return prod(self.cuts)

    @property
    def replicas(self) -> int:
        """Devices holding each slice: devices / shards."""
        return self.devices // self.shards

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

    def normalized(self) -> "TensorLayout":
        """The same placement with size-1 device-matrix axes removed (a canonical form).

        MindSpore keeps size-1 axes (MatMul ``((2, 1), (1, 4))`` has device matrix ``(2, 1, 4)``);
        they change no rank's slice, so two layouts place data alike iff their normal forms
        are equal.
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

    def same_placement(self, other: "TensorLayout") -> bool:
        """True when every rank holds the same slice under both layouts."""
        return self.normalized() == other.normalized()


def operator_layout(axes: list[int], tensor_axes: list[int | None], devices: int,
                    repeat_right: bool = True) -> TensorLayout:
    """Layout of one operator tensor as MindSpore derives it (``operator_info.cc``).

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
