"""Device counts MindSpore 2.10 accepts in every parallel mode (no heavy imports here)."""
from __future__ import annotations


def valid_device_count(devices: int) -> bool:
    """MindSpore 2.10 accepts 1, 2, 4 or a multiple of 8 devices (``mindspore-notes.md``; 6 and
    12 fail with "Parallel init failed" at the first compile, 24 works: checked in the dry-run)."""
    return devices in (1, 2, 4) or (devices > 0 and devices % 8 == 0)


def nearest_device_counts(devices: int) -> tuple[int, int]:
    """The accepted counts just below and just above ``devices`` (``devices`` >= 2)."""
    lower = max(c for c in range(1, devices) if valid_device_count(c))
    upper = min(c for c in range(devices + 1, devices + 9) if valid_device_count(c))
    return lower, upper
