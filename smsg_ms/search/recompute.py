"""Which layers of a stage to recompute: the Pareto set of (recomputed forward seconds, bytes
saved, working set) over counts per layer kind (layers with equal costs are interchangeable), used
by the contiguous and the interleaved stage cuts (:mod:`smsg_ms.search.pipeline`,
:mod:`smsg_ms.search.interleave`)."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..cost.pipeline import SELECTIVE, LayerCost

INF = math.inf


def kind_key(layer: LayerCost) -> LayerCost:
    """The layer without what depends on its position (name, sends): equal keys are
    interchangeable inside a stage."""
    # what makes two layers interchangeable inside a stage (position-dependent sends excluded)
    return replace(layer, name="", output_bytes=0.0)


#: Largest number of count vectors :func:`_recompute_options` enumerates at once (numpy);
#: beyond it the front is built kind by kind.
ENUMERATE_UP_TO = 1 << 14


def recompute_options(kinds: list[LayerCost], counts, memo: dict | None = None
                      ) -> list[tuple[float, float, float, tuple]]:
    """Pareto set of ``(recomputed s, saved bytes, working set, counts per kind)``, sorted by
    (recomputed s, working set, −saved, counts). Equal to the incremental construction
    (:func:`_recompute_front_incremental`; ``tests/test_pipeline_search.py`` compares them).
    When a kind present has a selective option (``selective_bytes > 0``) the counts are pairs
    ``(whole, selective)`` per kind, flattened (:func:`flags_of` reads them)."""
    if any(k.selective_bytes > 0 and c > 0 for k, c in zip(kinds, counts)):
        key = tuple((k.forward_seconds, k.activation_bytes - k.input_bytes, int(c),
                     k.selective_seconds, k.selective_bytes) for k, c in zip(kinds, counts))
        if memo is not None and key in memo:
            return memo[key]
        front = _selective_front(key)
        if memo is not None:
            memo[key] = front
        return front
    key = tuple((k.forward_seconds, k.activation_bytes - k.input_bytes, int(c))
                for k, c in zip(kinds, counts))
    if memo is not None and key in memo:
        return memo[key]
    size = math.prod(c + 1 for fwd, saved, c in key if c > 0 and saved > 0)
    if size <= ENUMERATE_UP_TO:
        front = _recompute_front_enumerated(key)
    else:
        front = _recompute_front_incremental(key)
    if memo is not None:
        memo[key] = front
    return front


def _recompute_front_enumerated(key) -> list[tuple[float, float, float, tuple]]:
    """Every count vector at once: recompute, saved and working set accumulated kind by kind in
    the incremental order (same floating-point sums), then one Pareto filter: an option is
    dominated when an earlier one (in the sort order) has a working set no larger and saved at
    least as much, which is what the incremental filter removes (dominance is preserved by
    adding the same later choices: sums shift equally, ``max(w, x)`` is monotone)."""
    live = [(i, fwd, saved, c) for i, (fwd, saved, c) in enumerate(key) if c > 0 and saved > 0]
    grids = np.meshgrid(*[np.arange(c + 1) for _, _, _, c in live], indexing="ij")
    ks = [g.reshape(-1) for g in grids]
    n = ks[0].size if ks else 1
    r, sv, w = np.zeros(n), np.zeros(n), np.zeros(n)
    for k, (_, fwd, saved, _) in zip(ks, live):
        r = r + k * fwd
        sv = sv + k * saved
        w = np.where(k > 0, np.maximum(w, saved), w)
    full = np.zeros((n, len(key)), dtype=np.int64)
    for k, (i, _, _, _) in zip(ks, live):
        full[:, i] = k
    order = np.lexsort(tuple(full[:, j] for j in range(len(key) - 1, -1, -1)) + (-sv, w, r))
    r, sv, w, full = r[order], sv[order], w[order], full[order]
    keep = np.ones(n, dtype=bool)
    for u in np.unique(w):
        best = np.maximum.accumulate(np.where(w <= u, sv, -INF))
        before = np.concatenate(([-INF], best[:-1]))
        keep &= ~((w == u) & (before >= sv))
    return list(zip(r[keep].tolist(), sv[keep].tolist(), w[keep].tolist(),
                    map(tuple, full[keep].tolist())))


def _recompute_front_incremental(key) -> list[tuple[float, float, float, tuple]]:
    """The front built kind by kind, pruned after each (the reference construction)."""
    front = [(0.0, 0.0, 0.0, ())]
    for fwd, saved, c in key:
        if c == 0 or saved <= 0:
            front = [(r, s, w, cs + (0,)) for r, s, w, cs in front]
            continue
        grown = [(r + k * fwd, s + k * saved, max(w, saved) if k else w, cs + (k,))
                 for r, s, w, cs in front for k in range(c + 1)]
        front = _pareto(grown)
    return front


def _pareto(options):
    """Keep options not dominated in (less recompute, more saved, less working set); sorted.

    Scanned by increasing recompute; an option is dominated when an earlier one with a working
    set no larger saved at least as much (few distinct working sets: one per layer kind).
    """
    out = []
    best: dict[float, float] = {}       # working set -> most saved so far
    for opt in sorted(options, key=lambda o: (o[0], o[2], -o[1], o[3])):
        saved, work = opt[1], opt[2]
        if any(w <= work and s >= saved for w, s in best.items()):
            continue
        out.append(opt)
        best[work] = max(best.get(work, -INF), saved)
    return out


def _selective_front(key) -> list[tuple[float, float, float, tuple]]:
    """The front over ``(whole, selective)`` counts per kind (``whole + selective ≤ c``), built
    kind by kind as :func:`_recompute_front_incremental`, in numpy: equal, bit for bit, to
    :func:`_selective_front_reference` (``tests/test_recompute_front.py``). Each step forms
    the same sums in the same order (``(r + kf·fwd) + ks·sel_fwd``; ``max`` of equal values is
    the value), sorts by the same key (recompute, working set, −saved, counts: counts are
    unique, so the order is total) and drops an option when an earlier one has a working set
    no larger and saved at least as much (an earlier dropped option is dominated by an earlier
    kept one, so testing all earlier options drops the same ones as :func:`_pareto`)."""
    r, s, w = np.zeros(1), np.zeros(1), np.zeros(1)
    cs = np.zeros((1, 0), dtype=np.int64)
    for fwd, saved, c, sel_fwd, sel_saved in key:
        kf, ks = _count_pairs(c, saved > 0, sel_saved > 0)
        if len(kf) == 1 and all(math.isfinite(x) for x in (fwd, saved, sel_fwd, sel_saved)):
            # (0, 0) only: the sums are unchanged (x + 0·a is x for finite a and x ≠ −0.0,
            # which sums from 0.0 never are; max(w, 0.0) is w ≥ 0); the front stays sorted
            # and undominated, so _pareto returns it as it is
            cs = np.concatenate([cs, np.zeros((len(r), 2), dtype=np.int64)], axis=1)
            continue
        rr = (r[:, None] + kf * fwd) + ks * sel_fwd
        ss = (s[:, None] + kf * saved) + ks * sel_saved
        ww = np.maximum(np.maximum(w[:, None], np.where(kf > 0, saved, 0.0)),
                        np.where(ks > 0, sel_saved, 0.0))
        n, k = len(r), len(kf)
        grown = np.empty((n * k, cs.shape[1] + 2), dtype=np.int64)
        grown[:, :-2] = np.repeat(cs, k, axis=0)
        grown[:, -2] = np.tile(kf, n)
        grown[:, -1] = np.tile(ks, n)
        r, s, w, cs = _pareto_arrays(rr.reshape(-1), ss.reshape(-1), ww.reshape(-1), grown)
    return list(zip(r.tolist(), s.tolist(), w.tolist(), map(tuple, cs.tolist())))


def _count_pairs(c: int, whole: bool, selective: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(kf, ks)`` of :func:`_selective_front_reference`'s loops over one kind, in order."""
    pairs = [(kf, ks) for kf in range(c + 1 if whole else 1)
             for ks in range(c - kf + 1 if selective else 1)]
    kf, ks = np.array(pairs, dtype=np.int64).T
    return kf, ks


def _pareto_arrays(r, s, w, counts):
    """:func:`_pareto` of the options ``(r[i], s[i], w[i], tuple(counts[i]))`` (counts
    unique), as arrays in :func:`_pareto`'s order."""
    cols = counts.shape[1]
    order = np.lexsort(tuple(counts[:, j] for j in range(cols - 1, -1, -1)) + (-s, w, r))
    r, s, w, counts = r[order], s[order], w[order], counts[order]
    keep = np.ones(len(r), dtype=bool)
    for u in np.unique(w):
        best = np.maximum.accumulate(np.where(w <= u, s, -INF))
        before = np.concatenate(([-INF], best[:-1]))
        keep &= ~((w == u) & (before >= s))
    return r[keep], s[keep], w[keep], counts[keep]


def _selective_front_reference(key) -> list[tuple[float, float, float, tuple]]:
    """The front over ``(whole, selective)`` counts per kind, built kind by kind with
    :func:`_pareto` (the reference of :func:`_selective_front`)."""
    front = [(0.0, 0.0, 0.0, ())]
    for fwd, saved, c, sel_fwd, sel_saved in key:
        grown = []
        for r, s, w, cs in front:
            for kf in range(c + 1 if saved > 0 else 1):
                for ks in range(c - kf + 1 if sel_saved > 0 else 1):
                    work = max(w, saved if kf else 0.0, sel_saved if ks else 0.0)
                    grown.append((r + kf * fwd + ks * sel_fwd, s + kf * saved + ks * sel_saved,
                                  work, cs + (kf, ks)))
        front = _pareto(grown)
    return front


def flags_of(counts, kind_of: list[int], kinds: int) -> list:
    """Per layer (of kinds ``kind_of``, in order): ``True`` (whole layer), ``"selective"`` or
    ``False``, the first layers of each kind taking the counts of an option of
    :func:`recompute_options`."""
    pairs = len(counts) == 2 * kinds and kinds > 0
    whole = list(counts[0::2]) if pairs else list(counts)
    sel = list(counts[1::2]) if pairs else [0] * kinds
    out = []
    for k in kind_of:
        if whole[k] > 0:
            whole[k] -= 1
            out.append(True)
        elif sel[k] > 0:
            sel[k] -= 1
            out.append(SELECTIVE)
        else:
            out.append(False)
    return out
