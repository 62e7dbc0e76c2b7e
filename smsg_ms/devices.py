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


def device_count_note(devices: int) -> str | None:
    """What a plan on ``devices`` assumes when the count is accepted but not a power of two
    (``None`` otherwise): the planner cuts tensors (and the pipeline into stages) by the
    divisors of the count, so a cut by an odd prime factor needs an axis that factor divides
    (24 devices: 3-way cuts, which MindSpore runs: ``mindspore-notes.md``); the nearest powers
    of two are named."""
    if not valid_device_count(devices) or devices & (devices - 1) == 0:
        return None
    odd, factors = devices >> ((devices & -devices).bit_length() - 1), []
    for p in range(3, odd + 1, 2):
        if odd % p == 0 and all(p % q for q in factors):
            factors.append(p)
    lower = 1 << (devices.bit_length() - 1)
    ways = " or ".join(f"{p}-way" for p in factors)
    return (f"{devices} devices is not a power of two (nearest: {lower}, {2 * lower}): planned "
            f"as MindSpore runs it, with cuts by the divisors of {devices}, so {ways} cuts only "
            f"on axes {' or '.join(map(str, factors))} divides")


__all__ = ["DeviceCountError", "check_device_count", "device_count_note",
           "nearest_device_counts", "valid_device_count"]
