"""Numpy fast path of :func:`smsg_ms.cost.redistribution.redistribute`'s seconds: many
source × destination layout pairs of one tensor at once, bit for bit equal to the reference
(``tests/test_redistribution_fast.py``), used by the planner (``planner.problem``).
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from math import prod

import numpy as np

from .api import collective_seconds
from .layout import TensorLayout


# For a power-of-two device count every axis size is a power of two, so every device matrix
# refines to ``log2(devices)`` binary axes ("bits", left to right) and ``unify`` never fails.
# A layout becomes, per tensor dimension, the set of bits cutting it (a bit mask; one contiguous
# run, since a dimension is cut by one axis). Redistribution actions are constant on each unified
# axis and ``redistribute``'s runs are unions of unified axes, so with ``enable_alltoall`` off
# it reads, in bits, as a sequence of AllGathers (no slice comes before any of them):
#
# 1. order, dimensions ascending: a dimension cut in both layouts on overlapping bits that start
#    at different bits gathers the overlap (which leaves both owners; it is on one dimension in
#    both layouts, so no rule below sees it);
# 2. concat: runs of adjacent bits cutting one source dimension, replicated in the destination,
#    not across the first bit of a destination axis, ordered by that source dimension, last
#    first, then by first bit, highest (minor) first;
# 3. permute: runs of adjacent bits cutting one source dimension and another destination
#    dimension, ordered by the destination dimension of the run's first bit, last dimension
#    first, then by that first bit, highest (minor) first.
#
# Each AllGather carries the source slice grown by every gather so far, so its bytes are the
# source slice's shifted left by the bits gathered up to and including it. With a gradient,
# each has its ReduceScatter twin in backward, so seconds = 2 · Σ t over the forward gathers in
# order, t = (g−1)·S/g / bandwidth + latency, the sum CostModel.seconds forms over the same list
# (float additions in the same order; adding 0.0 changes no sum); without, Σ t. Where
# MindSpore's MergeAllConcat joins a gather to the one before it (both moved to axis 0 by
# OptimizeAllConcat, its bits just left of the previous one's: redistribution._merge_gathers),
# the two count as one AllGather over both groups on the later gather's bytes.

#: largest device count (as bits) the fast path takes (its bit tables have 2^(bits+1) entries)
FAST_MAX_BITS = 16


@lru_cache(maxsize=65536)
def _bit_masks(layout: TensorLayout, rank: int, nbits: int):
    """Per tensor dimension, the mask of bits cutting it (bit ``x`` = ``1 << x``, ``x`` counted
    from the left of the device matrix), then the cuts, then the mask of the first bits of the
    device matrix's axes; ``None`` for an axis not a power of two."""
    masks = [0] * rank
    n, lo, starts = len(layout.device_matrix), 0, 0
    dim_of_axis = {n - 1 - m: d for d, m in enumerate(layout.tensor_map) if m != -1}
    for i, s in enumerate(layout.device_matrix):
        e = s.bit_length() - 1
        if s != 1 << e:
            return None
        if i in dim_of_axis:
            masks[dim_of_axis[i]] |= ((1 << e) - 1) << lo
        if e:
            starts |= 1 << lo
        lo += e
    return tuple(masks) + layout.cuts + (starts,) if lo == nbits else None


@lru_cache(maxsize=None)
def _bit_tables(nbits: int) -> tuple[np.ndarray, np.ndarray]:
    """Set bits and highest set bit (0 for 0) of every integer below ``2 << nbits`` (read-only)."""
    count = np.array([bin(i).count("1") for i in range(2 << nbits)], dtype=np.int32)
    high = np.array([max(i.bit_length() - 1, 0) for i in range(2 << nbits)], dtype=np.int32)
    for table in (count, high):
        table.flags.writeable = False
    return count, high


def _side(layouts, rank: int, nbits: int):
    """Arrays of one side: masks ``(rank, n)``, owned mask, same-dimension-as-left-neighbour
    mask, first bit per dimension (``-1`` uncut), cuts ``(rank, n)``, first bits of the device
    matrix's axes; ``None`` if not binary."""
    rows = [_bit_masks(x, rank, nbits) for x in layouts]
    if any(r is None for r in rows):
        return None
    both = np.array(rows, dtype=np.int32).T
    m, cuts, starts = both[:rank], both[rank:2 * rank], both[2 * rank]
    owned = np.bitwise_or.reduce(m, axis=0)
    same = np.bitwise_or.reduce(m & (m << 1), axis=0)
    low = m & -m
    first = np.where(m > 0, np.log2(np.maximum(low, 1)).astype(np.int32), -1)
    return m, owned, same, first, cuts, starts


#: gather programs kept (most recent last), each with the row/column index of its layouts
PROGRAMS_KEPT = 512
_PROGRAMS: "OrderedDict[tuple, tuple]" = OrderedDict()
_LAYOUT_IDS: dict = {}         # layout -> small int, for cheap set tests between blocks


def _layout_ids(layouts: tuple) -> tuple[int, ...]:
    if len(_LAYOUT_IDS) >= 1 << 17:
        _LAYOUT_IDS.clear()
        _PROGRAMS.clear()
    return tuple([_LAYOUT_IDS.setdefault(x, len(_LAYOUT_IDS)) for x in layouts])


def _gather_program(srcs: tuple, dsts: tuple, rank: int, nbits: int):
    """:func:`_build_gather_program`, memoised; a block of distinct layouts that are all rows
    and columns of a kept program is cut out of it (each pair's gathers do not depend on the
    other pairs, so the restriction is the sub-block's program: same steps per pair, same
    order)."""
    a, b = _layout_ids(srcs), _layout_ids(dsts)
    key = (a, b, rank, nbits)
    got = _PROGRAMS.get(key)
    if got is not None:
        _PROGRAMS.move_to_end(key)
        return got[0]
    program = None
    sa, sb = frozenset(a), frozenset(b)
    if len(sa) == len(a) and len(sb) == len(b):
        for (_, b2, r2, n2), (prog, rows_of, cols_of) in reversed(_PROGRAMS.items()):
            if (r2, n2) == (rank, nbits) and prog is not None and sa <= rows_of.keys() and \
                    sb <= cols_of.keys():
                program = _restrict(prog, [rows_of[x] for x in a], [cols_of[x] for x in b],
                                    len(b2))
                break
    if program is None:
        program = _build_gather_program(srcs, dsts, rank, nbits)
    _PROGRAMS[key] = (program, {x: i for i, x in enumerate(a)}, {x: j for j, x in enumerate(b)})
    if len(_PROGRAMS) > PROGRAMS_KEPT:
        _PROGRAMS.popitem(last=False)
    return program


def _restrict(program, rows: list[int], cols: list[int], width: int):
    """The gather program of the sub-block ``rows`` × ``cols`` of ``program`` (whose blocks
    have ``width`` columns)."""
    cut_a, steps = program
    where = np.full(cut_a.shape[1] * width, -1, dtype=np.int64)
    r, c = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    where[(r[:, None] * width + c[None, :]).reshape(-1)] = np.arange(len(rows) * len(cols))
    out = []
    for at, _, *rest in steps:
        new = where[at]
        keep = new >= 0
        if not keep.any():
            continue
        at2 = new[keep]
        out.append((at2.astype(np.int32), (at2 // len(cols)).astype(np.int32),
                    *(x[keep] for x in rest)))
    sub = np.ascontiguousarray(cut_a[:, r, :])
    for arr in (sub,) + tuple(x for step in out for x in step):
        arr.flags.writeable = False
    return sub, out


def _build_gather_program(srcs: tuple, dsts: tuple, rank: int, nbits: int):
    """The shape-independent part of :func:`gather_seconds_matrix`: the sources' cuts
    ``(rank, na, 1)`` and the AllGathers in order, each as ``(at, row, run, grown, low, axis0,
    joins, dim)``: the flat indices of the ``na × nb`` pairs where it happens, their source rows,
    its bits there, the bits gathered up to and including it, its lowest rank bit, whether
    ``OptimizeAllConcat`` moves it to axis 0 as far as the layouts decide (the rest, the
    source's earlier dimensions holding one element per device, depends on the shape: checked
    in :func:`gather_seconds_matrix`), whether its bits sit just left (major) of the previous
    gather's (``MergeAllConcat``'s adjacency, :func:`redistribution._merge_gathers`), and its
    source dimension (compact dtypes, widened to int64 where the arithmetic reads them);
    ``None`` when a layout is not binary. :func:`_gather_program` keeps
    them: micro-batch sizes and layers share their layouts, not their shapes."""
    a, b = _side(list(srcs), rank, nbits), _side(list(dsts), rank, nbits)
    if a is None or b is None:
        return None
    sa, owned_a, same_a, first_a, cut_a, _ = (x[..., :, None] for x in a)
    sb, owned_b, _, first_b, _, starts_b = (x[..., None, :] for x in b)
    popcount, highbit = _bit_tables(nbits)
    pairs = (len(srcs), len(dsts))
    grown = np.zeros(pairs[0] * pairs[1], dtype=np.int32)    # bits gathered so far (flat)
    steps = []
    # MergeAllConcat (redistribution._merge_gathers), the layouts' part of the rule; the shape's
    # part (the tensor's earlier dimensions hold one element per device) is applied per shape
    src_m = np.stack([np.broadcast_to(sa[d], pairs).reshape(-1) for d in range(rank)]) \
        if rank else np.zeros((0, pairs[0] * pairs[1]), dtype=np.int32)
    any_m = src_m | (np.stack([np.broadcast_to(sb[d], pairs).reshape(-1) for d in range(rank)])
                     if rank else src_m)
    left = np.zeros(pairs[0] * pairs[1], dtype=np.int32)     # source bits not gathered (flat)
    left[:] = np.bitwise_or.reduce(src_m, axis=0) if rank else 0
    prev_first = np.full(pairs[0] * pairs[1], -2, dtype=np.int32)
    done_dims = np.zeros(pairs[0] * pairs[1], dtype=np.int32)   # dimensions gathered so far

    def note_merge(at, run, last, regather, source_dim):
        first = (last - run + 1).astype(np.int64)
        if source_dim is None:     # the source dimension holding each gather's first bit
            dim = np.zeros(at.size, dtype=np.int64)
            for d in range(rank):
                dim[((src_m[d, at] >> first) & 1) == 1] = d
        else:
            dim = np.full(at.size, source_dim, dtype=np.int64)
        before = any_m[dim, at] & ((1 << first) - 1)
        cut_now = src_m[dim, at] & left[at]
        # a dimension before ``dim`` already gathered holds more than one element per device
        clean = (done_dims[at] & ((1 << dim) - 1)) == 0
        axis0 = ((before & ~cut_now) == 0) & ((dim > 0) | (before != 0)) & clean
        joins = last + 1 == prev_first[at]
        prev_first[at] = first
        done_dims[at] |= (1 << dim).astype(np.int32)
        if not regather:      # an order gather is sliced back onto its dimension (redistribute)
            left[at] &= ~(((1 << run.astype(np.int64)) - 1) << first).astype(np.int32)
        return axis0, joins, dim.astype(np.int8)

    def gather(at, run, last, regather=False, source_dim=None):
        """One AllGather over ``run`` bits ending at bit ``last`` (its most minor) at the flat
        pair indices ``at``, on the slice grown so far; ``source_dim``: the source dimension of
        its bits where the caller knows it (``None``: looked up)."""
        merge_part = note_merge(at, run, last, regather, source_dim)
        grown[at] += run
        steps.append((at.astype(np.int32), (at // pairs[1]).astype(np.int32),
                      run.astype(np.int8), grown[at].astype(np.int8),
                      (nbits - 1 - last).astype(np.int8)) + merge_part)

    def flat(x):
        return np.broadcast_to(x, pairs).reshape(-1)

    def runs(pred, breaks=0):
        """Starts and ends (bit masks) of the runs of adjacent ``pred`` bits of one source
        dimension; a run does not go on into a bit of ``breaks``."""
        # bit x continues the run ending at bit x-1
        cont = pred & (pred << 1) & same_a & ~breaks
        return pred & ~cont, pred & ~(cont >> 1)

    # 1. order: one gather per dimension, in dimension order
    for d in range(rank):
        common = sa[d] & sb[d]
        at = np.flatnonzero(flat((common != 0) & (first_a[d] != first_b[d])))
        if at.size:
            gather(at, flat(popcount[common])[at], flat(highbit[common])[at], True, d)

    def by_dimension(starts, ends, masks, of_source):
        """Gather the runs, by the dimension of ``masks`` holding their first bit, last
        dimension first, then highest first bit first (on the pairs still holding a run);
        ``of_source``: ``masks`` are the source's (that dimension is the gathers' own)."""
        all_ends = flat(ends)
        for d in reversed(range(rank)):
            left = flat(starts & masks[d])
            at = np.flatnonzero(left)
            left, end = left[at], all_ends[at]
            while at.size:
                high_start = np.left_shift(1, highbit[left])
                after = end & ~(high_start - 1)  # ends at or above the start
                gather(at, popcount[((after & -after) << 1) - high_start],
                       highbit[after & -after], source_dim=d if of_source else None)
                left = left ^ high_start
                keep = left != 0
                at, left, end = at[keep], left[keep], end[keep]

    # 2. concat: by source dimension
    # (a source axis the destination's device matrix splits is gathered part by part)
    by_dimension(*runs(owned_a & ~owned_b, starts_b), sa, True)
    # 3. permute: by destination dimension
    same_dim = np.bitwise_or.reduce(sa & sb, axis=0)
    by_dimension(*runs(owned_a & owned_b & ~same_dim), sb, False)
    for arr in (cut_a,) + tuple(x for step in steps for x in step):
        arr.flags.writeable = False
    return cut_a, steps


def _exact_in_float64(values: np.ndarray) -> bool:
    """Whether every int64 in ``values`` (each below ``2**62``) converts to float64 exactly:
    its odd part below ``2**53`` (IEEE 754 double: 53-bit significand)."""
    return bool(np.array_equal(values.astype(np.float64).astype(np.int64), values))


def gather_seconds_matrix(shape, elem_bytes: int, srcs: list[TensorLayout],
                          dsts: list[TensorLayout], machine, backward: bool = True):
    """Seconds of :func:`~smsg_ms.cost.redistribution.redistribute` (``enable_alltoall`` off)
    for every pair of ``srcs`` ×
    ``dsts``, as ``CostModel.seconds`` sums its collectives: ``Σ_i`` over the forward
    AllGathers in order of :func:`~smsg_ms.cost.api.collective_seconds` (``S_i`` bytes, the
    group placed on ``machine``'s levels from its rank bits), doubled when ``backward`` (each
    AllGather's ReduceScatter twin costs the same). Two adjacent AllGathers that MindSpore's
    ``MergeAllConcat`` joins (``tensor_layout/tensor_transform.cc``,
    :func:`~smsg_ms.cost.redistribution._merge_gathers`) count as one over both groups, on the
    later one's ``S``. Bit-for-bit equal to the reference
    (tests/test_redistribution_fast.py), computed in numpy over all pairs at once.

    Args:
        shape: global shape (int elements per dimension).
        elem_bytes: bytes per element.
        srcs, dsts: layouts of one device count.
        machine: a :class:`~smsg_ms.cost.hardware.Machine`.
        backward: the tensor carries a gradient (``CostModel.carries_gradient``), so the
            backward ReduceScatters are counted; ``False`` counts the forward part only.

    Returns:
        ``(len(srcs), len(dsts))`` float array of seconds, or ``None`` when the fast path does
        not apply (device count not a power of two, 1 or above ``2**FAST_MAX_BITS``, a level
        size not a power of two, a symbolic dimension, a numerator ``(k − 1)·S`` of
        :func:`~smsg_ms.cost.api.collective_seconds` not exact in float64, a tensor of
        ``2**62`` bytes × devices or more): use the reference then.
    """
    if not srcs or not dsts or any(not isinstance(s, int) or s < 1 for s in shape):
        return None
    devices = srcs[0].devices
    nbits = devices.bit_length() - 1
    if not 1 <= nbits <= FAST_MAX_BITS or devices != 1 << nbits or \
            any(x.devices != devices for x in srcs + dsts):
        return None
    level_bits = []
    for block in machine.block_sizes():
        if block is not None and block & (block - 1):
            return None
        level_bits.append(nbits if block is None else min(block.bit_length() - 1, nbits))
    rank = len(shape)
    # collective_seconds divides (k − 1)·S by a power of two: Python ints (the reference) round
    # the exact quotient once, numpy converts both to float64 first, the same where (k − 1)·S
    # is exact in float64. Below 2^53 always; up to 2^62 (no int64 overflow) checked per step.
    checked = elem_bytes * prod(shape) * devices >= 2 ** 53
    if elem_bytes * prod(shape) * devices >= 2 ** 62:
        return None
    program = _gather_program(tuple(srcs), tuple(dsts), rank, nbits)
    if program is None:
        return None
    cut_a, steps = program
    dims = np.array(shape, dtype=np.int64)
    local = dims[:, None] // cut_a[:, :, 0]                                        # (rank, na)
    src_bytes = elem_bytes * np.prod(local, axis=0)                                # (na,)
    # ones_before[d, row]: the source slice holds one element on every dimension before d
    ones_before = np.vstack([np.ones((1, len(srcs)), dtype=bool),
                             np.logical_and.accumulate(local == 1, axis=0)])
    size = len(srcs) * len(dsts)
    total = np.zeros(size)
    # the AllGather ending each pair's list so far, not yet added: its seconds, lowest rank
    # bit, and whether it was moved to axis 0 (MergeAllConcat may grow it by the next gather)
    pending, pending_low = np.zeros(size), np.zeros(size, dtype=np.int64)
    pending_axis0 = np.zeros(size, dtype=bool)
    links = machine.links()
    for at, row, run, grown, low, axis0, joins, dim in steps:   # each pair's gathers in order
        axis0 = axis0 & ones_before[dim.astype(np.int64), row]
        merged = axis0 & joins & pending_axis0[at]
        # a merged AllGather spans both groups (contiguous rank bits) on the later, larger S
        lo = np.where(merged, pending_low[at], low.astype(np.int64))
        hi = low.astype(np.int64) + run.astype(np.int64)
        fanout, below = [], 0
        for top in level_bits:           # rank bits [lo, hi) falling in [below, top)
            inside = np.maximum(np.minimum(hi, max(top, below)) - np.maximum(lo, below), 0)
            fanout.append(np.left_shift(1, inside))
            below = max(top, below)
        full = src_bytes[row] << grown.astype(np.int64)
        if checked and not all(_exact_in_float64((f - 1) * full) for f in fanout):
            return None
        t = collective_seconds("AllGather", fanout, full, links)
        total[at] += np.where(merged, 0.0, pending[at])    # + 0.0 leaves a sum unchanged
        pending[at], pending_low[at], pending_axis0[at] = t, lo, axis0
    total = (total + pending).reshape(len(srcs), len(dsts))
    return total + total if backward else total
