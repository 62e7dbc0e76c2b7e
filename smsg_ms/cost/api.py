"""The cost model's public surface: what the search and the reports consume.

Units: computation in FLOPs, communication and memory in bytes, per device; time in seconds once a
:class:`~smsg_ms.cost.hardware.Hardware` preset gives ``g`` and ``l``. Expressions are sympy in
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


def collective_seconds(kind: str, group: int, full_bytes, bandwidth: float, latency: float,
                       synchronisations: int = 1) -> float:
    """Seconds of one collective under the BSP / α-β model: ``volume / bandwidth + latency``.

    ``volume`` is :func:`ring_volume` (bytes each device sends, ``full_bytes`` = ``S`` the
    group's whole tensor), ``bandwidth`` bytes/s per device and direction, ``latency`` seconds
    per synchronisation, counted ``synchronisations`` times (a ReduceScatter + AllGather pair
    moves an AllReduce's volume with two); a group of one sends nothing and costs 0 s.
    ``group`` and ``full_bytes`` may be numpy arrays (then every group must be > 1). The
    one formula every time estimate of the cost model uses (``CostModel.breakdown``, the
    pipeline's gradient synchronisation, the vectorised redistribution in
    :func:`smsg_ms.cost.redistribution.gather_seconds_matrix`).
    """
    if isinstance(group, np.ndarray):  # vectorised: every group > 1, seconds per element
        return ring_volume(kind, group, full_bytes) / bandwidth + synchronisations * latency
    if group <= 1:
        return 0.0
    return float(ring_volume(kind, group, full_bytes)) / bandwidth + synchronisations * latency


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
    """

    kind: str
    group: int
    full_bytes: Any
    phase: str
    tensor: str = ""
    reason: str = ""

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
    """

    strategy: Strategy
    in_layouts: list[TensorLayout]
    out_layouts: list[TensorLayout]
    flops_fwd: Any = 0
    flops_bwd: Any = 0
    collectives: list[Collective] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class StrategyError(ValueError):
    """A strategy MindSpore would reject: names operator, input and dimension."""
