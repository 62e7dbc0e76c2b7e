"""Entry point of the dry-run child process: ``python -m smsg_ms.integration.dryrun_child JOB OUT``.

Reads a JSON job, does it under the CPU dry-run environment set by
:func:`smsg_ms.integration.dryrun.run_child`, writes a JSON result. Jobs:

* ``capture``: build the network spec under ``no_init_parameters``, compile forward in
  semi-auto parallel, return ``{"graph": OpGraph dict}``.
* ``capture_train``: the same, but compile the training graph (``TrainOneStepCell``: forward,
  backward, optimizer) and return ``{"graph": OpGraph dict, "collectives": [...]}``.
* ``compile``: build the spec, apply ``strategies`` (``{prim path: in_strategy}``), compile the
  training graph (``TrainOneStepCell``) on ``devices``, return the inserted collectives and the
  strategies MindSpore used (:mod:`smsg_ms.integration.collectives`).
* ``plan_compile``: ``compile`` with a plan's data-input layout (``dataset_strategy`` or full
  batch) and write-back (``write_back``: ``shard``, or ``propagate`` = auto_parallel with
  sharding propagation seeded by the strategies), used by ``smsg-ms check``.
* ``pipeline_compile``: the same for a pipelined plan (``pipeline`` record: stages, micro-batches,
  stage and recompute per block, optimizer sharding), one rank (:func:`job_pipeline_compile`).
* ``planner_compile``: compile the training graph under one planner (``planner``: one of
  :data:`PLANNERS`) and return what the comparison measures (:func:`job_planner_compile`).
* ``read_shard``: build the spec and return the ``in_strategy`` its primitives already carry
  (set by ``shard()`` in the network's code, e.g. mindformers' parallel config).

Errors become ``{"ok": false, "error": one paragraph, "kind": ...}``; the full traceback is only
written to stderr.
"""
from __future__ import annotations

import json
import sys
import time
import traceback

from smsg_ms.integration.annotate import clear_strategies as clear_shard


def _setup(devices_hint: int | None = None, parallel_mode: str = "semi_auto_parallel",
           extra_context: dict | None = None):
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE, device_target="GPU")
    init()
    ctx = {"parallel_mode": parallel_mode, "device_num": get_group_size(),
           "global_rank": get_rank()}
    ctx.update(extra_context or {})
    ms.set_auto_parallel_context(**ctx)
    return ms


def job_capture(job: dict) -> dict:
    from smsg_ms.graph.capture import compile_cell, read_mindir, set_training_mode, tag_primitives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    _setup(extra_context={"full_batch": True})
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    dropped = _drop_multi_device_shards(tag_primitives(built.net))
    # training mode everywhere (BatchNorm's bn_train, Dropout); a network that computes its own
    # loss is captured on its training path (training inputs): the operators the training
    # compile runs, the loss's among them
    training = bool(built.train_example)
    set_training_mode(built.net)
    inputs = built.train_inputs if training else built.inputs
    phase = compile_cell(built.net, inputs, phase="smsg_capture")
    graph = read_mindir(built.net, phase, built.name)
    if dropped:
        graph.warnings.append(f"capture ignored the network's own shard() of {len(dropped)} "
                              f"primitive(s) ({', '.join(dropped)}): they need more than the "
                              "capture's 1 device; a plan sets every strategy itself")
    return {"graph": graph.to_dict(), "seconds": time.perf_counter() - t0}


def _drop_multi_device_shards(prims: dict) -> list[str]:
    """Delete the ``shard()`` strategies that cut any dimension (MindSpore rejects them on the
    capture's single device: "requires N devices, but the device number of this stage is 1");
    all-ones strategies stay. Returns the paths cleared, sorted."""
    def cuts(value) -> bool:
        return isinstance(value, (tuple, list)) and any(
            cuts(v) if isinstance(v, (tuple, list)) else int(v) > 1 for v in value)

    multi = {path: prim for path, prim in prims.items()
             if any(cuts(prim.attrs.get(a)) for a in ("in_strategy", "out_strategy"))}
    return clear_shard(multi)


def job_capture_train(job: dict) -> dict:
    """Compile ``TrainOneStepCell`` of the spec (no weights) and return its whole graph."""
    from smsg_ms.graph.capture import compile_cell, read_mindir, tag_primitives
    from smsg_ms.integration.collectives import read_collectives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    ms = _setup(extra_context={"full_batch": True})
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
        from smsg_ms.graph.model import collectives_in_graph
        collectives = collectives_in_graph(graph)
    return {"graph": graph.to_dict(), "collectives": collectives,
            "seconds": time.perf_counter() - t0}


def _shard_all(prims: dict, strategies: dict) -> list[str]:
    """Replace every strategy the network carries by ``strategies`` (``{path: in_strategy}``).

    Returns the paths whose own ``shard()`` was dropped.

    Raises:
        KeyError: a path the network does not have (the plan is for another network).
    """
    unknown = sorted(set(strategies) - set(prims))
    if unknown:
        raise KeyError(f"plan names primitives the network does not have: {', '.join(unknown)}")
    cleared = clear_shard(prims)
    for path, strategy in sorted(strategies.items()):
        prims[path].shard(tuple(tuple(s) for s in strategy))
    return cleared


def job_compile(job: dict) -> dict:
    from smsg_ms.graph.capture import compile_cell, tag_primitives
    from smsg_ms.integration.collectives import read_collectives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    ms = _setup(parallel_mode=job.get("parallel_mode", "semi_auto_parallel"),
                extra_context=job.get("context", {"full_batch": True}))
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    _shard_all(tag_primitives(built.net), job.get("strategies", {}))
    train = built.train_cell(ms)
    phase = compile_cell(train, built.train_inputs, phase="train")
    from mindspore.graph.api import _cell_graph_executor
    strategies = _cell_graph_executor._graph_executor.get_strategy(phase)
    collectives = read_collectives(train, phase)
    return {"collectives": collectives, "strategies": {k: v for k, v in strategies.items()},
            "seconds": time.perf_counter() - t0}


def job_plan_compile(job: dict) -> dict:
    """``compile`` of a plan with its data-input layout: with a ``dataset_strategy``, every rank
    is given its slice of the built (global) inputs, as a data loader would, and MindSpore gets
    that ``dataset_strategy`` (labels: the batch cut of the first input on their first axis, as
    in :func:`smsg_ms.integration.context.dataset_layout`); without one, ``full_batch``."""
    import numpy as np

    from smsg_ms.graph.capture import compile_cell, tag_primitives
    from smsg_ms.integration.collectives import read_collectives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    propagate = job.get("write_back", "shard") == "propagate"
    ms = _setup(parallel_mode="auto_parallel" if propagate else "semi_auto_parallel",
                extra_context={"search_mode": "sharding_propagation"} if propagate else None)
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    inputs = list(built.train_inputs)
    layout = job.get("dataset_strategy")
    if layout is None:
        ms.set_auto_parallel_context(full_batch=True)
    else:
        ranks = [tuple(int(c) for c in cuts) for cuts in layout]
        ranks += [tuple([ranks[0][0]] + [1] * (len(t.shape) - 1)) for t in inputs[len(ranks):]]
        inputs = [ms.Tensor(np.zeros(tuple(d // c for d, c in zip(t.shape, cuts))), dtype=t.dtype)
                  for t, cuts in zip(inputs, ranks)]
        ms.set_auto_parallel_context(full_batch=False, dataset_strategy=tuple(ranks))
    _shard_all(tag_primitives(built.net), job.get("strategies", {}))
    train = built.train_cell(ms)
    phase = compile_cell(train, tuple(inputs), phase="train")
    from mindspore.graph.api import _cell_graph_executor
    strategies = _cell_graph_executor._graph_executor.get_strategy(phase)
    return {"collectives": read_collectives(train, phase), "strategies": dict(strategies),
            "dataset_strategy": None if layout is None else [list(r) for r in ranks],
            "seconds": time.perf_counter() - t0}


def job_init(job: dict) -> dict:
    """Does MindSpore accept this device count? ``init()`` succeeds for any count; the parallel
    initialisation fails at the first compile, so compile a one-MatMul network."""
    ms = _setup(extra_context={"full_batch": True})
    import numpy as np
    from mindspore import nn

    from smsg_ms.graph.capture import compile_cell
    from mindspore.communication import get_group_size
    n = 48 * get_group_size()
    net = nn.Dense(n, n)
    compile_cell(net, (ms.Tensor(np.zeros((n, n), np.float32)),), phase="init_probe")
    return {"group_size": get_group_size()}



def job_pipeline_compile(job: dict) -> dict:
    """Compile one rank of a pipelined training graph (``shared/docs/mindspore-dryrun.md``).

    Job keys: ``spec``, ``options`` (network options; ``batch`` is the *micro-batch* size the network
    is built for), ``pipeline`` (the ``Plan.pipeline`` record), ``strategies``. The data inputs are
    the built training inputs (labels too; mindformers' ``seq + 1`` tokens) tiled
    ``micro_batches`` times along the batch axis (the global batch); the network's loss (if it
    has one outside) is applied, as in ``BuiltNetwork.train_cell``.
    """
    import numpy as np

    from smsg_ms.graph.capture import compile_cell, tag_primitives
    from smsg_ms.integration.collectives import read_collectives
    from smsg_ms.integration.pipeline import (check_pipeline, mark_cells, pipeline_context,
                                              pipeline_train_cell)
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    pipeline = job["pipeline"]
    ctx = {"full_batch": True}
    ctx.update(pipeline_context(pipeline))
    ms = _setup(extra_context=ctx)
    from mindspore import nn, ops
    from mindspore.communication import get_group_size
    check_pipeline(pipeline, get_group_size())
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    _shard_all(tag_primitives(built.net), job.get("strategies", {}))
    marked = mark_cells(built.net, pipeline)
    net = built.net

    loss_fn = built.loss
    n_labels = len(built.labels) if loss_fn is not None else 0

    class _WithLoss(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.network = net
            self.loss_fn = loss_fn
            self.mean = ops.ReduceMean()
            self.square = ops.Square()

        def construct(self, *args):
            out = self.network(*args[:len(args) - n_labels])
            if self.loss_fn is None:
                # mean(out²), not mean(out): its gradient depends on the micro-batch, so the
                # compiler cannot merge the micro-batches' backward passes as common terms
                return self.mean(self.square(out))
            return self.loss_fn(out, *args[len(args) - n_labels:])

    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    train = pipeline_train_cell(_WithLoss(), opt, pipeline)
    micro = int(pipeline.get("micro_batches", 1))
    inputs = tuple(ms.Tensor(np.tile(x.asnumpy(), (micro,) + (1,) * (x.ndim - 1)))
                   for x in built.train_inputs)
    phase = compile_cell(train, inputs, phase="train")
    return {"collectives": read_collectives(train, phase), "marked": marked,
            "parameters": _parameter_layouts(train), "seconds": time.perf_counter() - t0}


def _parameter_layouts(train) -> list[dict]:
    """Every parameter of the compiled training cell (weights, optimizer state, gradient
    accumulators) with its shape and, where MindSpore recorded one, ``slice_shape`` (the
    per-device slice after operator-level sharding, ``parameter_layout_dict[name][2]``) and
    ``opt_shard_group`` / ``opt_slice_shape`` (optimizer sharding: entries 5 and 7 of the layout,
    MindSpore ``parallel/_tensor.py``), sorted by name."""
    layouts = train.parameter_layout_dict or {}
    out = []
    for p in sorted(train.get_parameters(), key=lambda q: q.name):
        row = {"name": p.name, "shape": [int(d) for d in p.shape],
               "parallel_optimizer": bool(getattr(p, "parallel_optimizer", True))}
        lay = layouts.get(p.name)
        if lay:
            row["slice_shape"] = [int(d) for d in lay[2]]
            if len(lay) > 5:
                row["opt_shard_group"] = str(lay[5])
            if len(lay) > 7:
                row["opt_slice_shape"] = [int(d) for d in lay[7]]
        out.append(row)
    return out


#: planner → (parallel_mode, search_mode or None); see :func:`job_planner_compile`.
PLANNERS = {
    "semi_auto": ("semi_auto_parallel", None),
    "data_parallel": ("semi_auto_parallel", None),
    "expert": ("semi_auto_parallel", None),
    "recursive_programming": ("auto_parallel", "recursive_programming"),
    "dynamic_programming": ("auto_parallel", "dynamic_programming"),
    "sharding_propagation": ("auto_parallel", "sharding_propagation"),
}


def _shard_of(prim):
    value = prim.attrs.get("in_strategy")
    if value is None:
        return None
    return [[int(x) for x in s] if isinstance(s, (tuple, list)) else [] for s in value]


def job_read_shard(job: dict) -> dict:
    from smsg_ms.graph.capture import tag_primitives
    from smsg_ms.networks import build_network

    _setup(extra_context=job.get("context", {"full_batch": True}))
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    out = {path: _shard_of(p) for path, p in sorted(prims.items())}
    return {"strategies": {k: v for k, v in out.items() if v is not None}}


def _compiled_model(train, phase):
    from mindspore.graph.api import _cell_graph_executor
    from mindspore.train import mind_ir_pb2

    model = mind_ir_pb2.ModelProto()
    model.ParseFromString(_cell_graph_executor._get_func_graph_proto(train, phase, "mind_ir"))
    return model


def _node_table(model):
    """(shape of every value by name, [(node, primitive proto, attrs)] of the primitive calls)."""
    from smsg_ms.graph.mindir import _output_types, decode_attribute

    prims = {p.name: p for p in model.primitives}
    shapes = {}
    for p in model.graph.parameter:
        shapes[p.name] = [int(d) for d in p.dims]
    for inp in model.graph.input:
        if inp.tensor:
            shapes[inp.name] = [int(d) for d in inp.tensor[0].dims]
    calls = []
    nodes = list(model.graph.node) + [n for f in model.functions for n in f.node]
    for node in nodes:
        types = _output_types(node)
        if node.output and types:
            shapes[node.output[0]] = [int(d) if isinstance(d, int) else -1 for d in types[0][0]]
        if node.op_type.startswith("REF::") and node.op_type[5:] in prims:
            prim = prims[node.op_type[5:]]
            attrs = {a.name: decode_attribute(a) for a in prim.attribute}
            calls.append((node, prim, attrs))
    return shapes, calls


def strategies_by_path(raw: dict, calls, hints: dict, wrappers: int) -> tuple[dict, list[str]]:
    """``get_strategy`` output (keyed by scoped node name) → ``{primitive path: in_strategy}``.

    The path comes from the node's ``smsg_path`` tag in the compiled MindIR; where MindSpore lost
    the tag, from the scope's cell path (:func:`smsg_ms.graph.mindir.cell_path_of_scope`) and the
    one primitive of that type the cell holds. A primitive called several times keeps its first
    call's strategy; disagreeing calls are listed in the notes.
    """
    from smsg_ms.graph.mindir import cell_path_of_scope

    tag_of = {node.domain: attrs.get("smsg_path") for node, _, attrs in calls}
    out: dict[str, list] = {}
    notes: list[str] = []
    for scope in sorted(raw):
        path = tag_of.get(scope)
        if not path:
            cell = cell_path_of_scope(scope, wrappers)
            op_type = scope.rsplit("/", 1)[-1].rsplit("-", 1)[0]
            candidates = hints.get(cell, {}).get(op_type, [])
            path = candidates[0] if len(candidates) == 1 else None
        if not path:
            continue
        strategy = [[int(x) for x in s] for s in raw[scope]]
        if path in out and out[path] != strategy:
            notes.append(f"{path}: calls disagree ({out[path]} kept, {strategy} at {scope})")
            continue
        out.setdefault(path, strategy)
    return out, notes


def strategies_per_call(raw: dict, calls) -> dict[str, list]:
    """``{primitive path: [in_strategy of each call]}`` for the primitives whose calls got
    different strategies (an ``auto_parallel`` planner may give each call its own).

    Calls are numbered in the order of the compiled MindIR's nodes (the order
    :mod:`smsg_ms.graph.mindir` numbers ``call_index`` in a capture); only nodes that carry the
    ``smsg_path`` tag and have a strategy in ``raw`` count.
    """
    from smsg_ms.graph.mindir import pass_of_scope

    seen: dict[str, list] = {}
    for node, _, attrs in calls:
        path = attrs.get("smsg_path")
        if not path or node.domain not in raw or pass_of_scope(node.domain) != "forward":
            continue
        seen.setdefault(path, []).append([[int(x) for x in s] for s in raw[node.domain]])
    return {p: v for p, v in sorted(seen.items()) if any(s != v[0] for s in v[1:])}


def _role(name: str, weights: set) -> str:
    """``parameter`` (a trainable weight of the network), ``optimizer`` (state the optimizer keeps
    per weight, named ``<state>.<weight>`` as Momentum's ``moments.*`` and Adam's ``adam_m.*``),
    or ``other`` (learning rate, step counter)."""
    if name in weights:
        return "parameter"
    head, _, rest = name.partition(".")
    return "optimizer" if rest in weights else "other"


def job_planner_compile(job: dict) -> dict:
    """Compile the spec's training graph under ``job["planner"]`` and measure the result.

    Planners: ``recursive_programming`` / ``dynamic_programming`` / ``sharding_propagation``
    (``auto_parallel`` with that ``search_mode``; ``strategies`` are the seeds), ``semi_auto``
    (``strategies`` written with ``shard()``), ``data_parallel`` (``semi_auto_parallel`` with no
    strategy: MindSpore gives every operator its batch-parallel strategy), ``expert`` (the
    network's own ``shard()`` calls kept). For every planner but ``expert`` the network's own
    ``shard()`` strategies are deleted first.

    Returns ``strategies_raw`` (``get_strategy``: scoped name → strategy), ``strategies``
    (primitive path → strategy of its first call), ``strategies_per_call`` (path → strategy of
    each call, for primitives whose calls disagree: :func:`strategies_per_call`), ``collectives``, ``parameters`` (per-device slice shapes from
    ``parameter_layout_dict``), ``compute_ops`` (per-device shapes of MatMul/conv nodes, both
    passes), ``compile_seconds`` (wall time of the compile, i.e. MindSpore's planning plus the
    parallel passes).
    """
    from smsg_ms.graph.capture import compile_cell, path_hints, tag_primitives
    from smsg_ms.integration.collectives import collectives_in, compute_in, flatten
    from smsg_ms.networks import build_network

    planner = job["planner"]
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r} (known: {', '.join(sorted(PLANNERS))})")
    mode, search = PLANNERS[planner]
    context = dict(job.get("context", {"full_batch": True}))
    if search:
        context["search_mode"] = search
    ms = _setup(parallel_mode=mode, extra_context=context)
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    cleared = [] if planner == "expert" else clear_shard(prims)
    unknown = sorted(set(job.get("strategies", {})) - set(prims))
    if unknown:
        raise KeyError(f"strategies name primitives the network does not have: "
                       f"{', '.join(unknown)}")
    if planner != "data_parallel":
        for path, strategy in sorted(job.get("strategies", {}).items()):
            prims[path].shard(tuple(tuple(s) for s in strategy))
    train = built.train_cell(ms)
    full_shapes = {p.name: [int(d) for d in p.shape] for p in train.get_parameters()}
    weights = {p.name for p in built.net.trainable_params()}
    t0 = time.perf_counter()
    phase = compile_cell(train, built.train_inputs, phase="train")
    seconds = time.perf_counter() - t0
    from mindspore.communication import get_group_size
    from mindspore.graph.api import _cell_graph_executor

    raw = {k: [[int(x) for x in s] for s in v]
           for k, v in _cell_graph_executor._graph_executor.get_strategy(phase).items()}
    model = _compiled_model(train, phase)
    _, calls = _node_table(model)
    by_path, notes = strategies_by_path(raw, calls, path_hints(prims), wrappers=2)
    flat = flatten(model)  # sub-graph calls inlined, each call counted
    layouts = train.parameter_layout_dict or {}
    params = []
    for p in train.get_parameters():
        layout = layouts.get(p.name)
        shape = [int(d) for d in (layout[2] if layout else p.shape)]
        params.append({"name": p.name, "shape": shape, "full_shape": full_shapes.get(p.name, shape),
                       "dtype": str(p.dtype).lower(), "role": _role(p.name, weights)})
    return {"planner": planner, "strategies_raw": raw, "strategies": by_path, "notes": notes,
            "strategies_per_call": strategies_per_call(raw, calls),
            "cleared_shard": cleared,
            "collectives": collectives_in(flat, get_group_size()),
            "parameters": params, "compute_ops": compute_in(flat), "compile_seconds": seconds}


JOBS = {"capture": job_capture, "compile": job_compile, "init": job_init,
        "pipeline_compile": job_pipeline_compile, "planner_compile": job_planner_compile,
        "read_shard": job_read_shard, "capture_train": job_capture_train,
        "plan_compile": job_plan_compile}


def main(argv: list[str]) -> int:
    job_file, result_file = argv[1], argv[2]
    with open(job_file) as fh:
        job = json.load(fh)
    try:
        result = JOBS[job["job"]](job)
        result["ok"] = True
    except Exception as exc:  # report every failure as data; the parent raises
        traceback.print_exc()
        text = str(exc).strip()
        head = text.split("\n\n")[0].split("----")[0].strip()
        result = {"ok": False, "error": f"{type(exc).__name__}: {head}",
                  "kind": type(exc).__name__}
    with open(result_file + ".tmp", "w") as fh:
        json.dump(result, fh)
    import os
    os.replace(result_file + ".tmp", result_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
