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
#: op attribute (JSON text) where the capture records the output layouts of such a primitive
#: (``shard(in_layouts, out_layouts)``), same format
KEPT_OUT_LAYOUT_ATTR = "smsg_kept_out_layout"
#: op attribute (JSON text) where the capture records the in_strategy a network's own
#: ``shard()`` sets and the capture's one device cannot hold
OWN_STRATEGY_ATTR = "smsg_own_strategy"
#: the note of an option kept because the network's code sets it
OWN_NOTE = ("the network's own shard() strategy, kept as a fixed choice "
            "(--replace-strategies plans it anew)")


def kept_options(op, result: list, devices: int, replace_strategies: bool = False,
                 batch: int | None = None) -> list:
    """The options of ``op`` (``result``, :class:`~smsg_ms.cost.api.OpCost`) the search may
    choose: only the one of the layout the network keeps (:data:`KEPT_LAYOUT_ATTR`, at
    ``devices``: :func:`kept_cuts`), or of the strategy its own ``shard()`` sets
    (:data:`OWN_STRATEGY_ATTR`, noted :data:`OWN_NOTE`) unless ``replace_strategies``; never an
    out_strategy variant. ``result`` unchanged when no option has it (a strategy for more
    devices than ``devices``, or one whose product does not divide them). ``batch``: the
    network's samples (:func:`data_batch`), see :func:`fitted_device_matrix`."""
    text, own = op.attrs.get(KEPT_LAYOUT_ATTR), op.attrs.get(OWN_STRATEGY_ATTR)
    if isinstance(text, str):
        layouts = json.loads(text)
        cuts = kept_cuts(layouts, devices, batch)
        out_text = op.attrs.get(KEPT_OUT_LAYOUT_ATTR)
        outs = json.loads(out_text) if isinstance(out_text, str) else []
        kept = [with_network_order(r, layouts, outs, devices, batch) for r in result
                if cuts is not None and r.out_strategy is None
                and tuple(tuple(c) for c in r.strategy[:len(cuts)]) == cuts]
        return kept or result
    if replace_strategies or not isinstance(own, str):
        return result
    want = tuple(tuple(int(c) for c in s) for s in json.loads(own))
    kept = [dataclasses.replace(r, notes=list(r.notes) + [OWN_NOTE]) for r in result
            if r.out_strategy is None and tuple(tuple(c) for c in r.strategy) == want]
    return kept or result


def network_layouts(layouts: list[dict], devices: int, batch: int | None = None) -> list | None:
    """The :class:`~smsg_ms.cost.layout.TensorLayout` of each of ``layouts`` as MindSpore lays
    it: over the network's own device matrix (fitted to ``devices``,
    :func:`fitted_device_matrix`) in the network's axis order, tensor maps as written
    (``TensorLayout::InitFromVector`` of the ``Layout`` given to ``shard()``,
    ``frontend/parallel/ops_info/self_define_shard_info.cc`` takes it as it is). ``None``
    when the matrices disagree or cannot be fitted, or a dimension is cut by several axes (a
    tuple in the tensor map, which :class:`~smsg_ms.cost.layout.TensorLayout` does not hold)."""
    from .layout import TensorLayout

    matrices = {tuple(lay["device_matrix"]) for lay in layouts}
    if len(matrices) != 1:
        return None
    dm = matrices.pop()
    if prod(dm) != devices:
        dm = fitted_device_matrix(dm, devices, used_axes(layouts),
                                  tuple(layouts[0].get("alias_name") or ()), batch)
        if dm is None:
            return None
    out = []
    for lay in layouts:
        entries = [_axes(e) for e in lay["tensor_map"]]
        if any(len(e) > 1 for e in entries):
            return None
        try:
            out.append(TensorLayout(tuple(dm), tuple(e[0] if e else -1 for e in entries)))
        except ValueError:
            return None
    return out


def with_network_order(option, layouts: list[dict], out_layouts: list[dict], devices: int,
                       batch: int | None = None):
    """``option`` (:class:`~smsg_ms.cost.api.OpCost` with the kept layout's cuts) with its
    layouts in the network's device-matrix axis order (:func:`network_layouts`).

    The option's own layouts put the device-matrix axes in the order of its strategy (MindSpore's
    order for a strategy of integers, ``OperatorInfo::InferDevMatrixShape``); a ``Layout`` the
    network writes names its own axes (GLM2's ``tile_kv``: ``Layout((1, 4, 1, 2), ("dp", "cp",
    "rep", "mp"))`` cuts heads on the innermost axis, ranks ``{0, 1}``, where the strategy's
    order would cut them over ``{0, 4}``). The same cuts over other rank groups: which
    neighbour's layout is free and which group a redistribution gathers over follow from the
    network's order. Inputs without a layout keep the option's; outputs take ``out_layouts``
    (the network's ``out_layout``) or, when the network gave none, the first input's layout
    where the output has its cuts. ``option`` unchanged when a layout cannot be expressed."""
    ins = network_layouts(layouts, devices, batch)
    if ins is None or len(ins) > len(option.in_layouts):
        return option
    if any(a.cuts != b.cuts for a, b in zip(ins, option.in_layouts)):
        return option
    outs = network_layouts(out_layouts, devices, batch) if out_layouts else None
    if outs is None or len(outs) != len(option.out_layouts) or any(
            a.cuts != b.cuts for a, b in zip(outs, option.out_layouts)):
        outs = [ins[0] if o.cuts == ins[0].cuts and i == 0 else o
                for i, o in enumerate(option.out_layouts)]
    colls = [dataclasses.replace(c, span=s) if (s := network_span(
        c.span, option.in_layouts[:len(ins)], ins)) is not None else c
        for c in option.collectives]
    return dataclasses.replace(option, in_layouts=ins + list(option.in_layouts[len(ins):]),
                               out_layouts=outs, collectives=colls)


def network_span(span: tuple, strategy_layouts: list, network: list) -> tuple | None:
    """A collective's rank group ``span`` (``((size, stride), ...)`` over the strategy-order
    device matrix, :func:`~smsg_ms.cost.operators.base.group_span`) moved onto the network's
    device matrix: each strategy-order axis becomes the network axis that cuts the same tensor
    dimension (``strategy_layouts[i]`` and ``network[i]`` lay the same input with the same
    cuts), the axes no input names (replicas) become the network's unnamed axes, and the group
    varies those axes with the others fixed, rank = row-major index over the network's matrix
    (``DeviceMatrix::GetDevicesAlongDim``, ``frontend/parallel/device_matrix.cc``; MindSpore's
    mirror and partial-sum groups come from the operator's own device matrix, which for a kept
    ``Layout`` is the network's). ``None`` when the span cannot be moved: empty (ranks
    ``0 .. group − 1``), over an axis only some unnamed axes match, or layouts over several
    matrices."""
    if not span or not network:
        return None
    mats = {lay.device_matrix for lay in strategy_layouts}
    nets = {lay.device_matrix for lay in network}
    if len(mats) != 1 or len(nets) != 1:
        return None
    mat, net = mats.pop(), nets.pop()

    def strides(matrix):
        return [prod(matrix[k + 1:]) for k in range(len(matrix))]

    s_opt, s_net = strides(mat), strides(net)
    axis_of: dict[int, int] = {}
    for a, b in zip(strategy_layouts, network):
        for ma, mb in zip(a.tensor_map, b.tensor_map):
            if ma == -1 or a.axis_size(ma) == 1:
                continue
            if mb == -1:
                return None
            k, j = len(mat) - 1 - ma, len(net) - 1 - mb
            if axis_of.setdefault(k, j) != j:
                return None
    free_opt = [k for k in range(len(mat)) if mat[k] > 1 and k not in axis_of]
    free_net = [j for j in range(len(net)) if net[j] > 1 and j not in axis_of.values()]
    picked, free_seen = [], []
    for size, stride in span:
        k = next((k for k in range(len(mat)) if mat[k] == size and s_opt[k] == stride), None)
        if k is None:
            return None
        if k in axis_of:
            picked.append(axis_of[k])
        else:
            free_seen.append(k)
    if free_seen:
        if sorted(free_seen) != free_opt or prod(mat[k] for k in free_opt) != \
                prod(net[j] for j in free_net):
            return None
        picked += free_net
    return tuple((net[j], s_net[j]) for j in sorted(set(picked)))


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


#: the device-matrix axis names of data and tensor parallelism in mindformers' layouts
#: (``Layout(dev_mat, ("dp", "cp", "tp"))``, ``parallel_core/training_graph/device_matrix.py``)
DATA_PARALLEL_ALIAS = "dp"
TENSOR_PARALLEL_ALIAS = "tp"


def data_batch(graph) -> int | None:
    """Samples of the network's first data input (its leading dimension: ``input_ids (batch,
    seq)`` of a mindformers model); ``None`` without inputs or when the dimension is symbolic."""
    if not graph.inputs:
        return None
    shape = graph.tensors[graph.inputs[0]].shape
    return int(shape[0]) if shape and isinstance(shape[0], int) and shape[0] > 0 else None


def _data_parallel_axis(names: tuple) -> int | None:
    """Index of the data-parallel axis among a layout's axis ``names``: the one named
    :data:`DATA_PARALLEL_ALIAS`, else the first named ``dp_...`` (mindformers' MoE layouts,
    ``Layout((dp·tp/ep, ep), ("dp_ex_ep", "ep"))``: data parallel outside expert parallel, which
    the cost model prices at ``ep = 1``, ``cost/expert_dispatch.py``); ``None`` without one."""
    names = [str(n) for n in names]
    if DATA_PARALLEL_ALIAS in names:
        return names.index(DATA_PARALLEL_ALIAS)
    for i, name in enumerate(names):
        if name.startswith(DATA_PARALLEL_ALIAS + "_"):
            return i
    return None


def fitted_device_matrix(matrix: tuple, devices: int, used: set[int],
                         names: tuple = (), batch: int | None = None) -> tuple | None:
    """``matrix`` fitted to ``devices``; ``None`` when it cannot be (or needs no change).

    More devices in the matrix than given: each axis from the outermost one on gives up the
    common factor it shares with the excess (MindSpore numbers ranks with the last axis varying
    fastest, ``ConvertRankToCoordinate`` in ``frontend/parallel/device_matrix.cc``, so the outer
    axes span the farthest ranks: those a pipeline gives to other stages; fewer cuts keep every
    cut dimension divisible). Fewer: the outermost axis no tensor map names (a replica axis)
    takes the shortfall. Example: ``(1, 4, 1, 2)`` into 4 → ``(1, 2, 1, 2)``; into 16 with axis
    2 unused → ``(1, 4, 2, 2)``.

    A matrix of ones (the network built its layouts for the capture's one device, as mindformers'
    ``parallel_core`` models do) whose axes are named (``names``, the layout's ``alias_name``)
    with a ``dp`` axis (:func:`_data_parallel_axis`: ``dp``, else the first ``dp_...``) is set
    as :func:`smsg_ms.networks.mf_run.build` sets the run's ``parallel_config`` for ``devices``
    devices: ``dp = gcd(devices, batch)`` (all devices when ``batch`` is ``None``: the network's
    samples, :func:`data_batch`) and the rest on the ``tp`` axis (``model_parallel = devices /
    dp``); ``None`` when the rest has no ``tp`` axis to go to. ``(1, 1, 1)`` named ``("dp",
    "cp", "tp")`` into 8 → ``(8, 1, 1)``; with batch 4 → ``(4, 1, 2)``; with batch 6 →
    ``(2, 1, 4)``; ``(1, 1)`` named ``("dp_ex_ep", "ep")`` into 8 → ``(8, 1)``."""
    total = prod(matrix)
    if total == devices or devices < 1:
        return None
    dm = list(matrix)
    dp_axis = _data_parallel_axis(names)
    if total == 1 and dp_axis is not None and len(names) == len(dm):
        dp = gcd(devices, int(batch)) if batch else devices
        dm[dp_axis] = dp
        if dp < devices:
            if TENSOR_PARALLEL_ALIAS not in names:
                return None
            dm[list(names).index(TENSOR_PARALLEL_ALIAS)] = devices // dp
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


def kept_cuts(layouts: list[dict], devices: int,
              batch: int | None = None) -> tuple[tuple[int, ...], ...] | None:
    """Cut count per dimension of each tensor the ``layouts`` describe, at ``devices`` devices
    (the device matrix fitted to them); ``None`` when the layouts disagree on their device
    matrix or it cannot be fitted."""
    matrices = {tuple(lay["device_matrix"]) for lay in layouts}
    if len(matrices) != 1:
        return None
    dm = matrices.pop()
    if prod(dm) != devices:
        names = tuple(layouts[0].get("alias_name") or ())
        dm = fitted_device_matrix(dm, devices, used_axes(layouts), names, batch)
        if dm is None:
            return None
    rank = len(dm)
    return tuple(tuple(prod(dm[rank - 1 - a] for a in _axes(entry)) for entry in lay["tensor_map"])
                 for lay in layouts)
