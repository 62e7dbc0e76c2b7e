"""Device counts MindSpore 2.10 accepts in every parallel mode: the one rule, checked by
:func:`check_device_count` everywhere (planner, plan files, training context, CLI, compare).
No heavy imports here: the CLI checks ``--devices`` before MindSpore is loaded."""
from __future__ import annotations

from .errors import InputError


class DeviceCountError(InputError):
    """A device count MindSpore 2.10 refuses (or not a positive integer); one-line message."""


def valid_device_count(devices: int) -> bool:
    """MindSpore 2.10 accepts 1, 2, 4 or a multiple of 8 devices (``mindspore-notes.md``; 6 and
    12 fail with "Parallel init failed" at the first compile, 24 works: checked in the dry-run)."""
    return devices in (1, 2, 4) or (devices > 0 and devices % 8 == 0)


def nearest_device_counts(devices: int) -> tuple[int, int]:
    """The accepted counts just below and just above ``devices`` (``devices`` >= 2)."""
    lower = max(c for c in range(1, devices) if valid_device_count(c))
    upper = min(c for c in range(devices + 1, devices + 9) if valid_device_count(c))
    return lower, upper


def check_device_count(devices: int) -> None:
    """Raise :class:`DeviceCountError` unless MindSpore 2.10 accepts ``devices``
    (:func:`valid_device_count`); the message names the nearest counts that work.

    Raises:
        DeviceCountError: not an integer (``bool`` included), below 1, or refused by MindSpore.
    """
    if not isinstance(devices, int) or isinstance(devices, bool):
        raise DeviceCountError(f"device count must be an integer, got {devices!r}")
    if devices < 1:
        raise DeviceCountError(f"device count must be at least 1, got {devices}")
    if valid_device_count(devices):
        return
    lower, upper = nearest_device_counts(devices)
    raise DeviceCountError(f"MindSpore 2.10 does not accept {devices} devices (only 1, 2, 4 or "
                           f"a multiple of 8): use {lower} or {upper}")


__all__ = ["DeviceCountError", "check_device_count", "nearest_device_counts",
           "valid_device_count"]
