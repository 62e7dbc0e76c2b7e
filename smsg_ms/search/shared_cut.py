"""Parameters a pipeline's stages share (:attr:`~smsg_ms.cost.pipeline.LayerCost.shared`: a
tied embedding, weights shared by every block) in the cut search of
:func:`smsg_ms.search.pipeline.cut_chain`: the once-per-step Send/Receive pairs each stage
pays, per interval of the chain, and the exact cut when one group of parameters is read on
three stages or more (its first reading stage pays one pair per other reading stage, which
depends on the whole cut)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..cost.pipeline import LayerCost, Links, shared_pair_seconds

INF = math.inf


def shared_readers(layers: Sequence[LayerCost]) -> dict[str, tuple[float, list[int]]]:
    """``{parameter name: (per-device slice bytes, the indices of the layers reading it)}`` of
    :attr:`LayerCost.shared`, in chain order."""
    readers: dict[str, tuple[float, list[int]]] = {}
    for i, layer in enumerate(layers):
        for name, nbytes in layer.shared:
            readers.setdefault(name, (nbytes, []))[1].append(i)
    return readers


def shared_seconds_matrix(readers: dict[str, tuple[float, list[int]]], L: int, links: Links,
                          skip: frozenset = frozenset()) -> np.ndarray:
    """``(L+1, L+1)``: seconds once per step of the parameters a stage ``[i, j)`` of a chain of
    ``L`` layers shares with
    layers outside it, one Send/Receive pair per parameter read both inside and outside
    (:func:`smsg_ms.cost.pipeline.shared_parameter_seconds` of one stage priced alone: exact
    where two stages read it, a lower bound where more do, since the first of them pays one
    pair per other reading stage, which only the whole cut tells). ``readers``:
    :func:`shared_readers`; the parameters in ``skip`` are left out."""
    out = np.zeros((L + 1, L + 1))
    ii, jj = np.triu_indices(L + 1, 1)
    for name, (nbytes, at) in readers.items():
        if name in skip:
            continue
        inside = np.zeros(L + 1, dtype=np.int64)
        inside[1:] = np.cumsum(np.isin(np.arange(L), at))
        held = inside[jj] - inside[ii]
        crosses = (held > 0) & (held < len(set(at)))
        out[ii[crosses], jj[crosses]] += shared_pair_seconds(links, nbytes)
    return out


def widely_shared(readers: dict[str, tuple[float, list[int]]]) -> tuple[frozenset, list[int]] | None:
    """Of :func:`shared_readers`, the parameters read by three layers or more, when they all
    have the same readers (one
    group, e.g. GPT's embedding with multi-token prediction, or ALBERT's weights shared by
    every block): ``(their names, the reading layers' indices)``; ``None`` when there is none
    or more than one such group (then the cut search charges one pair per stage, a lower
    bound for the first reading stage)."""
    groups: dict[tuple, list[str]] = {}
    for name, (_, at) in readers.items():
        if len(set(at)) >= 3:
            groups.setdefault(tuple(sorted(set(at))), []).append(name)
    if len(groups) != 1:
        return None
    (at, names), = groups.items()
    return frozenset(names), list(at)


def cut_with_sender(stage_matrix: Callable[[int], np.ndarray], readers: list[int],
                     pair: float, L: int, p: int) -> tuple[float, list[int]] | None:
    """Exact best cut into ``p`` stages when one group of parameters is read by the layers
    ``readers``: MindSpore's first reading stage Sends them to every other reading stage
    (``pipeline_transformer.cc`` ``HandleSharedParameter``), so it pays ``pair`` seconds per
    other reading stage and each of those pays ``pair`` once
    (:func:`smsg_ms.cost.pipeline.shared_parameter_seconds`). Dynamic programming from the
    last stage back, the state being the suffix start and how many of its stages read the group:
    a stage holding the first reader is the sender, and the reading stages after it are
    exactly those of the suffix. ``stage_matrix(k)``: ``(L+1, L+1)`` objective of ``[i, j)``
    as a stage with ``k`` micro-batches in flight, without the group. ``O(p²·L²)``.

    Returns:
        ``(objective seconds, stage starts)``, or ``None`` when no cut is finite.
    """
    first = readers[0]
    count = np.zeros(L + 1, dtype=np.int64)
    count[1:] = np.cumsum(np.isin(np.arange(L), readers))
    reads = (count[None, :] - count[:, None]) > 0                     # [i, j) holds a reader
    idx = np.arange(L + 1)
    sender = reads & (idx[:, None] <= first) & (first < idx[None, :])
    n_max = min(p, len(readers))
    # best[n][i]: the suffix [i, L) cut into the stages placed so far, n of them reading
    best = np.full((n_max + 1, L + 1), INF)
    c = stage_matrix(1)[:, L]
    has = reads[:, L]
    best[0][~has] = c[~has]
    best[1][has] = c[has] + np.where(sender[:, L], 0.0, pair)[has]
    back = []
    for s in range(p - 2, -1, -1):
        c = stage_matrix(p - s)
        new = np.full_like(best, INF)
        arg = np.zeros((n_max + 1, L + 1), dtype=np.int64)
        for n in range(n_max + 1):
            if not np.isfinite(best[n]).any():
                continue
            # [i, j) before the suffix [j, L) that holds n reading stages
            cost = c + np.where(sender, n * pair, np.where(reads, pair, 0.0))
            cand = np.maximum(best[n][None, :], cost)
            for r, mask in ((0, ~reads), (1, reads)):
                if n + r > n_max:
                    continue
                masked = np.where(mask, cand, INF)
                j = np.argmin(masked, axis=1)
                val = masked[idx, j]
                better = val < new[n + r]
                new[n + r] = np.where(better, val, new[n + r])
                arg[n + r] = np.where(better, j, arg[n + r])
        back.append(arg)
        best = new
    n = int(np.argmin(best[:, 0]))
    if not math.isfinite(best[n, 0]):
        return None
    objective, starts, i = float(best[n, 0]), [0], 0
    for arg in reversed(back):
        j = int(arg[n, i])
        n -= int(reads[i, j])
        starts.append(j)
        i = j
    return objective, starts


__all__ = ["cut_with_sender", "shared_readers", "shared_seconds_matrix", "widely_shared"]
