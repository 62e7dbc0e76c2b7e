"""Numbers with units, and line folding that never splits a token, for the text reports.

Seconds get a unit per value (s, ms, µs, ns; 4 significant digits). Bytes get one binary unit
(B, KiB, MiB, GiB) shared by every value of a table, chosen by its largest value. Lines are folded
at spaces only, never between a number and its unit; formulas are folded after an operator.
"""
from __future__ import annotations

import math
import re
import textwrap

#: Binary byte units, largest first: (name, bytes).
BYTE_UNITS = (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10), ("B", 1))
#: Time units, largest first: (name, seconds).
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
#: Units a number is glued to when a line is folded.
UNIT_WORDS = ("GiB", "MiB", "KiB", "B", "s", "ms", "µs", "ns", "FLOPs", "devices")

GLUE = "\u00a0"   # a no-break space: textwrap does not fold at it
_NUMBER_UNIT = re.compile(r"(\d) (?=(?:" + "|".join(map(re.escape, UNIT_WORDS)) + r")\b)")


def significant(value: float, digits: int = 4, max_decimals: int = 4) -> str:
    """``value`` with ``digits`` significant digits (at most ``max_decimals`` decimals, no
    exponent): 2.7771 → ``2.777``, 595.24 → ``595.2``, 0.18519 → ``0.1852``."""
    if value == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{min(max(decimals, 0), max_decimals)}f}"


def fmt_seconds(value) -> str:
    """Seconds in the unit that puts the value in [1, 1000): ``2.777 ms``, ``41.94 µs``;
    ``0 s`` for zero and for anything under a picosecond (the rounding noise of sums of
    seconds: a runner-up that ties its choice printed ``+0.0000 ns``), ``-`` for ``None``."""
    if value is None:
        return "-"
    value = float(value)
    if abs(value) < 1e-12:
        return "0 s"
    for name, scale in TIME_UNITS:
        if abs(value) >= scale or name == "ns":
            return f"{significant(value / scale)} {name}"
    raise AssertionError("unreachable")


def byte_unit(values) -> tuple[str, int]:
    """The ``(name, bytes)`` unit for a table holding ``values`` (bytes): the largest unit not
    above the largest value, so no value is shown above 1024 of its unit."""
    largest = max((abs(float(v)) for v in values if v is not None), default=0.0)
    return next(((n, s) for n, s in BYTE_UNITS if largest >= s), BYTE_UNITS[-1])


def fmt_bytes(value, unit: tuple[str, int] | None = None) -> str:
    """Bytes in ``unit`` (default: the value's own, see :func:`byte_unit`): ``189.6 MiB``,
    ``0.1852 GiB``; ``0`` for zero, ``-`` for ``None``."""
    if value is None:
        return "-"
    value = float(value)
    if value == 0:
        return "0"
    name, scale = unit or byte_unit([value])
    return f"{significant(value / scale, max_decimals=6)} {name}"


def glue(text: str) -> str:
    """``text`` whose spaces :func:`wrap` never folds at (one item of a list)."""
    return text.replace(" ", GLUE)


def wrap(text: str, width: int, indent: str = "", hanging: str | None = None) -> list[str]:
    """``text`` folded at spaces into lines of at most ``width`` characters (a word longer
    than the line stays whole), first line prefixed by ``indent``, the others by ``hanging``
    (default: ``indent``). A number and the unit after it stay on one line, as do the parts of
    a :func:`glue`-d item."""
    text = _NUMBER_UNIT.sub(r"\1" + GLUE, text)
    lines = textwrap.wrap(text, width=max(width, 1), initial_indent=indent,
                          subsequent_indent=indent if hanging is None else hanging,
                          break_long_words=False, break_on_hyphens=False) or [indent]
    return [line.replace(GLUE, " ") for line in lines]


_BREAK_AFTER = re.compile(r"(?<=[*/])(?<!\*\*)(?!\*)|(?<=[+-] )")


def fold_formula(formula: str, width: int) -> list[str]:
    """A formula (sympy's ``str``) in lines of at most ``width`` characters, each but the last
    ending in an operator (``*``, ``/``, ``+``, ``-``), preferring operators outside
    parentheses; a symbol, number or ``**`` is never split. A piece without an operator longer
    than ``width`` gets a line of its own."""
    pieces = [p for p in _BREAK_AFTER.split(formula) if p]
    lines: list[str] = []
    start = 0
    while start < len(pieces):
        depth, best, best_top = 0, start, None
        for end in range(start, len(pieces)):
            if end > start and len("".join(pieces[start:end + 1]).strip()) > width:
                break
            depth += pieces[end].count("(") - pieces[end].count(")")
            best = end
            if depth == 0:
                best_top = end
        end = best if best == len(pieces) - 1 or best_top is None else best_top
        lines.append("".join(pieces[start:end + 1]).strip())
        start = end + 1
    return lines or [""]
