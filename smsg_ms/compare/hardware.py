"""Three numbers per hardware preset for the neutral step cost (:mod:`smsg_ms.compare.measures`).

``smsg_ms.cost.hardware`` was not on main when this module was written; where it exists and its
preset carries ``peak_flops``, ``bandwidth`` and ``latency``, those are used, so smsg's model and the
neutral figure share one set of numbers. Otherwise the table below (per device, half precision):

============  =================  ==========================  =========
preset        peak (FLOP/s)      bandwidth (bytes/s, 1 dir)  latency
============  =================  ==========================  =========
ascend910b    313e12             196e9                       10 µs
a100          312e12             300e9                       5 µs
h100          989e12             450e9                       5 µs
============  =================  ==========================  =========

Sources: NVIDIA A100 Tensor Core GPU datasheet (312 TFLOPS FP16 dense; NVLink 600 GB/s total, i.e.
300 GB/s each way); NVIDIA H100 datasheet, SXM5 (989 TFLOPS FP16 dense, 1979 with sparsity; NVLink
900 GB/s total); Ascend 910B: Huawei's published 313 TFLOPS FP16 and HCCS 392 GB/s total per chip.
The latencies are assumptions (order of a small-message ring step), not datasheet figures.
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


PRESETS = {
    "ascend910b": NeutralHardware("ascend910b", 313e12, 196e9, 10e-6),
    "a100": NeutralHardware("a100", 312e12, 300e9, 5e-6),
    "h100": NeutralHardware("h100", 989e12, 450e9, 5e-6),
}


def get_neutral_hardware(hardware="ascend910b") -> NeutralHardware:
    """The preset ``hardware`` (name or object with the three attributes).

    Raises:
        ValueError: unknown preset name (the message lists the known ones).
    """
    if isinstance(hardware, NeutralHardware):
        return hardware
    if not isinstance(hardware, str):
        return NeutralHardware(str(getattr(hardware, "name", "custom")),
                               float(hardware.peak_flops), float(hardware.bandwidth),
                               float(hardware.latency))
    try:
        from smsg_ms.cost.hardware import get_hardware
        hw = get_hardware(hardware)
        return NeutralHardware(hardware, float(hw.peak_flops), float(hw.bandwidth),
                               float(hw.latency))
    except (ImportError, AttributeError, KeyError, ValueError, TypeError):
        pass
    if hardware not in PRESETS:
        raise ValueError(f"unknown hardware preset '{hardware}' (known: "
                         f"{', '.join(sorted(PRESETS))})")
    return PRESETS[hardware]
