"""Tensor redistribution: the collectives MindSpore inserts to turn one layout into another
(``frontend/parallel/tensor_layout/redistribution_operator_infer.cc``).

Both device matrices are first refined to a common one (``UnifyDeviceArrangement``: the union of
their prefix products), so each tensor dimension is cut by a list of unified axes. Then, per
unified axis, in the order the dry-run shows:

1. *split* (axis unused by the source, used by the destination): a local slice, no collective;
2. *concat* (axis used by the source, unused by the destination): AllGather over the axis;
3. *permute* (the axis cuts another dimension in the source): AlltoAll over the axis when
   ``enable_alltoall`` is on, else AllGather then slice (MindSpore's default).

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
gathers dimension 2 before dimension 0. Not modelled: MindSpore sometimes gathers two pieces of
one source axis in one AllGather (docs/known-differences.md, D3).
Backward (bprop) collectives: AllGather → ReduceScatter of the same tensor, AlltoAll →
AlltoAll, slice → none (seen in the dry-run, ``tests/test_cost_vs_mindspore.py``).

Sizes: ``full_bytes`` of an AllGather/ReduceScatter is the gathered tensor per device (``S`` of
:func:`~smsg_ms.cost.api.ring_volume`); of an AlltoAll, the per-device buffer exchanged.
"""
from __future__ import annotations

from math import prod

from .api import Collective
from .layout import TensorLayout


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
    bounds = sorted(set(_prefixes(a)) | set(_prefixes(b)))
    sizes, prev = [], 1
    for p in bounds:
        if p % prev:
            return None
        sizes.append(p // prev)
        prev = p
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

    def gather(dim, axes, kind_reason):
        g = prod(sizes[x] for x in axes)
        local[dim] = local[dim] * g
        fb = nbytes()
        out.append(Collective("AllGather", g, fb, "forward", tensor, kind_reason))
        out.append(Collective("ReduceScatter", g, fb, "backward", tensor,
                              "bprop of the redistribution AllGather"))
        for x in axes:
            cur[dim].remove(x)

    def groups(pred):
        """Runs of adjacent unified axes from one source axis satisfying ``pred``."""
        runs = []
        for x in range(len(sizes)):
            if not pred(x):
                continue
            if runs and runs[-1][-1] == x - 1 and src_axis_of.get(x) == src_axis_of.get(x - 1):
                runs[-1].append(x)
            else:
                runs.append([x])
        return runs

    src_owner, dst_owner = _owner(s_axes), _owner(d_axes)
    # an axis kept on the same dimension but at another position changes the slices: re-gather
    for d in range(len(shape)):
        common = [x for x in s_axes[d] if x in d_axes[d]]
        if common != [x for x in d_axes[d] if x in s_axes[d]] or (
                common and s_axes[d][:len(common)] != d_axes[d][:len(common)]):
            for x in common:
                src_owner.pop(x, None)
                dst_owner.pop(x, None)
            gather(d, list(common), "axis order within a dimension differs")
            cur[d].extend(x for x in common if x in d_axes[d])  # sliced again after the gathers
    # 1. split: axis free in the source: a slice, taken after every gather (module doc); with
    # AlltoAll (not checked against the dry-run) the slice comes first, as MindSpore's split step
    if enable_alltoall:
        for x in range(len(sizes)):
            if x not in src_owner and x in dst_owner:
                d = dst_owner[x]
                local[d] = local[d] // sizes[x] if isinstance(local[d], int) else local[d] / sizes[x]
    # 2. concat: axis used by the source only (before the permutes, as in the dry-run)
    for run in groups(lambda x: x in src_owner and x not in dst_owner):
        gather(src_owner[run[0]], run, f"un-split dim {src_owner[run[0]]}")
    # 3. permute: axis moves from one dimension to another; in MindSpore's order, the
    # destination's sub-dimensions from the last one (minor first)
    moves = groups(lambda x: x in src_owner and x in dst_owner and src_owner[x] != dst_owner[x])
    moves.sort(key=lambda run: (-dst_owner[run[0]], -d_axes[dst_owner[run[0]]].index(run[0])))
    for run in moves:
        ds, dd = src_owner[run[0]], dst_owner[run[0]]
        g = prod(sizes[x] for x in run)
        if enable_alltoall:
            fb = nbytes()
            out.append(Collective("AlltoAll", g, fb, "forward", tensor,
                                  f"move cut from dim {ds} to dim {dd}"))
            out.append(Collective("AlltoAll", g, fb, "backward", tensor,
                                  "bprop of the redistribution AlltoAll"))
            local[ds] = local[ds] * g
            for x in run:
                cur[ds].remove(x)
            local[dd] = local[dd] // g if isinstance(local[dd], int) else local[dd] / g
        else:  # gather now, slice after every gather
            gather(ds, run, f"move cut from dim {ds} to dim {dd} (AllGather + slice)")
    return out
