"""The three numbers of the neutral step cost (:mod:`smsg_ms.compare.measures`), per preset.

They are read from :mod:`smsg_ms.cost.hardware` (datasheet presets, sources listed there), so smsg's
model and the neutral figure share one set of numbers: peak FLOP/s (``Machine.cube_flops``),
the node level's link bandwidth in bytes/s per direction and the latency of one collective in
seconds.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NeutralHardware:
    """Peak FLOP/s, link bandwidth in bytes/s (one direction) and per-collective latency in s."""

    name: str
    peak_flops: float
    bandwidth: float
    latency: float


def get_neutral_hardware(hardware="ascend910b") -> NeutralHardware:
    """The preset ``hardware``: a name of :data:`smsg_ms.cost.hardware.PRESETS`, a
    :class:`~smsg_ms.cost.hardware.Hardware`, or a :class:`NeutralHardware` passed through.

    Raises:
        ValueError: unknown preset name (the message lists the known ones).
    """
    if isinstance(hardware, NeutralHardware):
        return hardware
    from smsg_ms.cost.hardware import get_hardware

    hw = get_hardware(hardware)
    node = hw.levels[0]      # the neutral figure is flat: the node's links
    return NeutralHardware(hw.name, float(hw.cube_flops), float(node.bandwidth),
                           float(node.latency))
