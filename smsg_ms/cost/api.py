"""The cost model's public surface: what the search and the reports consume.

Units: computation in FLOPs, communication and memory in bytes, per device; time in seconds once a
:class:`~smsg_ms.cost.hardware.Machine` gives ``g`` and ``l`` per level. Expressions are sympy in
the shape symbols and cut counts; :meth:`OpCost.evaluate` gives numbers and the search only ever
sees numbers (compiled, cached), never sympy.

Collective volumes (per device, ring algorithms, ``S`` = bytes of the whole group's tensor,
``g`` = group size): AllReduce ``2(g−1)/g·S``; AllGather, ReduceScatter, AlltoAll ``(g−1)/g·S``
(Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .layout import TensorLayout

#: Strategy of one operator: one tuple of cut counts per tensor input (MindSpore's in_strategy).
Strategy = tuple[tuple[int, ...], ...]

#: Keys of :attr:`OpCost.memory`.
MEMORY_KINDS = ("parameter", "gradient", "optimizer", "activation")
COLLECTIVE_KINDS = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Send", "Receive",
                    "NeighborExchange", "NeighborExchangeV2")
PASSES = ("forward", "backward", "grad_sync")
#: Collectives sending ``(g−1)/g·S`` per device (ring; MindSpore's pipeline gathers of a
#: micro-step are AllGathers).
GATHER_LIKE = ("AllGather", "ReduceScatter", "AlltoAll", "MicroStepAllGather",
               "MiniStepAllGather")
#: Collectives sending the whole ``S`` per device.
WHOLE_TENSOR = ("Send", "Receive", "NeighborExchange", "NeighborExchangeV2", "Broadcast",
                "AlltoAllV")


def ring_volume(kind: str, group: int, full_bytes):
    """Bytes sent (= received) per device by one collective over ``group`` devices.

    ``full_bytes`` is ``S``: the size of the whole tensor the group reduces or gathers.
    ``group`` and ``full_bytes`` may be numpy arrays (vectorised callers; every group > 1).

    Raises:
        ValueError: ``kind`` is none of :data:`GATHER_LIKE`, :data:`WHOLE_TENSOR`, AllReduce.
    """
    if not isinstance(group, np.ndarray) and group <= 1:
        return 0
    if kind == "AllReduce":
        return 2 * (group - 1) * full_bytes / group
    if kind in GATHER_LIKE:
        return (group - 1) * full_bytes / group
    if kind in WHOLE_TENSOR:
        return full_bytes
    raise ValueError(f"unknown collective kind {kind!r}")


def collective_seconds(kind: str, fanout, full_bytes, links, synchronisations: int = 1):
    """Seconds of one collective on a machine in levels, the one formula every time estimate of
    the cost model uses (``CostModel.breakdown``, the pipeline's gradient synchronisation and
    sends, the vectorised redistribution in
    :func:`smsg_ms.cost.redistribution_fast.gather_seconds_matrix`).

    Args:
        kind: one of :data:`COLLECTIVE_KINDS` (or :data:`GATHER_LIKE`, :data:`WHOLE_TENSOR`).
        fanout: devices of the group per level, innermost first (``k_0`` devices per node,
            ``k_1`` nodes, ...: :meth:`smsg_ms.cost.hardware.Machine.fanout`); ints or numpy
            int arrays of one shape.
        full_bytes: ``S``, bytes of the group's whole tensor (number or array).
        links: ``(bandwidth bytes/s per device and direction, latency s)`` per level.
        synchronisations: ``2`` for a ReduceScatter + AllGather pair timed as one AllReduce.

    The hierarchical algorithm of NCCL and HCCL across levels (NCCL: rings/trees inside the node
    then across nodes, one channel per NIC, Jeaugey, "Massively scale your deep learning
    training with NCCL 2.4", NVIDIA 2019; HCCL: in-server Mesh/Ring then inter-server Ring/NHR,
    CANN "HCCL collective communication algorithms"; the two-level AllReduce of Horovod,
    Sergeev & Del Balso 2018, and its analysis in Cho et al., "BlueConnect", SysML 2019):

    * AllReduce: ReduceScatter up the levels, AllReduce on the outermost level used, AllGather
      down: level ``i`` moves ``2(k_i − 1)/k_i · S / K_i`` per device (``K_i = k_0 ⋯ k_{i−1}``:
      each inner step leaves ``1/k`` of the data), with two synchronisations on every level
      below the outermost used and ``synchronisations`` on that one;
    * AllGather, ReduceScatter: the same pieces once, ``(k_i − 1)/k_i · S / K_i`` and
      ``synchronisations`` per level used (AllGather: across the nodes on ``S/k_0`` first, then
      inside the node on ``S``; ReduceScatter mirrored);
    * AlltoAll: every device sends ``S/g`` to each peer at once (NCCL: grouped send/receive to
      all peers); the peers first met at level ``i`` number ``(k_i − 1)·K_i``; the links work in
      parallel, so the slowest level's bytes / bandwidth, plus its latency;
    * Send, Receive, Broadcast, NeighborExchange: ``S`` over the outermost level used.

    On one level these are Thakur et al.'s ring figures (:func:`ring_volume` / bandwidth +
    latency): a group of one costs 0 s. Every level is added in order, unused ones as
    ``+ 0.0``, so the scalar and the array forms agree bit for bit.

    Raises:
        ValueError: unknown ``kind``; ``fanout`` and ``links`` of different lengths.
    """
    if len(fanout) != len(links):
        raise ValueError(f"fanout {tuple(fanout)} and {len(links)} levels differ in length")
    vec = any(isinstance(k, np.ndarray) for k in fanout)
    used = [(k > 1) if vec else int(k > 1) for k in fanout]
    top = _outermost(used, vec)
    total = 0.0
    if kind == "AllReduce" or kind in GATHER_LIKE and kind != "AlltoAll":
        factor = 2 if kind == "AllReduce" else 1
        inner = 1
        for i, (k, (bw, lat)) in enumerate(zip(fanout, links)):
            sync = (np.where(top == i, synchronisations, 2) if vec
                    else (synchronisations if top == i else 2)) if factor == 2 \
                else synchronisations
            total = total + factor * (k - 1) * full_bytes / (k * inner) / bw \
                + used[i] * sync * lat
            inner = inner * k
        return total if vec else float(total)
    if kind == "AlltoAll":
        group, inner, worst = _product(fanout), 1, 0.0
        for i, (k, (bw, _)) in enumerate(zip(fanout, links)):
            t = (k - 1) * inner * full_bytes / group / bw
            worst = np.maximum(worst, t) if vec else max(worst, t)
            inner = inner * k
        return worst + _pick(top, [lat for _, lat in links], vec)
    if kind in WHOLE_TENSOR:
        bw = _pick(top, [b for b, _ in links], vec, default=1.0)
        any_used = (top >= 0) if vec else int(top >= 0)
        out = any_used * (full_bytes / bw + synchronisations
                          * _pick(top, [lat for _, lat in links], vec))
        return out if vec else float(out)
    raise ValueError(f"unknown collective kind {kind!r}")


def _product(values):
    out = 1
    for v in values:
        out = out * v
    return out


def _outermost(used, vec):
    """Index of the outermost level with a fan-out above 1 (``-1``: none)."""
    top = np.full(np.broadcast(*used).shape, -1) if vec else -1
    for i, u in enumerate(used):
        top = np.where(u, i, top) if vec else (i if u else top)
    return top


def _pick(top, values, vec, default=0.0):
    """``values[top]`` (``default`` where ``top`` is ``-1``)."""
    if not vec:
        return values[top] if top >= 0 else default
    out = np.full(top.shape, default, dtype=float)
    for i, v in enumerate(values):
        out = np.where(top == i, v, out)
    return out


@dataclass(frozen=True)
class Collective:
    """One collective an operator (or a redistribution) makes MindSpore insert.

    Attributes:
        kind: one of :data:`COLLECTIVE_KINDS`.
        group: devices in the communication group.
        full_bytes: ``S``, bytes of the group's whole tensor (sympy expression or number).
        phase: ``forward``, ``backward`` or ``grad_sync``.
        tensor: name of the tensor it moves (input, output or parameter), for explanations.
        reason: short human reason ("reduction dim cut 4-way", "gradient of replicated weight").
        span: the group's ranks as ``((size, stride), ...)`` over the stage's device matrix
            (:meth:`smsg_ms.cost.hardware.Machine.fanout`); ``()``: ranks ``0 .. group − 1``.
    """

    kind: str
    group: int
    full_bytes: Any
    phase: str
    tensor: str = ""
    reason: str = ""
    span: tuple = ()

    @property
    def volume(self):
        """Per-device bytes sent, :func:`ring_volume`."""
        return ring_volume(self.kind, self.group, self.full_bytes)


@dataclass
class OpCost:
    """Per-device cost of one operator under one strategy (a micro-step of the BSP model).

    Attributes:
        strategy: the in_strategy written back with ``Primitive.shard``.
        in_layouts: the layout the operator needs on each tensor input (same order as
            ``OpNode.inputs``); a producer with another layout pays a redistribution.
        out_layouts: layout of each output.
        flops_fwd, flops_bwd: FLOPs per device, forward and backward (replicas counted: a device
            holding a replica computes it).
        collectives: forward, backward and gradient-synchronisation collectives.
        memory: bytes per device by kind: ``parameter``, ``gradient``, ``optimizer``,
            ``activation`` (stored for the backward pass).
        notes: why this strategy is (in)valid or special, for ``explain``.
        unit: compute unit (``cube`` or ``vector``, :mod:`smsg_ms.cost.kernels`).
        bytes_fwd, bytes_bwd: bytes per device read and written from HBM, forward and backward.
        launches_fwd, launches_bwd: operator launches per device, forward and backward.
        quantization_fwd, quantization_bwd: matrix-unit time over FLOPs at peak of a matrix
            product's kernels (:func:`smsg_ms.cost.kernels.wave_quantization`; 1 otherwise).
        out_strategy: the out_strategy written back with ``Primitive.shard`` beside
            ``strategy`` (a MatMul reduce-scattering its partial sums, sequence parallel), or
            ``None``.
    """

    strategy: Strategy
    in_layouts: list[TensorLayout]
    out_layouts: list[TensorLayout]
    flops_fwd: Any = 0
    flops_bwd: Any = 0
    collectives: list[Collective] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unit: str = "vector"
    bytes_fwd: float = 0.0
    bytes_bwd: float = 0.0
    launches_fwd: int = 0
    launches_bwd: int = 0
    quantization_fwd: float = 1.0
    quantization_bwd: float = 1.0
    out_strategy: Strategy | None = None


class StrategyError(ValueError):
    """A strategy MindSpore would reject: names operator, input and dimension."""
