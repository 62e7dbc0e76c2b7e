"""The cuts of a layout a network keeps on a primitive (``self_define_shard``: MindSpore takes
only the network's ``Layout`` there, ``frontend/parallel/ops_info/self_define_shard_info.cc``),
at a given device count: the one option the search may choose for that primitive. Likewise the
strategy a network's own ``shard()`` sets (:data:`OWN_STRATEGY_ATTR`): a fixed choice unless
the plan is asked to replace it (``--replace-strategies``), :func:`kept_options`.

A layout is MindSpore's ``Layout.to_dict()``: ``device_matrix`` (devices per axis, outermost
first) and ``tensor_map`` (per tensor dimension the device axis counted from the right, ``-1``
not cut, a tuple for several axes). A device matrix written by hand for another device count is
fitted first (:func:`fitted_device_matrix`).
"""
from __future__ import annotations

import dataclasses
import json
from math import gcd, prod

#: op attribute (JSON text) where the capture records the layouts a network keeps, with the
#: device matrix it wrote (the capture's one device cannot hold them)
KEPT_LAYOUT_ATTR = "smsg_kept_layout"
#: op attribute (JSON text) where the capture records the in_strategy a network's own
#: ``shard()`` sets and the capture's one device cannot hold
OWN_STRATEGY_ATTR = "smsg_own_strategy"
#: the note of an option kept because the network's code sets it
OWN_NOTE = ("the network's own shard() strategy, kept as a fixed choice "
            "(--replace-strategies plans it anew)")


def kept_options(op, result: list, devices: int, replace_strategies: bool = False) -> list:
    """The options of ``op`` (``result``, :class:`~smsg_ms.cost.api.OpCost`) the search may
    choose: only the one of the layout the network keeps (:data:`KEPT_LAYOUT_ATTR`, at
    ``devices``: :func:`kept_cuts`), or of the strategy its own ``shard()`` sets
    (:data:`OWN_STRATEGY_ATTR`, noted :data:`OWN_NOTE`) unless ``replace_strategies``; never an
    out_strategy variant. ``result`` unchanged when no option has it (a strategy for more
    devices than ``devices``, or one whose product does not divide them)."""
    text, own = op.attrs.get(KEPT_LAYOUT_ATTR), op.attrs.get(OWN_STRATEGY_ATTR)
    if isinstance(text, str):
        cuts = kept_cuts(json.loads(text), devices)
        kept = [r for r in result if cuts is not None and r.out_strategy is None
                and tuple(tuple(c) for c in r.strategy[:len(cuts)]) == cuts]
        return kept or result
    if replace_strategies or not isinstance(own, str):
        return result
    want = tuple(tuple(int(c) for c in s) for s in json.loads(own))
    kept = [dataclasses.replace(r, notes=list(r.notes) + [OWN_NOTE]) for r in result
            if r.out_strategy is None and tuple(tuple(c) for c in r.strategy) == want]
    return kept or result


def _axes(entry) -> tuple[int, ...]:
    return tuple(a for a in (entry if isinstance(entry, (tuple, list)) else (entry,)) if a >= 0)


def used_axes(layouts) -> set[int]:
    """Device-matrix axes (counted from the left) any tensor map of ``layouts`` names."""
    used: set[int] = set()
    for layout in layouts:
        rank = len(layout["device_matrix"])
        for entry in layout["tensor_map"]:
            used.update(rank - 1 - a for a in _axes(entry))
    return used


#: the device-matrix axis name of data parallelism in mindformers' layouts (``Layout(dev_mat,
#: ("dp", "cp", "tp"))``, ``parallel_core/training_graph/device_matrix.py``)
DATA_PARALLEL_ALIAS = "dp"


def fitted_device_matrix(matrix: tuple, devices: int, used: set[int],
                         names: tuple = ()) -> tuple | None:
    """``matrix`` fitted to ``devices``; ``None`` when it cannot be (or needs no change).

    More devices in the matrix than given: each axis from the outermost one on gives up the
    common factor it shares with the excess (MindSpore numbers ranks with the last axis varying
    fastest, ``ConvertRankToCoordinate`` in ``frontend/parallel/device_matrix.cc``, so the outer
    axes span the farthest ranks: those a pipeline gives to other stages; fewer cuts keep every
    cut dimension divisible). Fewer: the outermost axis no tensor map names (a replica axis)
    takes the shortfall. Example: ``(1, 4, 1, 2)`` into 4 → ``(1, 2, 1, 2)``; into 16 with axis
    2 unused → ``(1, 4, 2, 2)``.

    A matrix of ones (the network built its layouts for the capture's one device, as mindformers'
    ``parallel_core`` models do: ``data_parallel`` = the run's devices) whose axes are named
    (``names``, the layout's ``alias_name``) with a ``dp`` axis: ``dp`` takes all devices, as
    the network sets it for the run: ``(1, 1, 1)`` named ``("dp", "cp", "tp")`` into 8 →
    ``(8, 1, 1)``."""
    total = prod(matrix)
    if total == devices or devices < 1:
        return None
    dm = list(matrix)
    if total == 1 and DATA_PARALLEL_ALIAS in names and len(names) == len(dm):
        dm[list(names).index(DATA_PARALLEL_ALIAS)] = devices
        return tuple(dm)
    if total % devices == 0:
        excess = total // devices
        for i, n in enumerate(dm):
            g = gcd(n, excess)
            dm[i], excess = n // g, excess // g
        return tuple(dm) if excess == 1 else None
    if devices % total == 0:
        free = [i for i in range(len(dm)) if i not in used]
        if not free:
            return None
        dm[free[0]] *= devices // total
        return tuple(dm)
    return None


def kept_cuts(layouts: list[dict], devices: int) -> tuple[tuple[int, ...], ...] | None:
    """Cut count per dimension of each tensor the ``layouts`` describe, at ``devices`` devices
    (the device matrix fitted to them); ``None`` when the layouts disagree on their device
    matrix or it cannot be fitted."""
    matrices = {tuple(lay["device_matrix"]) for lay in layouts}
    if len(matrices) != 1:
        return None
    dm = matrices.pop()
    if prod(dm) != devices:
        names = tuple(layouts[0].get("alias_name") or ())
        dm = fitted_device_matrix(dm, devices, used_axes(layouts), names)
        if dm is None:
            return None
    rank = len(dm)
    return tuple(tuple(prod(dm[rank - 1 - a] for a in _axes(entry)) for entry in lay["tensor_map"])
                 for lay in layouts)
