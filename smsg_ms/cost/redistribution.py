"""Tensor redistribution: the collectives MindSpore inserts to turn one layout into another
(``frontend/parallel/tensor_layout/redistribution_operator_infer.cc``).

Both device matrices are first refined to a common one (``UnifyDeviceArrangement``: the union of
their prefix products), so each tensor dimension is cut by a list of unified axes. Then, per
unified axis, in the order the dry-run shows:

1. *split* (axis unused by the source, used by the destination): a local slice, no collective;
2. *concat* (axis used by the source, unused by the destination): AllGather over the axis;
3. *permute* (the axis cuts another dimension in the source): AlltoAll over the axis when
   ``enable_alltoall`` is on, else AllGather then slice (MindSpore's default). With AlltoAll an
   axis also moves when it stays on its dimension at another offset (another sub-dimension of
   MindSpore's expanded shape), and a run of axes splits into one AlltoAll per destination
   dimension: both seen in the dry-run on the moe's dispatch and combine (``tests/test_moe.py``).

Concat before permute: ReLU (8,1) → (1,4) gathers the axis the destination replicates (2 KiB)
before moving the others to the columns (8 KiB), and (8,1) → (1,2), (2,4) → (1,2),
(1,8) → (2,1) likewise (``tests/test_cost_vs_mindspore.py``).

Adjacent unified axes that come from one source axis and take the same action form one
collective. Every slice (split, and the slice after a permute's AllGather) is taken after all the
AllGathers, so each AllGather carries the tensor as the previous gathers left it, unsliced: in
the dry-run MindSpore's gathers grow that way (``tests/test_cost_vs_mindspore.py``: Transpose
(2,4,1) → ReLU (4,2,1) gathers 4, 8, 16 KiB; a Gather row split (4,1) → ReLU (2,4) gathers the
whole first dimension before slicing). Permutes run from the destination's last dimension
and, within a dimension, from its minor axis: MindSpore iterates the entries of its expanded
tensor map (one per sub-dimension) from the last (``RedistributionOperatorInfer::
InferRedistributionOperator``, observed order of its hash map), so a 3-D (2,1,4) → (1,8,1)
gathers dimension 2 before dimension 0. Two adjacent gathers that MindSpore moves to axis 0
of its expanded shape become one AllGather (:func:`_merge_gathers`, ``MergeAllConcat``):
ReLU (8,1) → (2,2) gathers over 4 at once (docs/known-differences.md, D3).
Backward (bprop) collectives: AllGather → ReduceScatter of the same tensor, AlltoAll →
AlltoAll, slice → none (seen in the dry-run, ``tests/test_cost_vs_mindspore.py``).

Sizes: ``full_bytes`` of an AllGather/ReduceScatter is the gathered tensor per device (``S`` of
:func:`~smsg_ms.cost.api.ring_volume`); of an AlltoAll, the per-device buffer exchanged.
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from math import prod

import numpy as np

from .api import Collective, collective_seconds
from .layout import TensorLayout, split_at


def _prefixes(matrix) -> list[int]:
    out, p = [], 1
    for s in matrix:
        p *= s
        out.append(p)
    return out


def unify(a: tuple[int, ...], b: tuple[int, ...]):
    """Common refinement of two device matrices of equal product.

    Returns:
        ``(unified, spans_a, spans_b)``: unified axis sizes (left to right), and for each axis of
        ``a`` / ``b`` the list of unified axis indices it spans; ``None`` when the refinement
        does not exist (e.g. ``(2, 3)`` and ``(3, 2)``).
    """
    sizes = split_at(set(_prefixes(a)) | set(_prefixes(b)))
    if sizes is None:
        return None
    cum = _prefixes(sizes)

    def spans(m):
        out, lo = [], 1
        for hi in _prefixes(m):
            out.append([i for i, c in enumerate(cum) if lo < c <= hi])
            lo = hi
        return out

    return sizes, spans(a), spans(b)


def _dim_axes(layout: TensorLayout, spans) -> list[list[int]]:
    n = len(layout.device_matrix)
    return [[] if m == -1 else list(spans[n - 1 - m]) for m in layout.tensor_map]


def _owner(dim_axes) -> dict[int, int]:
    return {x: d for d, axes in enumerate(dim_axes) for x in axes}


def _offset_owners(s_axes, d_axes, sizes):
    """Owners for the AlltoAll path: an axis is where it cuts, ``(dimension, product of the
    sizes of the axes before it on that dimension)``, the sub-dimension of MindSpore's expanded
    tensor shape it cuts (``TensorRedistribution``'s expanded tensor maps); an axis cutting one
    dimension at two offsets moves between sub-dimensions, a permute. Seen in the dry-run
    (``tests/test_moe.py``): ``(E, B, C, h)`` cut ``(1, 8, 1, 1)`` → ``(4, 2, 1, 1)`` is two
    AlltoAlls, of 4 (B → E) and of 2 (B's minor half → its major half), no AllGather."""
    def owners(dim_axes) -> dict:
        out: dict = {}
        for d, axes in enumerate(dim_axes):
            before = 1
            for x in axes:
                out[x] = (d, before)
                before *= sizes[x]
        return out

    return owners(s_axes), owners(d_axes)


def redistribute(shape, elem_bytes: int, src: TensorLayout, dst: TensorLayout, tensor: str = "",
                 enable_alltoall: bool = False) -> list[Collective]:
    """Forward and backward collectives turning ``src`` into ``dst`` for a tensor of global
    ``shape`` (elements; str dims allowed) and ``elem_bytes`` bytes per element.

    Returns:
        ``[]`` when the placements are equal or only slicing is needed.

    Raises:
        ValueError: the layouts' ranks or device counts differ.
    """
    if len(src.tensor_map) != len(shape) or len(dst.tensor_map) != len(shape):
        raise ValueError(f"redistribution of {tensor or 'tensor'}: rank {len(shape)} does not "
                         f"match layouts {src} and {dst}")
    if src.devices != dst.devices:
        raise ValueError(f"redistribution of {tensor or 'tensor'}: layouts span {src.devices} "
                         f"and {dst.devices} devices")
    a, b = src.normalized(), dst.normalized()
    if a == b:
        return []
    unified = unify(a.device_matrix, b.device_matrix)
    if unified is None:  # no common refinement: gather everything, then slice
        a = TensorLayout(a.device_matrix, a.tensor_map)
        sizes = list(a.device_matrix)
        s_axes = _dim_axes(a, [[i] for i in range(len(sizes))])
        d_axes = [[] for _ in shape]
        spans_src = [[i] for i in range(len(sizes))]
    else:
        sizes, spans_src, spans_dst = unified
        s_axes, d_axes = _dim_axes(a, spans_src), _dim_axes(b, spans_dst)
    src_axis_of = {x: i for i, span in enumerate(spans_src) for x in span}
    local = [s // c if isinstance(s, int) else s for s, c in zip(shape, a.cuts)]
    cur = [list(x) for x in s_axes]
    out: list[Collective] = []

    def nbytes():
        return prod(local) * elem_bytes

    def span(axes):
        """The group's ranks over the unified device matrix (rank = row-major index)."""
        return tuple((sizes[x], prod(sizes[x + 1:])) for x in sorted(axes) if sizes[x] > 1)

    gathered = []   # (axes, concat on axis 0 after MindSpore's OptimizeAllConcat), per AllGather

    def gather(dim, axes, kind_reason):
        g = prod(sizes[x] for x in axes)
        gathered.append((list(axes), _moved_to_axis_0(dim, axes)))
        local[dim] = local[dim] * g
        fb = nbytes()
        out.append(Collective("AllGather", g, fb, "forward", tensor, kind_reason, span(axes)))
        out.append(Collective("ReduceScatter", g, fb, "backward", tensor,
                              "bprop of the redistribution AllGather", span(axes)))
        for x in axes:
            cur[dim].remove(x)

    def _moved_to_axis_0(dim, axes):
        """MindSpore's ``OptimizeAllConcat`` rewrites this gather as Reshape → AllGather on axis
        0 → Reshape: it concatenates on an axis > 0 of MindSpore's expanded local shape (one
        sub-dimension per unified axis cutting a dimension in either layout, major first,
        then the remainder) and every axis before it is 1 (the tensor's earlier dimensions hold
        one element per device; the sub-dimensions of ``dim`` more major than ``axes`` are
        still cut)."""
        first = min(axes)
        before = [x for x in set(s_axes[dim]) | set(d_axes[dim]) if x < first]
        return (dim > 0 or bool(before)) and all(x in cur[dim] for x in before) and all(
            isinstance(n, int) and n == 1 for n in local[:dim])

    def groups(pred):
        """Runs of adjacent unified axes from one source axis satisfying ``pred`` (with AlltoAll,
        also to one destination dimension, or none: one AlltoAll per destination, as in the
        dry-run)."""
        runs = []
        for x in range(len(sizes)):
            if not pred(x):
                continue
            if runs and runs[-1][-1] == x - 1 and src_axis_of.get(x) == src_axis_of.get(x - 1) \
                    and (not enable_alltoall or dst_owner.get(x) == dst_owner.get(x - 1)):
                runs[-1].append(x)
            else:
                runs.append([x])
        return runs

    src_owner, dst_owner = _owner(s_axes), _owner(d_axes)
    # where an axis cuts: its dimension; with AlltoAll, its sub-dimension (_offset_owners)
    src_at, dst_at = _offset_owners(s_axes, d_axes, sizes) if enable_alltoall else (src_owner,
                                                                                    dst_owner)
    # an axis kept on the same dimension but at another position changes the slices: re-gather
    for d in range(len(shape)) if not enable_alltoall else ():
        common = [x for x in s_axes[d] if x in d_axes[d]]
        if common != [x for x in d_axes[d] if x in s_axes[d]] or (
                common and s_axes[d][:len(common)] != d_axes[d][:len(common)]):
            for x in common:
                src_owner.pop(x, None)
                dst_owner.pop(x, None)
            gather(d, list(common), "axis order within a dimension differs")
            cur[d].extend(x for x in common if x in d_axes[d])  # sliced again after the gathers
    # 1. split: axis free in the source: a slice, taken after every gather (module doc); with
    # AlltoAll the slice comes first, as MindSpore's split step
    if enable_alltoall:
        for x in range(len(sizes)):
            if x not in src_owner and x in dst_owner:
                d = dst_owner[x]
                local[d] = local[d] // sizes[x] if isinstance(local[d], int) else local[d] / sizes[x]
    # 2. concat: axis used by the source only (before the permutes, as in the dry-run)
    # from the source's last dimension, minor axis first, as the permutes (the dry-run's
    # Reshape bank: (4,1,2,1) -> replicated gathers dimension 2 before dimension 0)
    concats = groups(lambda x: x in src_owner and x not in dst_owner)
    concats.sort(key=lambda run: (-src_owner[run[0]], -s_axes[src_owner[run[0]]].index(run[0])))
    for run in concats:
        gather(src_owner[run[0]], run, f"un-split dim {src_owner[run[0]]}")
    # 3. permute: axis moves from one dimension to another; in MindSpore's order, the
    # destination's sub-dimensions from the last one (minor first)
    moves = groups(lambda x: x in src_owner and x in dst_owner and src_at[x] != dst_at[x])
    moves.sort(key=lambda run: (-dst_owner[run[0]], -d_axes[dst_owner[run[0]]].index(run[0])))
    for run in moves:
        ds, dd = src_owner[run[0]], dst_owner[run[0]]
        g = prod(sizes[x] for x in run)
        if enable_alltoall:
            fb = nbytes()
            out.append(Collective("AlltoAll", g, fb, "forward", tensor,
                                  f"move cut from dim {ds} to dim {dd}" if ds != dd else
                                  f"move cut within dim {ds}", span(run)))
            out.append(Collective("AlltoAll", g, fb, "backward", tensor,
                                  "bprop of the redistribution AlltoAll", span(run)))
            local[ds] = local[ds] * g
            for x in run:
                cur[ds].remove(x)
            local[dd] = local[dd] // g if isinstance(local[dd], int) else local[dd] / g
        else:  # gather now, slice after every gather
            gather(ds, run, f"move cut from dim {ds} to dim {dd} (AllGather + slice)")
    return out if enable_alltoall or unified is None else _merge_gathers(out, gathered, sizes)


def _merge_gathers(out: list[Collective], gathered, sizes) -> list[Collective]:
    """MindSpore's ``TensorTransform::MergeAllConcat`` (``tensor_layout/tensor_transform.cc``,
    run by ``OptimizeTensorRedistributionOperatorList`` → ``ReorderAndMergeRedistributionOp``
    on every static-shape redistribution made of AllGathers, slices and reshapes): after
    ``OptimizeAllConcat`` has rewritten each AllGather on an axis > 0 whose expanded local
    shape is all ones before that axis as Reshape → AllGather on axis 0 → Reshape, and
    ``EliminateRedundancyReshape`` has dropped the Reshape pair between two such rewritten
    gathers (the second's Reshape undoes the first's), two adjacent AllGathers on axis 0 whose
    second group's rank stride is the first's stride times its size (its unified axes sit just
    left of the first's) become one AllGather over both groups. A gather already on axis 0
    keeps the previous one's Reshape in between and is not merged: ReLU (8,1) → (1,4) stays
    two AllGathers, (8,1) → (2,2) becomes one over 4 (``tests/test_cost_vs_mindspore.py``).
    ``out`` is :func:`redistribute`'s list (each forward AllGather followed by its
    ReduceScatter twin), ``gathered`` the unified axes of each AllGather and whether
    ``OptimizeAllConcat`` rewrites it."""
    merged: list[Collective] = []
    last = None                          # (axes, on axis 0) of the AllGather ending ``merged``
    for (fwd, bwd), (axes, axis0) in zip(zip(out[::2], out[1::2]), gathered):
        if last is not None and axis0 and last[1] and max(axes) + 1 == min(last[0]):
            both = sorted(last[0] + axes)
            g = prod(sizes[x] for x in both)
            span = tuple((sizes[x], prod(sizes[x + 1:])) for x in both if sizes[x] > 1)
            reason = f"{merged[-2].reason} + {fwd.reason} (one AllGather, MergeAllConcat)"
            merged[-2:] = [Collective("AllGather", g, fwd.full_bytes, "forward", fwd.tensor,
                                      reason, span),
                           Collective("ReduceScatter", g, fwd.full_bytes, "backward", bwd.tensor,
                                      bwd.reason, span)]
            last = (both, True)
        else:
            merged += [fwd, bwd]
            last = (axes, axis0)
    return merged


# ---- fast path: seconds of many redistributions at once ------------------------------------------
#
# For a power-of-two device count every axis size is a power of two, so every device matrix
# refines to ``log2(devices)`` binary axes ("bits", left to right) and ``unify`` never fails.
# A layout becomes, per tensor dimension, the set of bits cutting it (a bit mask; one contiguous
# run, since a dimension is cut by one axis). Redistribution actions are constant on each unified
# axis and :func:`redistribute`'s runs are unions of unified axes, so with ``enable_alltoall``
# off it reads, in bits, as a sequence of AllGathers (no slice comes before any of them):
#
# 1. order, dimensions ascending: a dimension cut in both layouts on overlapping bits that start
#    at different bits gathers the overlap (which leaves both owners; it is on one dimension in
#    both layouts, so no rule below sees it);
# 2. concat: runs of adjacent bits cutting one source dimension, replicated in the destination,
#    ordered by that source dimension, last first, then by first bit, highest (minor) first;
# 3. permute: runs of adjacent bits cutting one source dimension and another destination
#    dimension, ordered by the destination dimension of the run's first bit, last dimension
#    first, then by that first bit, highest (minor) first.
#
# Each AllGather carries the source slice grown by every gather so far, so its bytes are the
# source slice's shifted left by the bits gathered up to and including it. With a gradient,
# each has its ReduceScatter twin in backward, so seconds = 2 · Σ t over the forward gathers in
# order, t = (g−1)·S/g / bandwidth + latency, the sum CostModel.seconds forms over the same list
# (float additions in the same order; adding 0.0 changes no sum); without, Σ t.

#: largest device count (as bits) the fast path takes (its bit tables have 2^(bits+1) entries)
FAST_MAX_BITS = 16


@lru_cache(maxsize=65536)
def _bit_masks(layout: TensorLayout, rank: int, nbits: int):
    """Per tensor dimension, the mask of bits cutting it (bit ``x`` = ``1 << x``, ``x`` counted
    from the left of the device matrix), then the cuts; ``None`` for an axis not a power of two."""
    masks = [0] * rank
    n, lo = len(layout.device_matrix), 0
    dim_of_axis = {n - 1 - m: d for d, m in enumerate(layout.tensor_map) if m != -1}
    for i, s in enumerate(layout.device_matrix):
        e = s.bit_length() - 1
        if s != 1 << e:
            return None
        if i in dim_of_axis:
            masks[dim_of_axis[i]] |= ((1 << e) - 1) << lo
        lo += e
    return tuple(masks) + layout.cuts if lo == nbits else None


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
    mask, first bit per dimension (``-1`` uncut), cuts ``(rank, n)``; ``None`` if not binary."""
    rows = [_bit_masks(x, rank, nbits) for x in layouts]
    if any(r is None for r in rows):
        return None
    both = np.array(rows, dtype=np.int32).T
    m, cuts = both[:rank], both[rank:]
    owned = np.bitwise_or.reduce(m, axis=0)
    same = np.bitwise_or.reduce(m & (m << 1), axis=0)
    low = m & -m
    first = np.where(m > 0, np.log2(np.maximum(low, 1)).astype(np.int32), -1)
    return m, owned, same, first, cuts


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
    cut_a, steps, merging = program
    where = np.full(cut_a.shape[1] * width, -1, dtype=np.int64)
    r, c = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    where[(r[:, None] * width + c[None, :]).reshape(-1)] = np.arange(len(rows) * len(cols))
    out = []
    for at, _, run, grown, low in steps:
        new = where[at]
        keep = new >= 0
        if not keep.any():
            continue
        at2 = new[keep]
        out.append((at2.astype(np.int32), (at2 // len(cols)).astype(np.int32), run[keep],
                    grown[keep], low[keep]))
    sub = np.ascontiguousarray(cut_a[:, r, :])
    merging = np.ascontiguousarray(merging.reshape(-1, width)[np.ix_(r, c)].reshape(-1))
    for arr in (sub, merging) + tuple(x for step in out for x in step):
        arr.flags.writeable = False
    return sub, out, merging


def _build_gather_program(srcs: tuple, dsts: tuple, rank: int, nbits: int):
    """The shape-independent part of :func:`gather_seconds_matrix`: the sources' cuts
    ``(rank, na, 1)`` and the AllGathers in order, each as ``(at, row, run, grown, low)``: the flat
    indices of the ``na × nb`` pairs where it happens, their source rows, its bits there,
    the bits gathered up to and including it and its lowest rank bit (compact dtypes, widened to int64 where the
    arithmetic reads them); ``None`` when a layout is not binary. :func:`_gather_program` keeps
    them: micro-batch sizes and layers share their layouts, not their shapes."""
    a, b = _side(list(srcs), rank, nbits), _side(list(dsts), rank, nbits)
    if a is None or b is None:
        return None
    sa, owned_a, same_a, first_a, cut_a = (x[..., :, None] for x in a)
    sb, owned_b, _, first_b, _ = (x[..., None, :] for x in b)
    popcount, highbit = _bit_tables(nbits)
    pairs = (len(srcs), len(dsts))
    grown = np.zeros(pairs[0] * pairs[1], dtype=np.int32)    # bits gathered so far (flat)
    steps = []
    # MergeAllConcat candidates (_merge_gathers), a superset: the shape's part of the rule (the
    # tensor's earlier dimensions hold one element per device) is taken as true
    src_m = np.stack([np.broadcast_to(sa[d], pairs).reshape(-1) for d in range(rank)]) \
        if rank else np.zeros((0, pairs[0] * pairs[1]), dtype=np.int32)
    any_m = src_m | (np.stack([np.broadcast_to(sb[d], pairs).reshape(-1) for d in range(rank)])
                     if rank else src_m)
    left = np.zeros(pairs[0] * pairs[1], dtype=np.int32)     # source bits not gathered (flat)
    left[:] = np.bitwise_or.reduce(src_m, axis=0) if rank else 0
    prev_first = np.full(pairs[0] * pairs[1], -2, dtype=np.int32)
    prev_axis0 = np.zeros(pairs[0] * pairs[1], dtype=bool)
    merging = np.zeros(pairs[0] * pairs[1], dtype=bool)

    def note_merge(at, run, last, regather):
        first = (last - run + 1).astype(np.int64)
        dim = np.zeros(at.size, dtype=np.int64)
        for d in range(rank):
            dim[((src_m[d, at] >> first) & 1) == 1] = d
        before = any_m[dim, at] & ((1 << first) - 1)
        cut_now = src_m[dim, at] & left[at]
        axis0 = ((before & ~cut_now) == 0) & ((dim > 0) | (before != 0))
        merging[at] |= axis0 & prev_axis0[at] & (last + 1 == prev_first[at])
        prev_first[at], prev_axis0[at] = first, axis0
        if not regather:      # an order gather is sliced back onto its dimension (redistribute)
            left[at] &= ~(((1 << run.astype(np.int64)) - 1) << first).astype(np.int32)

    def gather(at, run, last, regather=False):
        """One AllGather over ``run`` bits ending at bit ``last`` (its most minor) at the flat
        pair indices ``at``, on the slice grown so far."""
        note_merge(at, run, last, regather)
        grown[at] += run
        steps.append((at.astype(np.int32), (at // pairs[1]).astype(np.int32),
                      run.astype(np.int8), grown[at].astype(np.int8),
                      (nbits - 1 - last).astype(np.int8)))

    def flat(x):
        return np.broadcast_to(x, pairs).reshape(-1)

    def runs(pred):
        """Starts and ends (bit masks) of the runs of adjacent ``pred`` bits of one source
        dimension."""
        cont = pred & (pred << 1) & same_a        # bit x continues the run ending at bit x-1
        return pred & ~cont, pred & ~(cont >> 1)

    # 1. order: one gather per dimension, in dimension order
    for d in range(rank):
        common = sa[d] & sb[d]
        at = np.flatnonzero(flat((common != 0) & (first_a[d] != first_b[d])))
        if at.size:
            gather(at, flat(popcount[common])[at], flat(highbit[common])[at], True)

    def by_dimension(starts, ends, masks):
        """Gather the runs, by the dimension of ``masks`` holding their first bit, last
        dimension first, then highest first bit first (on the pairs still holding a run)."""
        all_ends = flat(ends)
        for d in reversed(range(rank)):
            left = flat(starts & masks[d])
            at = np.flatnonzero(left)
            left, end = left[at], all_ends[at]
            while at.size:
                high_start = np.left_shift(1, highbit[left])
                after = end & ~(high_start - 1)  # ends at or above the start
                gather(at, popcount[((after & -after) << 1) - high_start],
                       highbit[after & -after])
                left = left ^ high_start
                keep = left != 0
                at, left, end = at[keep], left[keep], end[keep]

    # 2. concat: by source dimension
    by_dimension(*runs(owned_a & ~owned_b), sa)
    # 3. permute: by destination dimension
    same_dim = np.bitwise_or.reduce(sa & sb, axis=0)
    by_dimension(*runs(owned_a & owned_b & ~same_dim), sb)
    for arr in (cut_a, merging) + tuple(x for step in steps for x in step):
        arr.flags.writeable = False
    return cut_a, steps, merging


def gather_seconds_matrix(shape, elem_bytes: int, srcs: list[TensorLayout],
                          dsts: list[TensorLayout], machine, backward: bool = True):
    """Seconds of :func:`redistribute` (``enable_alltoall`` off) for every pair of ``srcs`` ×
    ``dsts``, as ``CostModel.seconds`` sums its collectives: ``Σ_i`` over the forward
    AllGathers in order of :func:`~smsg_ms.cost.api.collective_seconds` (``S_i`` bytes, the
    group placed on ``machine``'s levels from its rank bits), doubled when ``backward`` (each
    AllGather's ReduceScatter twin costs the same). Bit-for-bit equal to the reference
    (tests/test_redistribution_fast.py), computed in numpy over all pairs at once.

    Args:
        shape: global shape (int elements per dimension).
        elem_bytes: bytes per element.
        srcs, dsts: layouts of one device count.
        machine: a :class:`~smsg_ms.cost.hardware.Machine`.
        backward: the tensor carries a gradient (``CostModel.carries_gradient``), so the
            backward ReduceScatters are counted; ``False`` counts the forward part only.

    Returns:
        ``(len(srcs), len(dsts))`` float array of seconds, NaN for the pairs where MindSpore may
        merge two AllGathers into one (:func:`_merge_gathers`; the part of its rule that depends
        on the shape is not in the fast path: use the reference there), or ``None`` when the fast path does
        not apply (device count not a power of two, 1 or above ``2**FAST_MAX_BITS``, a level
        size not a power of two, a symbolic dimension, sizes that could lose precision in
        float64): use the reference then.
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
    if elem_bytes * prod(shape) * devices >= 2 ** 53:   # keep int → float64 conversions exact
        return None
    program = _gather_program(tuple(srcs), tuple(dsts), rank, nbits)
    if program is None:
        return None
    cut_a, steps, merging = program
    dims = np.array(shape, dtype=np.int64)
    src_bytes = elem_bytes * np.prod(dims[:, None] // cut_a[:, :, 0], axis=0)    # (na,)
    total = np.zeros(len(srcs) * len(dsts))
    links = machine.links()
    for at, row, run, grown, low in steps:   # each pair adds its gathers in order, as before
        lo = low.astype(np.int64)
        hi = lo + run.astype(np.int64)
        fanout, below = [], 0
        for top in level_bits:           # rank bits [lo, hi) falling in [below, top)
            inside = np.maximum(np.minimum(hi, max(top, below)) - np.maximum(lo, below), 0)
            fanout.append(np.left_shift(1, inside))
            below = max(top, below)
        t = collective_seconds("AllGather", fanout, src_bytes[row] << grown.astype(np.int64),
                               links)
        total[at] += t
    total = total.reshape(len(srcs), len(dsts))
    total = total + total if backward else total
    total[merging.reshape(total.shape)] = np.nan
    return total
