"""Price an operator of a ``Morph`` region (:mod:`smsg_ms.graph.morph_regions`) as MindSpore
runs it: the region is one operator with the network's layout.

MindSpore's ``SelfDefineShardInfo`` (``frontend/parallel/ops_info/self_define_shard_info.cc``)
takes the ``Morph``'s configured layouts as they are: each input is redistributed to its
``in_layout`` where the Morph reads it, the output has the ``out_layout``, and the body runs on
the local slices with no collective inserted inside it (the dry-run of mindformers Qwen3 shows
its AllGathers at the Morph's inputs, scopes ``.../linear_qkv-ColumnParallelLinear/AllGather``).
So each body operator has one option: the network's layout on a region input it reads
(attribute ``smsg_morph_entry``) or an output it gives (``smsg_morph_exit``), and on every
tensor inside the region one fixed layout (replicated), so that no redistribution is priced
between body operators. A weight read at a region input is held and its gradient synchronised
as that input's layout says (AllReduce over its replicas, as for any operator reading a weight:
``OperatorInfo`` gradient sync over the slice's repeated devices), by its first reader only when
several operators read it (one variable, one sync: :mod:`smsg_ms.cost.shared_parameters`).

FLOPs: the body operator's FLOPs divided by the device count (the region's layouts of these
networks span every device of the stage: ``dp · cp · tp``); an estimate, stated in the notes.
"""
from __future__ import annotations

import json
from math import prod

from ..graph.model import DTYPE_BYTES
from ..graph.morph_regions import ENTRY_ATTR, EXIT_ATTR, MORPH_ATTR
from .api import MEMORY_KINDS, Collective, OpCost
from .kept_layout import data_batch, fitted_device_matrix, used_axes
from .layout import TensorLayout

def fitted_layout(layout: dict, devices: int, batch: int | None = None) -> TensorLayout | None:
    """The network's ``layout`` (``device_matrix``, ``tensor_map``, ``alias_name``) at
    ``devices`` devices; ``None`` when it cannot be fitted, or maps a dimension to several
    axes of which more than one is over 1 once fitted.

    The device matrix is fitted by :func:`~smsg_ms.cost.kept_layout.fitted_device_matrix`
    (a matrix of ones with a ``dp`` axis: ``dp = gcd(devices, batch)``, every device when
    ``batch`` is ``None``, the rest on ``tp``). Example: ``(1, 1)`` named ``("dp", "tp")`` at 8
    → ``(8, 1)``; with ``batch`` 4 → ``(4, 2)``. A dimension mapped to several axes
    (mindformers' ``"dp_cp"``, ``"cp_tp"``: a tuple of axes, MindSpore's ``TensorLayout``
    multi-axis map, the dimension cut by their product) is mapped to the one axis over 1 among
    them, or left whole when all are 1: mindformers' MoE layer ``layout_moe("dp_cp", ...)`` at 8
    devices of ``dp = 8`` cuts the tokens 8 ways on ``dp``."""
    matrix = tuple(int(v) for v in layout["device_matrix"])
    if prod(matrix) != devices:
        matrix = fitted_device_matrix(matrix, devices, used_axes([layout]),
                                      tuple(layout.get("alias_name") or ()), batch)
        if matrix is None:
            return None
    rank = len(matrix)
    tmap = []
    for v in layout["tensor_map"]:
        axes = [int(a) for a in v] if isinstance(v, (list, tuple)) else [int(v)]
        cut = [a for a in axes if a != -1 and 0 <= rank - 1 - a < rank
               and matrix[rank - 1 - a] > 1]
        if len(cut) > 1:
            return None
        tmap.append(cut[0] if cut else (axes[0] if len(axes) == 1 else -1))
    try:
        return TensorLayout(matrix, tuple(tmap))
    except ValueError:
        return None


def in_region(op) -> bool:
    """Whether ``op`` is in a ``Morph`` region (the capture marked it)."""
    return MORPH_ATTR in op.attrs


def region_option(model, op, base: OpCost) -> OpCost | None:
    """The one option of region operator ``op`` (see the module docstring); ``base``: its
    semi-auto default option, for FLOPs and activation memory. ``None`` when a layout of the
    region cannot be fitted to ``model.devices`` (the operator is then priced as before).

    Shapes: the layouts' ranks are the tensors'; a rank mismatch also gives ``None``."""
    n = model.devices
    graph = model.graph
    batch = data_batch(graph)
    entries = {int(k): v for k, v in json.loads(op.attrs.get(ENTRY_ATTR) or "{}").items()}
    exits = {int(k): v for k, v in json.loads(op.attrs.get(EXIT_ATTR) or "{}").items()}
    ins, outs, strategy = [], [], []
    colls: list[Collective] = []
    mem = {k: 0.0 for k in MEMORY_KINDS}
    # a weight an earlier operator also reads is one variable: that one holds and syncs it
    # (cost/shared_parameters.py; mindformers' multi-token prediction reads the embedding
    # table and the output head of the main model)
    borrowed = model.borrowed_inputs(op)
    for i, name in enumerate(op.inputs):
        layout = _region_layout(graph.tensors[name].shape, entries.get(i), n, batch)
        if layout is None:
            return None
        if i in entries and i not in borrowed:
            side = model._side(name)
            if side.kind == "parameter":
                param = graph.tensors[side.name]
                nb = (param.numel or 0) * DTYPE_BYTES.get(param.dtype, 4) / layout.shards
                mem["parameter"] += nb
                if param.requires_grad:
                    mem["gradient"] += nb
                    mem["optimizer"] += (param.numel or 0) * 4 * model.states / layout.shards
                    if layout.replicas > 1:
                        colls.append(Collective("AllReduce", layout.replicas, nb, "grad_sync",
                                                param.name, "gradient of the Morph's weight "
                                                "slice over its replicas"))
        ins.append(layout)
        strategy.append(layout.cuts)
    for k, name in enumerate(op.outputs):
        layout = _region_layout(graph.tensors[name].shape, exits.get(k), n, batch)
        if layout is None:
            return None
        outs.append(layout)
    mem["activation"] = base.memory.get("activation", 0) / n
    return OpCost(tuple(strategy), ins, outs, base.flops_fwd / n, base.flops_bwd / n, colls,
                  mem, [f"in Morph {op.attrs[MORPH_ATTR]}: the network's layout "
                        "(self_define_shard), no collective inside; FLOPs / devices"])


def region_options(model, op) -> list[OpCost] | None:
    """``[region_option]`` for an operator in a ``Morph`` region, priced from its unsharded
    FLOPs; ``None`` outside one (or when the region's layouts do not fit the device count)."""
    if not in_region(op):
        return None
    spec = model.spec(op)
    base = model._cost(op, spec, {}) if spec is not None else model._default(op, None)
    got = region_option(model, op, base)
    return None if got is None else [got]


def _region_layout(shape, given, devices: int, batch: int | None = None):
    """The layout of a region's input or output: the network's (``given``, fitted to
    ``devices``), replicated when it sets none; ``None`` when it cannot be fitted or its rank is
    not the tensor's."""
    if given is None:
        return TensorLayout.replicated(len(shape), devices)
    layout = fitted_layout(given, devices, batch)
    return layout if layout is not None and len(layout.tensor_map) == len(shape) else None
