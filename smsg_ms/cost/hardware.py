"""Hardware presets: the two numbers of the BSP model, ``g`` and ``l``, come from datasheets.

``g = flops / bandwidth`` (FLOPs one device could do while one byte crosses the link) and
``l = latency · flops`` (FLOPs lost per collective synchronisation). No profiling.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """One accelerator model.

    Attributes:
        name: preset name.
        flops: peak dense FLOP/s per device at the training dtype (fp16/bf16).
        bandwidth: bytes/s per device and direction of the collective link (ring bus bandwidth).
        latency: seconds per collective synchronisation (start-up cost of one collective).
        memory: bytes of device memory.
    """

    name: str
    flops: float
    bandwidth: float
    latency: float
    memory: float

    def __post_init__(self):
        for field in ("flops", "bandwidth", "latency", "memory"):
            if not getattr(self, field) > 0:
                raise ValueError(f"hardware {self.name!r}: {field} must be positive")

    @property
    def g(self) -> float:
        """FLOPs per byte communicated: ``flops / bandwidth``."""
        return self.flops / self.bandwidth

    @property
    def l(self) -> float:  # noqa: E743 (the BSP model's name)
        """FLOPs per synchronisation: ``latency · flops``."""
        return self.latency * self.flops


#: Datasheet presets. Sources:
#: - ``ascend910b``: Huawei Atlas 800T A2 / Ascend 910B datasheet: 313 TFLOPS FP16 dense,
#:   64 GB HBM2e, HCCS full mesh of 7 links x 56 GB/s (392 GB/s) between the 8 NPUs of a node;
#:   half of it taken as one direction of the ring. Latency: order of HCCL start-up, ~10 us.
#: - ``a100``: NVIDIA A100 SXM4 80 GB datasheet: 312 TFLOPS BF16 dense, NVLink 3 600 GB/s
#:   (bidirectional) -> 300 GB/s per direction. Latency ~8 us (NCCL ring start-up).
#: - ``h100``: NVIDIA H100 SXM5 datasheet: 989 TFLOPS BF16 dense, 80 GB HBM3, NVLink 4 900 GB/s
#:   (bidirectional) -> 450 GB/s per direction. Latency ~6 us.
PRESETS: dict[str, Hardware] = {
    "ascend910b": Hardware("ascend910b", flops=313e12, bandwidth=196e9, latency=10e-6,
                           memory=64 * 2**30),
    "a100": Hardware("a100", flops=312e12, bandwidth=300e9, latency=8e-6, memory=80 * 2**30),
    "h100": Hardware("h100", flops=989e12, bandwidth=450e9, latency=6e-6, memory=80 * 2**30),
}


def get_hardware(name_or_hw) -> Hardware:
    """A preset by name, or a :class:`Hardware` passed through.

    Raises:
        ValueError: unknown preset name (the message lists the presets).
    """
    if isinstance(name_or_hw, Hardware):
        return name_or_hw
    try:
        return PRESETS[str(name_or_hw).lower()]
    except KeyError:
        raise ValueError(f"unknown hardware {name_or_hw!r}; presets: "
                         f"{', '.join(sorted(PRESETS))}") from None
