"""English in messages: a count with its noun in the singular for one (``1 stage``, ``2
stages``). No imports: every layer may use it."""
from __future__ import annotations


def count(n, noun: str, plural: str | None = None) -> str:
    """``1 device``, ``2 devices``: ``n`` and ``noun``, or ``plural`` (default ``noun + "s"``)
    unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"
