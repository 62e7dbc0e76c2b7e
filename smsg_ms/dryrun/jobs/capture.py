"""Capture jobs: read a network's operator graph, or the strategies its code already sets.

* ``capture``: build the network spec under ``no_init_parameters`` (for the job's ``world``
  devices when given: :mod:`smsg_ms.networks.world`), compile forward in semi-auto parallel
  (again when a ``Morph``'s output takes its ``infer_shape``:
  :func:`smsg_ms.graph.morph_regions.set_global_outputs`), return ``{"graph": OpGraph dict}``.
* ``capture_train``: the same, but compile the training graph (``TrainOneStepCell``: forward,
  backward, optimizer) and return ``{"graph": OpGraph dict, "collectives": [...]}``.
* ``read_shard``: build the spec and return the ``in_strategy`` its primitives already carry
  (set by ``shard()`` in the network's code, e.g. mindformers' parallel config).
"""
from __future__ import annotations

import json
import sys
import time

from ...cost.kept_layout import KEPT_LAYOUT_ATTR, KEPT_OUT_LAYOUT_ATTR, OWN_STRATEGY_ATTR
from ...integration.annotate import clear_strategies
from .common import setup_parallel


def job_capture(job: dict) -> dict:
    from ...graph.capture import compile_cell, read_mindir, set_training_mode, tag_primitives
    from ...graph.morph_regions import fold_morph_markers, mark_morph_fns, set_global_outputs
    from ...networks import build_network
    from ...networks.dynamic_inputs import declared_axes, mark_dynamic_axes
    from ...networks.world import built_for

    t0 = time.perf_counter()
    setup_parallel(extra_context={"full_batch": True})
    with built_for(job.get("world")) as world:   # the plan's devices (capture_network's world)
        built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    own = own_strategies(prims)
    mark_morph_fns(prims)   # before the layouts lose their device matrix
    dropped = drop_multi_device_shards(prims)
    # training mode everywhere (BatchNorm's bn_train, Dropout); a network that computes its own
    # loss is captured on its training path (training inputs): the operators the training
    # compile runs, the loss's among them
    training = bool(built.train_example)
    set_training_mode(built.net)
    inputs = built.train_inputs if training else built.inputs
    phase = compile_cell(built.net, inputs, phase="smsg_capture")
    graph = read_mindir(built.net, phase, built.name)
    if set_global_outputs(graph, prims):   # Morph outputs at their infer_shape: again
        phase = compile_cell(built.net, inputs, phase="smsg_capture_global")
        graph = read_mindir(built.net, phase, built.name)
    graph = fold_morph_markers(graph)
    for op in graph.ops:
        if op.prim_path in own:
            op.attrs[OWN_STRATEGY_ATTR] = own[op.prim_path]
    if world.read:
        graph.built_for = world.devices
    declared = None if training else declared_axes(built.net)
    if declared:   # the axes set_inputs declares dynamic: compiled again as declared
        dyn_phase = compile_cell(built.net, tuple(built.net.get_inputs()),
                                 phase="smsg_capture_dynamic")
        dyn_graph = fold_morph_markers(read_mindir(built.net, dyn_phase, built.name))
        if not mark_dynamic_axes(graph, dyn_graph, declared):
            graph.warnings.append("the inputs declared dynamic (set_inputs) compile to other "
                                  "operators than the example's: their axes are not known, "
                                  "and a plan may cut them")
    if dropped:
        graph.warnings.append(f"the network's own shard() of {len(dropped)} primitive(s) "
                              f"({', '.join(dropped)}) needs more than the capture's 1 device: "
                              "recorded, and a plan keeps each where it fits the devices "
                              "(--replace-strategies plans them anew)")
    return {"graph": graph.to_dict(), "seconds": time.perf_counter() - t0}


def drop_multi_device_shards(prims: dict) -> list[str]:
    """Delete the ``shard()`` strategies that cut any dimension (MindSpore rejects them on the
    capture's single device: "requires N devices, but the device number of this stage is 1");
    all-ones strategies stay (the deleted ones: :func:`own_strategies`). ``shard()`` given ``Layout`` objects (GLM2) keeps its tensor maps
    over a device matrix of ones; one the network fixes (``self_define_shard``) records its
    input and output layouts as written in op attributes ``smsg_kept_layout`` and
    ``smsg_kept_out_layout``
    (:mod:`smsg_ms.cost.kept_layout`). Returns the paths changed, sorted."""
    def cuts(value) -> bool:
        return isinstance(value, (tuple, list)) and any(
            cuts(v) if isinstance(v, (tuple, list)) else int(v) > 1 for v in value)

    def layout_cuts(value) -> bool:  # shard() with Layouts: a device matrix of several devices
        return isinstance(value, (tuple, list)) and any(
            isinstance(v, dict) and cuts(v.get("device_matrix")) for v in _flat(value))

    multi = {path: prim for path, prim in prims.items()
             if any(cuts(prim.attrs.get(a)) for a in ("in_strategy", "out_strategy"))}
    laid = sorted(path for path, prim in prims.items()
                  if any(layout_cuts(prim.attrs.get(a)) for a in ("in_layout", "out_layout")))
    for prim in prims.values():
        if prim.attrs.get("self_define_shard") is True and prim.attrs.get("in_layout"):
            # the plan must take this layout as it is: recorded with the device matrix written
            # (a matrix of ones too: the network built it for the capture's one device)
            for attr, key in (("in_layout", KEPT_LAYOUT_ATTR), ("out_layout", KEPT_OUT_LAYOUT_ATTR)):
                kept = [{"device_matrix": list(v["device_matrix"]),
                         "tensor_map": list(v["tensor_map"]),
                         "alias_name": list(v.get("alias_name") or ())}
                        for v in _flat(prim.attrs.get(attr) or ()) if isinstance(v, dict)]
                if kept:
                    prim.add_prim_attr(key, json.dumps(kept))
    for path in laid:  # the same tensor maps over a device matrix of ones: a 1-device layout
        prim = prims[path]
        for attr in ("in_layout", "out_layout"):
            if prim.attrs.get(attr) is not None:
                prim.add_prim_attr(attr, tuple(_ones(v) for v in prim.attrs[attr]))
    return sorted(clear_strategies(multi) + laid)


def own_strategies(prims: dict) -> dict[str, str]:
    """``{path: JSON in_strategy}`` of the primitives whose own ``shard()`` cuts (not those
    marked ``self_define_shard``, whose layout :func:`drop_multi_device_shards` keeps): the
    strategies a plan keeps unless ``--replace-strategies``. Read before they are dropped and
    set on the graph's operators as :data:`~smsg_ms.cost.kept_layout.OWN_STRATEGY_ATTR` (MindIR
    drops a generated primitive's attributes)."""
    out = {}
    for path, prim in prims.items():
        strategy = prim.attrs.get("in_strategy")
        if (isinstance(strategy, (tuple, list)) and not prim.attrs.get("self_define_shard")
                and any(int(c) > 1 for part in strategy for c in part)):
            out[path] = json.dumps([[int(c) for c in part] for part in strategy])
    return out


def _ones(value):
    """A layout entry (or a tuple input's entries) over a device matrix of ones."""
    if isinstance(value, (tuple, list)):
        return tuple(_ones(v) for v in value)
    if isinstance(value, dict):
        return dict(value, device_matrix=tuple(1 for _ in value["device_matrix"]))
    return value


def _flat(layouts) -> list:
    """``in_layout`` entries, a tuple input's layouts (Concat's) flattened one level."""
    out = []
    for v in layouts:
        out += list(v) if isinstance(v, (tuple, list)) else [v]
    return out


def job_capture_train(job: dict) -> dict:
    """Compile ``TrainOneStepCell`` of the spec (no weights) and return its whole graph."""
    from ...graph.capture import compile_cell, read_mindir, tag_primitives
    from ...networks import build_network
    from ..collectives import read_collectives

    t0 = time.perf_counter()
    ms = setup_parallel(extra_context={"full_batch": True})
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    tag_primitives(built.net)
    train = built.train_cell(ms)
    t1 = time.perf_counter()
    phase = compile_cell(train, built.train_inputs, phase="train")
    t2 = time.perf_counter()
    graph = read_mindir(train, phase, built.name, tag_net=built.net)
    t3 = time.perf_counter()
    print(f"smsg timing: build {t1 - t0:.1f} s, compile {t2 - t1:.1f} s, read {t3 - t2:.1f} s",
          file=sys.stderr)
    try:
        collectives = read_collectives(train, phase)
    except KeyError:  # the top graph calls sub-graphs (mindformers): read them off the OpGraph
        from ...graph.model import collectives_in_graph
        collectives = collectives_in_graph(graph)
    return {"graph": graph.to_dict(), "collectives": collectives,
            "seconds": time.perf_counter() - t0}


def shard_of(prim) -> list[list[int]] | None:
    """The ``in_strategy`` a primitive carries (one list of cuts per input; ``[]`` for a
    scalar input), ``None`` when it has none."""
    value = prim.attrs.get("in_strategy")
    if value is None:
        return None
    return [[int(x) for x in s] if isinstance(s, (tuple, list)) else [] for s in value]


def job_read_shard(job: dict) -> dict:
    from ...graph.capture import tag_primitives
    from ...networks import build_network

    setup_parallel(extra_context=job.get("context", {"full_batch": True}))
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    out = {path: shard_of(p) for path, p in sorted(prims.items())}
    return {"strategies": {k: v for k, v in out.items() if v is not None}}
