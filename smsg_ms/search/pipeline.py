"""Outer search: pipeline stages, micro-batches, optimizer sharding and recompute.

For every stage count ``p`` dividing the device count ``n`` (``p`` ≤ layers), every micro-batch count
``m`` dividing the global batch with ``m ≥ p`` (MindSpore requires micro >= stages) and optimizer
sharding off/on, the chain of layers is cut into ``p`` contiguous stages by an exact dynamic program
that minimises ``max_s ((m + p − 1) · t_s + g_s)`` (the 1F1B super-step of
:mod:`smsg_ms.cost.pipeline`) subject to every stage fitting in the per-device memory; inside a stage
the layers to recompute are chosen exactly (fewest recomputed forward seconds that make it fit). The
cheapest super-step over all ``(p, m, sharding)`` wins.

The layers' costs come from a callable ``layer_costs(devices_per_stage, micro_batch_size)`` →
list of :class:`~smsg_ms.cost.pipeline.LayerCost` (or ``None`` when that stage size / micro-batch
cannot be planned), normally the operator-level search run on ``n/p`` devices; tests pass synthetic
costs.

Exactness of the recompute choice: layers with equal costs (a *kind*) are interchangeable, so a
stage's choice is a count per kind; the counts are enumerated as a Pareto set of
(recomputed seconds, bytes saved, working set), which is exact and small for chains of repeated blocks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from ..cost.pipeline import (MIXED_PRECISION_ADAM, transfer_seconds, SELECTIVE, LayerCost, Links, bubble_fraction, chunks_cost,
                             level_rank, optimizer_level, parameter_memory, step_slots,
                             shared_pair_seconds, super_step_seconds)

from .interleave import cut_interleaved
from .shared_cut import cut_with_sender, shared_readers, shared_seconds_matrix, widely_shared
from .recompute import flags_of, kind_key, recompute_options

LayerCostFn = Callable[[int, int], "Sequence[LayerCost] | None"]
INF = math.inf


class NoFeasiblePipeline(ValueError):
    """No (stages, micro-batches, cut, sharding, recompute) fits in the memory limit."""


@dataclass
class PipelinePlan:
    """The chosen pipeline configuration.

    Attributes:
        stages, micro_batches: ``p`` and ``m``.
        devices_per_stage: ``n / p``.
        micro_batch_size: global batch / ``m`` (samples).
        optimizer_sharding: MindSpore ``enable_parallel_optimizer``.
        stage_of_layer: stage index of every layer of the chain (non-decreasing).
        recompute: per layer, ``Cell.recompute()`` on (``True``), off, or ``"selective"``
            (``Primitive.recompute()`` on its :data:`~smsg_ms.cost.pipeline.SELECTIVE_TYPES`).
        stage_seconds: ``t_s`` per stage (s per micro-batch); grad_sync_seconds: ``g_s`` (s/step).
        memory: bytes per device by kind, per stage.
        step_seconds: super-step (s); bubble: ``(p − 1)/(m + p − 1)``.
        layer_names: names of the chain's layers.
        candidates: ``(p, m, sharding)`` combinations evaluated.
        virtual_stages: ``v`` of the interleaved schedule (1: plain 1F1B); with ``v > 1``
            ``stage_of_layer`` goes round the stages ``v`` times (chunk ``c`` on stage ``c mod p``).
        optimizer_level: MindSpore's ``optimizer_level`` when sharding is on (``level1`` ...).
        runner_up: the best configuration of another ``(p, m, level, v)``: those keys and its
            ``step_seconds`` (``None`` when no other fits).
    """

    stages: int
    micro_batches: int
    devices_per_stage: int
    micro_batch_size: int
    optimizer_sharding: bool
    stage_of_layer: list[int]
    recompute: list[bool]
    stage_seconds: list[float]
    grad_sync_seconds: list[float]
    memory: list[dict[str, float]]
    step_seconds: float
    bubble: float
    layer_names: list[str] = field(default_factory=list)
    candidates: int = 0
    virtual_stages: int = 1
    optimizer_level: str | None = None
    runner_up: dict | None = None

    def as_plan_dict(self) -> dict:
        """The ``Plan.pipeline`` record: stages, micro-batches, stage and recompute per block,
        optimizer sharding, bubble fraction, predicted per-stage times and memory."""
        return {
            "stages": self.stages, "micro_batches": self.micro_batches,
            "devices_per_stage": self.devices_per_stage,
            "micro_batch_size": self.micro_batch_size,
            "optimizer_sharding": self.optimizer_sharding,
            "stage_of_block": {n: s for n, s in zip(self.layer_names, self.stage_of_layer)},
            "recompute": {n: r is True for n, r in zip(self.layer_names, self.recompute)},
            "bubble_fraction": self.bubble,
            "step_seconds": self.step_seconds,
            "stage_seconds": list(self.stage_seconds),
            "stage_memory_bytes": [sum(m.values()) for m in self.memory],
            # keys of the new dimensions only where they differ from before (old plans' bytes)
            **({"virtual_stages": self.virtual_stages} if self.virtual_stages > 1 else {}),
            **({"optimizer_level": self.optimizer_level}
               if self.optimizer_level not in (None, "level1") else {}),
            **({"selective_recompute": [n for n, r in zip(self.layer_names, self.recompute)
                                        if r == SELECTIVE]}
               if SELECTIVE in self.recompute else {}),
        }

    def configuration(self) -> dict:
        """The degrees this plan chose: stages, micro-batches, optimizer level (``off``),
        virtual stages, recomputed blocks, and its step seconds."""
        return {"stages": self.stages, "micro_batches": self.micro_batches,
                "optimizer_level": self.optimizer_level or "off",
                "virtual_stages": self.virtual_stages,
                "recomputed": sum(r is True for r in self.recompute),
                "selective": sum(r == SELECTIVE for r in self.recompute),
                "step_seconds": self.step_seconds}


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass
class _Chain:
    """Per-interval tables of one layer chain (fixed stage size, micro-batch, sharding)."""

    ms_index: np.ndarray        # (L+1, L+1) multiset id of layers [i, j), -1 if i >= j
    base: np.ndarray            # per multiset: Σ forward + backward (s)
    grad: np.ndarray            # per multiset: g (s)
    static: np.ndarray          # per multiset: parameter + gradient + optimizer bytes
    act: np.ndarray             # per multiset: Σ activation bytes
    options: list               # per multiset: Pareto recompute options
    sends: np.ndarray           # (L+1, L+1) send seconds of a stage [i, j)
    shared: np.ndarray          # (L+1, L+1) once-per-step shared-parameter seconds of [i, j)
                                # (a widely shared group cut exactly is left out)
    kinds: list
    kind_of: list[int]


def _tables(layers: Sequence[LayerCost], sharding: bool, links: Links, bytes_per,
            memo: dict | None = None, stages: int | None = None,
            micro_batches: int | None = None, shared: np.ndarray | None = None) -> _Chain:
    """Per-interval tables of the chain; with ``stages``, only the intervals a cut into that
    many stages can use: ``[0, L)`` for one stage, those starting at 0 or ending at ``L`` for
    two (the others get multiset id −1, as an empty interval). ``shared``: the
    :attr:`_Chain.shared` matrix when the caller built it (else every shared parameter's)."""
    L = len(layers)
    kinds: list[LayerCost] = []
    index: dict = {}
    kind_of = []
    for layer in layers:
        key = kind_key(layer)
        if key not in index:
            index[key] = len(kinds)
            kinds.append(key)
        kind_of.append(index[key])
    K = len(kinds)
    prefix = np.zeros((L + 1, K), dtype=np.int64)
    for i, k in enumerate(kind_of):
        prefix[i + 1] = prefix[i]
        prefix[i + 1, k] += 1
    ii, jj = np.triu_indices(L + 1, 1)
    if stages == 1:
        keep = (ii == 0) & (jj == L)
        ii, jj = ii[keep], jj[keep]
    elif stages == 2:
        keep = (ii == 0) | (jj == L)
        ii, jj = ii[keep], jj[keep]
    counts = prefix[jj] - prefix[ii]
    uniq, inverse = np.unique(counts, axis=0, return_inverse=True)
    ms_index = np.full((L + 1, L + 1), -1, dtype=np.int64)
    ms_index[ii, jj] = inverse.reshape(-1)

    def level(prm):
        return sharding if prm.optimizer_shardable() else False

    # per micro-batch optimizer collectives (level 2/3) count with the compute
    # and, with several micro-batches, the gradient accumulation (cost.pipeline.chunks_cost)
    accumulates = micro_batches != 1
    k_base = np.array([k.forward_seconds + k.backward_seconds
                       + sum(links.micro_sync_seconds(p, bytes_per["gradient"], level(p))
                             + (links.accumulate_seconds(p, bytes_per, level(p))
                                if accumulates else 0.0)
                             for p in k.params) for k in kinds])
    k_grad = np.array([sum(links.grad_sync_seconds(p, bytes_per["gradient"], level(p))
                           for p in k.params) for k in kinds])
    if micro_batches == 1 and not sharding:   # no accumulation: overlapped (stage_cost)
        k_grad = k_grad - np.array([k.hidden_sync_seconds for k in kinds])
    # the optimizer's update, once per step after the synchronisation
    k_grad = k_grad + np.array([sum(links.update_seconds(p, bytes_per, level(p))
                                    for p in k.params) for k in kinds])
    k_static = np.array([sum(parameter_memory(k.params, sharding, bytes_per).values())
                         for k in kinds])
    k_act = np.array([k.activation_bytes for k in kinds])
    options = [recompute_options(kinds, row, memo) for row in uniq]

    # a border's Send and its paired Receive (the gradient back) are two transfers of the same
    # tensor on the stage's chain, one with Links.paired_transfers (cost.pipeline.border_seconds)
    per_border = 1 if links.paired_transfers else 2
    out_send = np.array([per_border * transfer_seconds(links, x.output_bytes, x.output_sizes)
                         for x in layers])
    in_send = np.array([per_border * transfer_seconds(links, x.input_bytes, x.input_sizes)
                        for x in layers])
    # sends[i, j] = (out_send[j - 1] if j < L else 0) + (in_send[i] if i > 0 else 0), i < j
    out_col = np.zeros(L + 1)
    out_col[1:L] = out_send[:L - 1]
    in_row = np.zeros(L + 1)
    in_row[1:L] = in_send[1:L]
    sends = np.triu(out_col[None, :] + in_row[:, None], 1)
    if shared is None:
        shared = shared_seconds_matrix(shared_readers(layers), L, links)
    return _Chain(ms_index, uniq @ k_base, uniq @ k_grad, uniq @ k_static, uniq @ k_act, options,
                  sends, shared, kinds, kind_of)




def _min_recompute(chain: _Chain, stages: int, limit: float):
    """``rec[k][u]``: least recomputed seconds making multiset ``u`` fit with ``k`` micro-batches in
    flight (``inf``: nothing fits), and ``pick[k][u]`` the option index, for k = 1..stages."""
    n_ms = len(chain.options)
    rec = np.full((stages + 1, n_ms), INF)
    pick = np.zeros((stages + 1, n_ms), dtype=np.int64)
    ks = np.arange(1, stages + 1)[:, None]
    for u, opts in enumerate(chain.options):
        r = np.array([o[0] for o in opts])
        saved = np.array([o[1] for o in opts])
        work = np.array([o[2] for o in opts])
        mem = chain.static[u] + ks * (chain.act[u] - saved)[None, :] + work[None, :]
        cost = np.where(mem <= limit, r[None, :], INF)
        best = np.argmin(cost, axis=1)
        rec[1:, u] = cost[np.arange(stages), best]
        pick[1:, u] = best
    return rec, pick


def cut_chain(layers: Sequence[LayerCost], stages: int, micro_batches: int, *, memory_limit: float,
              sharding: bool, links: Links, recompute: bool = True, bytes_per=None,
              memo: dict | None = None):
    """Exact best cut of ``layers`` into ``stages`` contiguous stages.

    Minimises ``max_s ((m + p − 1) · t_s + g_s)`` with every stage's memory ≤ ``memory_limit``
    (bytes per device), by dynamic programming over the chain: ``D_s[j] = min_i max(D_{s−1}[i],
    c_s(i, j))``, ``O(p·L²)`` with vectorised rows. ``g_s`` holds the once-per-step Send/Receive
    pair of each parameter the stage shares with another (:attr:`LayerCost.shared`). Where
    more than two stages read it, the first of them pays one pair per other reading stage,
    which the interval alone does not tell: one such group of parameters is cut exactly by
    :func:`~smsg_ms.search.shared_cut.cut_with_sender`; with two or more groups each stage is
    charged one pair per group, a lower bound, and :func:`plan_pipeline` prices the cut it
    returns exactly.

    Returns:
        ``(objective seconds, starts, recompute flags)`` or ``None`` when nothing fits.
    """
    bytes_per = bytes_per or MIXED_PRECISION_ADAM
    L, p = len(layers), stages
    if p > L:
        return None
    readers = shared_readers(layers)
    group = widely_shared(readers) if p >= 3 else None
    skip = group[0] if group is not None else frozenset()
    chain = _tables(layers, sharding, links, bytes_per, memo, stages=p,
                    micro_batches=micro_batches,
                    shared=shared_seconds_matrix(readers, L, links, skip=skip))
    if recompute:
        rec, pick = _min_recompute(chain, p, memory_limit)
    else:
        rec = np.full((p + 1, len(chain.options)), INF)
        pick = np.zeros((p + 1, len(chain.options)), dtype=np.int64)
        for u, opts in enumerate(chain.options):
            none = next(i for i, o in enumerate(opts) if o[0] == 0.0 and o[1] == 0.0)
            for k in range(1, p + 1):
                if chain.static[u] + k * chain.act[u] <= memory_limit:
                    rec[k, u], pick[k, u] = 0.0, none
    slots = micro_batches + p - 1
    valid = chain.ms_index >= 0
    U = np.where(valid, chain.ms_index, 0)

    def stage_matrix(k: int) -> np.ndarray:
        """``[i, j)`` as a stage with ``k`` micro-batches in flight: its objective (s), the
        group of widely shared parameters left out."""
        c = slots * (chain.base[U] + rec[k][U] + chain.sends) + chain.grad[U] + chain.shared
        return np.where(valid, c, INF)

    if group is not None:
        names, at = group
        pair = sum(shared_pair_seconds(links, nbytes)
                   for name, (nbytes, _) in readers.items() if name in names)
        found = cut_with_sender(stage_matrix, at, pair, L, p)
        if found is None:
            return None
        objective, starts = found
        return objective, starts, _flags(chain, pick, starts, L, p)
    back = []
    best = None
    for s in range(p):
        k = p - s
        c = stage_matrix(k)
        if s == 0:
            best = c[0].copy()
            back.append(np.zeros(L + 1, dtype=np.int64))
        else:
            cand = np.maximum(best[:, None], c)
            arg = np.argmin(cand, axis=0)
            best = cand[arg, np.arange(L + 1)]
            back.append(arg)
    if not math.isfinite(best[L]):
        return None
    starts, j = [], L
    for s in range(p - 1, -1, -1):
        i = int(back[s][j]) if s else 0
        starts.append(i)
        j = i
    starts.reverse()
    return float(best[L]), starts, _flags(chain, pick, starts, L, p)


def _flags(chain: _Chain, pick, starts: list[int], L: int, p: int) -> list:
    """Every layer's recompute flag of the cut ``starts`` (the options ``pick`` chose)."""
    flags = []
    bounds = starts + [L]
    for s in range(p):
        i, j = bounds[s], bounds[s + 1]
        u = int(chain.ms_index[i, j])
        counts = chain.options[u][int(pick[p - s][u])][3]
        flags += flags_of(counts, chain.kind_of[i:j], len(chain.kinds))
    return flags




def _cut_costs(layers, found, p: int, m: int, v: int, sh, links: Links, bytes_per) -> list:
    """Every stage's :func:`~smsg_ms.cost.pipeline.chunks_cost` of a cut ``found`` (``(objective,
    chunk starts, recompute flags)``) into ``p`` stages of ``v`` chunks each, ``m``
    micro-batches, optimizer sharding ``sh``: the whole cut known, so shared parameters are
    priced exactly."""
    _, starts, flags = found
    bounds = list(starts) + [len(layers)]
    stage_of = [c % p for c in range(len(starts)) for _ in range(bounds[c], bounds[c + 1])]
    costs = []
    for s in range(p):
        chunks = [(bounds[c], bounds[c + 1]) for c in range(s, len(starts), p)]
        rc = [flags[i] for a, c in chunks for i in range(a, c)]
        costs.append(chunks_cost(layers, chunks, s, p, recompute=rc, sharding=sh or False,
                                 links=links, bytes_per=bytes_per, virtual_stages=v,
                                 micro_batches=m, stage_of=stage_of))
    return costs


def cut_key(stages: int, micro_batches: int, sharding: bool, memory_limit: float,
            recompute: bool) -> tuple:
    """Key of a :func:`cut_chain` result in ``plan_pipeline(cuts=...)``: what varies between
    its calls in one search (layers, links and bytes per element are the search's own)."""
    level = optimizer_level(sharding)
    return (int(stages), int(micro_batches), bool(level) if level in (None, "level1") else level,
            float(memory_limit), bool(recompute))


def plan_pipeline(layer_costs: LayerCostFn, devices: int, global_batch: int, *,
                  memory_limit: float, links: Links, stages: Iterable[int] | None = None,
                  micro_batches: Iterable[int] | None = None,
                  optimizer_sharding: Iterable[bool] = (False, True), recompute: bool = True,
                  bytes_per: dict | None = None, layer_names: Sequence[str] | None = None,
                  compute_floor: Callable[[int, int], float] | None = None,
                  incumbent: float = INF, cuts: dict | None = None,
                  virtual_stages: Iterable[int] = (1,)) -> PipelinePlan:
    """Best (stages, micro-batches, optimizer sharding, stage cut, recompute) for one network.

    Args:
        layer_costs: ``(devices_per_stage, micro_batch_size) → [LayerCost] | None``.
        devices: ``n``; global_batch: samples per step.
        memory_limit: bytes per device.
        links: communication constants (gradient sync, sends).
        stages, micro_batches: restrict the candidates (default: all divisors, ``m ≥ p``).
        optimizer_sharding: the settings tried: ``False``, ``True`` (level 1) or MindSpore's
            levels ``"level1"``, ``"level2"``, ``"level3"``. recompute: allow recompute.
        virtual_stages: the ``v`` tried for ``p > 1`` (1: plain 1F1B; ``v > 1``: interleaved,
            :func:`smsg_ms.search.interleave.cut_interleaved`, only where ``p·v`` ≤ layers and
            ``p`` divides ``m`` as Megatron-LM's interleaved schedule requires).
        compute_floor: ``(d, b) → F``, a lower bound (s) on ``Σ (forward_seconds +
            backward_seconds)`` over the layers ``layer_costs(d, b)`` would return, cheaper than
            ``layer_costs``. Candidates are then visited by increasing bound
            ``(m + p − 1) / p · F`` and ``layer_costs`` is not called for those whose bound
            exceeds the best step found (or ``incumbent``). Exact (same plan as without it):
            every stage cut's objective is ``max_s ((m + p − 1)(b_s + r_s + e_s) + g_s)`` with
            ``b_s`` the stage's forward + backward seconds and recompute ``r_s``, sends ``e_s``,
            gradient synchronisation ``g_s`` all ≥ 0, so it is at least ``(m + p − 1) · max_s
            b_s ≥ (m + p − 1) / p · Σ_s b_s ≥ (m + p − 1) / p · F``; ties keep the original
            preference (smallest ``p``, then ``m``, then sharding off, then fewest virtual
            stages); with virtual stages the bound uses the largest ``v`` tried
            (``(m + (p − 1)/v) / p · F``).
        incumbent: step seconds of a plan found elsewhere; candidates whose bound exceeds it
            are skipped (needs ``compute_floor``).
        cuts: results of :func:`cut_chain` computed ahead (another process), by
            :func:`cut_key`; used instead of calling it again (same arguments, same result).

    Raises:
        ValueError: non-positive ``devices`` / ``global_batch`` / ``memory_limit``.
        NoFeasiblePipeline: nothing fits (or, with ``incumbent``, nothing could beat it); the
            message gives the candidates tried.
    """
    for name, val in (("devices", devices), ("global_batch", global_batch)):
        if not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if not memory_limit > 0:
        raise ValueError(f"memory_limit must be positive bytes, got {memory_limit!r}")
    bytes_per = bytes_per or MIXED_PRECISION_ADAM
    p_list = sorted(set(stages)) if stages is not None else divisors(devices)
    m_all = sorted(set(micro_batches)) if micro_batches is not None else divisors(global_batch)
    pairs = []
    for p in p_list:
        if p < 1 or devices % p:
            raise ValueError(f"stage count {p} does not divide {devices} devices")
        pairs += [(p, m) for m in m_all if m >= p and global_batch % m == 0]
    v_list = sorted(set(int(v) for v in virtual_stages) | {1})
    if compute_floor is not None:
        bound = {(p, m): step_slots(p, m, v_list[-1] if p > 1 else 1) / p
                 * compute_floor(devices // p, global_batch // m) for p, m in pairs}
        pairs.sort(key=lambda pm: (bound[pm], pm))
    best, best_key, runner, tried, pruned = None, None, None, 0, 0
    cache: dict = {}
    memo: dict = {}      # recompute Pareto sets, shared by all candidates
    chain_length = None    # the same for every (d, b): p beyond it is skipped unsolved
    for p, m in pairs:
        if compute_floor is not None and bound[(p, m)] > min(incumbent, best[0] if best else INF):
            pruned = len(pairs) - pairs.index((p, m))
            break          # every later candidate's bound is at least as large
        if chain_length is not None and p > chain_length:
            continue
        d, b = devices // p, global_batch // m
        if (d, b) not in cache:
            got = layer_costs(d, b)
            cache[(d, b)] = None if got is None else list(got)
        layers = cache[(d, b)]
        if layers is not None:
            chain_length = len(layers)
            shares = any(x.shared for x in layers)
        if layers is None or p > len(layers):
            continue
        for sh in sorted(set(optimizer_level(x) for x in optimizer_sharding), key=level_rank):
            tried += 1
            for v in v_list:
                if v > 1 and (p == 1 or p * v > len(layers) or m % p):
                    continue
                if v > 1:
                    found = cut_interleaved(layers, p, v, m, memory_limit=memory_limit,
                                            sharding=sh, links=links.for_stage(d),
                                            recompute=recompute,
                                            bytes_per=bytes_per, memo=memo)
                elif cuts is not None and cut_key(p, m, sh, memory_limit, recompute) in cuts:
                    found = cuts[cut_key(p, m, sh, memory_limit, recompute)]
                else:
                    found = cut_chain(layers, p, m, memory_limit=memory_limit,
                                      sharding=sh or False, links=links.for_stage(d),
                                      recompute=recompute,
                                      bytes_per=bytes_per, memo=memo)
                if found is None:
                    continue
                if v == 1 and shares:
                    # a parameter read on 3+ stages: its first stage's pairs need the whole cut
                    found = (super_step_seconds(_cut_costs(layers, found, p, m, v, sh, links.for_stage(d),
                                                           bytes_per), m, v),) + tuple(found[1:])
                order = (found[0], p, m, level_rank(sh), v)
                if best is None or order < best_key[0]:
                    if best is not None:
                        runner = best_key
                    best, best_key = found, (order, sh, layers)
                elif runner is None or order < runner[0]:
                    runner = (order, sh, layers)
    if best is None:
        raise NoFeasiblePipeline(
            f"no pipeline plan fits in {memory_limit / 2**30:.3g} GiB per device on {devices} "
            f"devices (tried {tried} stage/micro-batch/sharding combinations"
            + (f"; {pruned} stage/micro-batch pairs could not beat {incumbent:.4g} s)"
               if pruned else ")"))
    (_, p, m, _, v), sh, layers = best_key
    _, starts, flags = best
    bounds = list(starts) + [len(layers)]
    stage_of = [c % p for c in range(len(starts)) for _ in range(bounds[c], bounds[c + 1])]
    costs = _cut_costs(layers, best, p, m, v, sh, links.for_stage(devices // p), bytes_per)
    names = list(layer_names) if layer_names is not None else [
        x.name or f"layer{i}" for i, x in enumerate(layers)]
    runner_up = None
    if runner is not None:
        (step, rp, rm, _, rv), rsh, _ = runner
        runner_up = {"stages": rp, "micro_batches": rm, "optimizer_level": rsh or "off",
                     "virtual_stages": rv, "step_seconds": step}
    return PipelinePlan(
        stages=p, micro_batches=m, devices_per_stage=devices // p,
        micro_batch_size=global_batch // m, optimizer_sharding=bool(sh),
        stage_of_layer=stage_of, recompute=list(flags),
        stage_seconds=[c.micro_seconds for c in costs],
        grad_sync_seconds=[c.grad_sync_seconds for c in costs],
        memory=[c.memory for c in costs], step_seconds=super_step_seconds(costs, m, v),
        bubble=bubble_fraction(p, m, v), layer_names=names, candidates=tried,
        virtual_stages=v, optimizer_level=sh, runner_up=runner_up)
