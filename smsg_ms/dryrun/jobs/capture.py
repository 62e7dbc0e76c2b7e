"""Capture jobs: read a network's operator graph, or the strategies its code already sets.

* ``capture``: build the network spec under ``no_init_parameters``, compile forward in
  semi-auto parallel, return ``{"graph": OpGraph dict}``.
* ``capture_train``: the same, but compile the training graph (``TrainOneStepCell``: forward,
  backward, optimizer) and return ``{"graph": OpGraph dict, "collectives": [...]}``.
* ``read_shard``: build the spec and return the ``in_strategy`` its primitives already carry
  (set by ``shard()`` in the network's code, e.g. mindformers' parallel config).
"""
from __future__ import annotations

import json
import sys
import time

from ...cost.kept_layout import KEPT_LAYOUT_ATTR
from ...integration.annotate import clear_strategies
from .common import setup_parallel


def job_capture(job: dict) -> dict:
    from ...graph.capture import compile_cell, read_mindir, set_training_mode, tag_primitives
    from ...graph.morph_regions import fold_morph_markers, mark_morph_fns
    from ...networks import build_network

    t0 = time.perf_counter()
    setup_parallel(extra_context={"full_batch": True})
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    mark_morph_fns(prims)   # before the layouts lose their device matrix
    dropped = drop_multi_device_shards(prims)
    # training mode everywhere (BatchNorm's bn_train, Dropout); a network that computes its own
    # loss is captured on its training path (training inputs): the operators the training
    # compile runs, the loss's among them
    training = bool(built.train_example)
    set_training_mode(built.net)
    inputs = built.train_inputs if training else built.inputs
    phase = compile_cell(built.net, inputs, phase="smsg_capture")
    graph = fold_morph_markers(read_mindir(built.net, phase, built.name))
    if dropped:
        graph.warnings.append(f"capture ignored the network's own shard() of {len(dropped)} "
                              f"primitive(s) ({', '.join(dropped)}): they need more than the "
                              "capture's 1 device; a plan sets every strategy itself")
    return {"graph": graph.to_dict(), "seconds": time.perf_counter() - t0}


def drop_multi_device_shards(prims: dict) -> list[str]:
    """Delete the ``shard()`` strategies that cut any dimension (MindSpore rejects them on the
    capture's single device: "requires N devices, but the device number of this stage is 1");
    all-ones strategies stay. ``shard()`` given ``Layout`` objects (GLM2) keeps its tensor maps
    over a device matrix of ones; one the network fixes (``self_define_shard``) records its
    input layouts as written in op attribute ``smsg_kept_layout``
    (:mod:`smsg_ms.cost.kept_layout`). Returns the paths changed, sorted."""
    def cuts(value) -> bool:
        return isinstance(value, (tuple, list)) and any(
            cuts(v) if isinstance(v, (tuple, list)) else int(v) > 1 for v in value)

    def layout_cuts(value) -> bool:  # shard() with Layouts: a device matrix of several devices
        return isinstance(value, (tuple, list)) and any(
            isinstance(v, dict) and cuts(v.get("device_matrix")) for v in value)

    multi = {path: prim for path, prim in prims.items()
             if any(cuts(prim.attrs.get(a)) for a in ("in_strategy", "out_strategy"))}
    laid = sorted(path for path, prim in prims.items()
                  if any(layout_cuts(prim.attrs.get(a)) for a in ("in_layout", "out_layout")))
    for prim in prims.values():
        if prim.attrs.get("self_define_shard") is True and prim.attrs.get("in_layout"):
            # the plan must take this layout as it is: recorded with the device matrix written
            # (a matrix of ones too: the network built it for the capture's one device)
            kept = [{"device_matrix": list(v["device_matrix"]), "tensor_map": list(v["tensor_map"]),
                     "alias_name": list(v.get("alias_name") or ())}
                    for v in _flat(prim.attrs["in_layout"]) if isinstance(v, dict)]
            if kept:
                prim.add_prim_attr(KEPT_LAYOUT_ATTR, json.dumps(kept))
    for path in laid:  # the same tensor maps over a device matrix of ones: a 1-device layout
        prim = prims[path]
        for attr in ("in_layout", "out_layout"):
            if prim.attrs.get(attr) is not None:
                prim.add_prim_attr(attr, tuple(
                    dict(v, device_matrix=tuple(1 for _ in v["device_matrix"]))
                    if isinstance(v, dict) else v for v in prim.attrs[attr]))
    return sorted(clear_strategies(multi) + laid)


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
