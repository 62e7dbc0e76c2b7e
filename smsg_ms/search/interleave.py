"""The stage cut of an interleaved pipeline: the chain in ``p·v`` contiguous chunks, chunk ``c`` on
stage ``c mod p`` (MindSpore ``pipeline_config={"pipeline_interleave": True}``; mindformers writes
the layers per chunk as ``pp_interleave_num`` and ``offset``).

A stage's cost is a sum over its ``v`` chunks, so the contiguous dynamic program of
:func:`smsg_ms.search.pipeline.cut_chain` does not apply. The chunk sizes are enumerated instead:
every composition of the ``L`` layers into ``p·v`` non-empty chunks when there are at most
:data:`ENUMERATE_UP_TO` of them (exact), otherwise the balanced ones (each chunk ``⌊L/pv⌋`` or
``⌈L/pv⌉`` layers) when those are few enough, otherwise the one balanced cut whose larger chunks
come last (mindformers' default ``offset`` of zero with the remainder on the last stages). Inside a
stage the recomputed layers are chosen exactly, as in the contiguous cut (fewest recomputed
forward seconds that fit). Costs: :func:`smsg_ms.cost.pipeline.chunks_cost`.
"""
from __future__ import annotations

import itertools
import math
from typing import Sequence

from ..cost.pipeline import (MIXED_PRECISION_ADAM, LayerCost, Links, chunks_cost, in_flight,
                             parameter_memory, step_slots)
from .recompute import flags_of, kind_key, recompute_options

#: Largest number of chunk-size compositions enumerated.
ENUMERATE_UP_TO = 4096


def chunk_cuts(layers: int, chunks: int) -> list[tuple[int, ...]]:
    """Start of every chunk (``(0, ...)``) for the cuts tried (see the module docstring)."""
    if chunks > layers:
        return []
    if math.comb(layers - 1, chunks - 1) <= ENUMERATE_UP_TO:
        return [(0,) + c for c in itertools.combinations(range(1, layers), chunks - 1)]
    base, extra = divmod(layers, chunks)
    if math.comb(chunks, extra) <= ENUMERATE_UP_TO:
        bigger = itertools.combinations(range(chunks), extra)
    else:
        bigger = [tuple(range(chunks - extra, chunks))]
    out = []
    for big in bigger:
        sizes = [base + (c in big) for c in range(chunks)]
        out.append(tuple(itertools.accumulate([0] + sizes[:-1])))
    return out


def _stage_recompute(layers, chunks, stage: int, stages: int, virtual: int, sharding, limit,
                     bytes_per, recompute: bool, memo: dict) -> list | None:
    """Recompute flags (per layer of the stage's chunks, in order) with the fewest recomputed
    seconds that make the stage fit, or ``None``."""
    part = [x for a, b in chunks for x in layers[a:b]]
    kinds, kind_of = [], []
    for x in part:
        key = kind_key(x)
        if key not in kinds:
            kinds.append(key)
        kind_of.append(kinds.index(key))
    counts = [kind_of.count(k) for k in range(len(kinds))]
    static = sum(parameter_memory([p for x in part for p in x.params], sharding,
                                  bytes_per).values())
    act = sum(x.activation_bytes for x in part)
    k = in_flight(stage, stages, virtual)
    options = recompute_options(kinds, counts, memo) if recompute else [(0.0, 0.0, 0.0, ())]
    for _, saved, work, picked in options:       # sorted by recomputed seconds
        if static + k * (act - saved) + work <= limit:
            return flags_of(picked or (0,) * len(kinds), kind_of, len(kinds))
    return None


def cut_interleaved(layers: Sequence[LayerCost], stages: int, virtual: int, micro_batches: int,
                    *, memory_limit: float, sharding, links: Links, recompute: bool = True,
                    bytes_per: dict | None = None, memo: dict | None = None):
    """Best interleaved cut of ``layers`` into ``stages · virtual`` chunks.

    Minimises ``max_s ((m + (p − 1)/v) · t_s + g_s)`` (:func:`smsg_ms.cost.pipeline.step_slots`)
    with every stage's memory ≤ ``memory_limit`` bytes per device.

    Returns:
        ``(objective seconds, chunk starts, recompute flags per layer)`` or ``None`` when nothing
        fits or the chain has fewer than ``p·v`` layers.
    """
    b = bytes_per or MIXED_PRECISION_ADAM
    memo = {} if memo is None else memo
    p, v, L = stages, virtual, len(layers)
    slots = step_slots(p, micro_batches, v)
    best = None
    for starts in chunk_cuts(L, p * v):
        bounds = list(starts) + [L]
        stage_of = [c % p for c in range(p * v) for _ in range(bounds[c], bounds[c + 1])]
        worst, flags = 0.0, [False] * L
        for s in range(p):
            chunks = [(bounds[c], bounds[c + 1]) for c in range(s, p * v, p)]
            rc = _stage_recompute(layers, chunks, s, p, v, sharding, memory_limit, b,
                                  recompute, memo)
            if rc is None:
                worst = math.inf
                break
            cost = chunks_cost(layers, chunks, s, p, recompute=rc, sharding=sharding,
                               links=links, bytes_per=b, virtual_stages=v, stage_of=stage_of)
            worst = max(worst, slots * cost.micro_seconds + cost.grad_sync_seconds)
            idx = [i for a, c in chunks for i in range(a, c)]
            for i, f in zip(idx, rc):
                flags[i] = f
        if math.isfinite(worst) and (best is None or worst < best[0]):
            best = (worst, list(starts), flags)
    return best


__all__ = ["ENUMERATE_UP_TO", "chunk_cuts", "cut_interleaved"]
