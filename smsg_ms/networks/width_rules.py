"""The width rules of the built-in networks, checked before any capture.

A built-in transformer cuts its model width into heads and shares each key/value head among a
group of query heads, so ``heads`` must divide ``hidden`` and ``kv_heads`` must divide ``heads``
(``head_dim = hidden / heads``, ``group = heads / kv_heads``: the builders' own checks, e.g.
:func:`smsg_ms.networks.llama.build`); a mixture of experts routes each token to ``top_k`` of
``experts`` experts, so ``top_k <= experts`` (:func:`smsg_ms.networks.moe.build`). The builders
raise the same errors, but only inside the capture (seconds later, wrapped as a build failure);
here a bad combination is one line naming the flags and a value that works.
"""
from __future__ import annotations

import inspect

from ..errors import InputError


class WidthError(InputError):
    """A width flag combination the built-in network cannot build; one-line message."""


def _divisors_near(n: int, target: int, count: int = 2) -> list[int]:
    """Up to ``count`` divisors of ``n`` closest to ``target`` (ascending)."""
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return sorted(sorted(divs, key=lambda d: (abs(d - target), -d))[:count])


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_widths(spec: str, options: dict, given: dict | None = None,
                 shape: str | None = None) -> None:
    """Check ``options`` (with the network function's defaults filled in) against the width
    rules above, for the built-in networks only (a user's function has its own rules).
    ``given``: the options given as flags (default: all of ``options``); the others are named
    as ``--shape``'s (``shape``) or as the network's default.

    Raises:
        WidthError: the first rule broken, naming the flags, the values (``(default)`` for a
            value not given) and divisors that would work.
    """
    from . import BUILTINS, resolve_spec

    if spec not in BUILTINS:
        return
    _, func = resolve_spec(spec)
    params = inspect.signature(func).parameters
    values = {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}
    values.update({k: v for k, v in options.items() if v is not None})

    flags = options if given is None else given

    def shown(key) -> str:
        tail = ("" if flags.get(key) is not None else f" (from --shape {shape})"
                if shape and options.get(key) is not None else " (the default)")
        return f"{_flag(key)} {values[key]}{tail}"

    def ok(key) -> bool:
        return key in params and isinstance(values.get(key), int)

    if ok("hidden") and ok("heads") and values["hidden"] % values["heads"]:
        near = _divisors_near(values["hidden"], values["heads"])
        raise WidthError(f"network '{spec}': {shown('heads')} does not divide {shown('hidden')} "
                         f"(each head takes hidden/heads columns): give --heads "
                         f"{' or '.join(map(str, near))}, or a --hidden that is a multiple of "
                         f"{values['heads']}")
    if ok("heads") and ok("kv_heads") and values["heads"] % values["kv_heads"]:
        near = _divisors_near(values["heads"], values["kv_heads"])
        raise WidthError(f"network '{spec}': {shown('kv_heads')} does not divide "
                         f"{shown('heads')} (each key/value head serves heads/kv-heads query "
                         f"heads): give --kv-heads {' or '.join(map(str, near))}")
    if ok("top_k") and ok("experts") and values["top_k"] > values["experts"]:
        raise WidthError(f"network '{spec}': {shown('top_k')} is more than {shown('experts')} "
                         f"(each token goes to top-k distinct experts): give --top-k at most "
                         f"{values['experts']}, or more --experts")
