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
collective, except that a concat does not run on across the first axis of a destination axis:
a source axis the destination's device matrix splits (into axes it does not use, a repeated
calculation) is one sub-dimension per part in MindSpore's expanded shape, each gathered on its
own unless ``MergeAllConcat`` joins them (a Gather of 2 indices on 8 devices, device matrix
``[2, 4]``, takes its 8-way batch-cut table by AllGathers of 4 then 2 in the dry-run). Every slice (split, and the slice after a permute's AllGather) is taken after all the
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

from math import prod

from .api import Collective
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
                 enable_alltoall: bool = False, expanded: bool = False) -> list[Collective]:
    """Forward and backward collectives turning ``src`` into ``dst`` for a tensor of global
    ``shape`` (elements; str dims allowed) and ``elem_bytes`` bytes per element.

    ``expanded``: the layouts are already MindSpore's expanded ones on one device matrix, one
    device axis per dimension at most (a Reshape's,
    :func:`~smsg_ms.cost.redistribution_reshape.unify_through_reshape`); each AllGather then
    concatenates on its source dimension, and they run in the order of
    ``TensorTransform::ReorderAndMergeRedistributionOp`` (``tensor_layout/tensor_transform.cc``:
    a stable sort putting every AllConcat before the slices, by concat axis, last first):
    source dimension descending, concats and permutes together (D11: ``(4, 4, 8)`` cut by
    axes ``(2, -, 4)`` to ``(4, 2, -)`` gathers the 4-way dimension 2 before the 2-way
    dimension 0, 256 then 512 B, in the dry-run). Not with AlltoAll: MindSpore reorders only
    lists of AllGathers, slices and reshapes.

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

    def groups(pred, breaks=frozenset()):
        """Runs of adjacent unified axes from one source axis satisfying ``pred`` (with AlltoAll,
        also to one destination dimension, or none: one AlltoAll per destination, as in the
        dry-run); a run does not go on into an axis of ``breaks``."""
        runs = []
        for x in range(len(sizes)):
            if not pred(x):
                continue
            if runs and runs[-1][-1] == x - 1 and src_axis_of.get(x) == src_axis_of.get(x - 1) \
                    and x not in breaks \
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
    # a source axis the destination's device matrix splits (into axes it does not use: a
    # repeated calculation) is one sub-dimension per part in MindSpore's expanded tensor shape,
    # each gathered on its own (MergeAllConcat may join them back, _merge_gathers): a Gather
    # whose indices (2,) are cut 2 ways on 8 devices (device matrix [2, 4]) takes its table,
    # batch-cut 8 ways, whole by an AllGather of 4 then one of 2 (dry-run,
    # tests/test_heldout_patterns.py); as runs, with AlltoAll
    starts = frozenset() if unified is None or enable_alltoall else \
        frozenset(span[0] for span in spans_dst if span)
    concats = groups(lambda x: x in src_owner and x not in dst_owner, starts)
    concats.sort(key=lambda run: (-src_owner[run[0]], -s_axes[src_owner[run[0]]].index(run[0])))
    # 3. permute: axis moves from one dimension to another; in MindSpore's order, the
    # destination's sub-dimensions from the last one (minor first)
    moves = groups(lambda x: x in src_owner and x in dst_owner and src_at[x] != dst_at[x])
    moves.sort(key=lambda run: (-dst_owner[run[0]], -d_axes[dst_owner[run[0]]].index(run[0])))
    steps = [(False, run) for run in concats] + [(True, run) for run in moves]
    # ReorderAndMergeRedistributionOp (AllGathers and slices only): by concat (source)
    # dimension, last first
    if expanded and not enable_alltoall:
        steps.sort(key=lambda step: -src_owner[step[1][0]])
    for moving, run in steps:
        if not moving:
            gather(src_owner[run[0]], run, f"un-split dim {src_owner[run[0]]}")
            continue
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
