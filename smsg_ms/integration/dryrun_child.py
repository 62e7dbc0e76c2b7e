"""Entry point of the dry-run child process: ``python -m smsg_ms.integration.dryrun_child JOB OUT``.

Reads a JSON job, does it under the CPU dry-run environment set by
:func:`smsg_ms.integration.dryrun.run_child`, writes a JSON result. Jobs:

* ``capture``: build the network spec under ``no_init_parameters``, compile forward in
  semi-auto parallel, return ``{"graph": OpGraph dict}``.
* ``compile``: build the spec, apply ``strategies`` (``{prim path: in_strategy}``), compile the
  training graph (``TrainOneStepCell``) on ``devices``, return the inserted collectives and the
  strategies MindSpore used (:mod:`smsg_ms.integration.collectives`).
* ``plan_compile``: ``compile`` with a plan's data-input layout (``dataset_strategy`` or full
  batch), used by ``smsg-ms check``.
* ``pipeline_compile``: the same for a pipelined plan (``pipeline`` record: stages, micro-batches,
  stage and recompute per block, optimizer sharding), one rank (:func:`job_pipeline_compile`).

Errors become ``{"ok": false, "error": one paragraph, "kind": ...}``; the full traceback is only
written to stderr.
"""
from __future__ import annotations

import json
import sys
import time
import traceback


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
    from smsg_ms.graph.capture import compile_cell, read_mindir, tag_primitives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    _setup(extra_context={"full_batch": True})
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    tag_primitives(built.net)
    built.net.set_train(False)
    phase = compile_cell(built.net, built.inputs, phase="smsg_capture")
    graph = read_mindir(built.net, phase, built.name)
    return {"graph": graph.to_dict(), "seconds": time.perf_counter() - t0}


def job_compile(job: dict) -> dict:
    from smsg_ms.graph.capture import compile_cell, tag_primitives
    from smsg_ms.integration.collectives import read_collectives
    from smsg_ms.networks import build_network

    t0 = time.perf_counter()
    ms = _setup(parallel_mode=job.get("parallel_mode", "semi_auto_parallel"),
                extra_context=job.get("context", {"full_batch": True}))
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    prims = tag_primitives(built.net)
    unknown = []
    for path, strategy in sorted(job.get("strategies", {}).items()):
        prim = prims.get(path)
        if prim is None:
            unknown.append(path)
            continue
        prim.shard(tuple(tuple(s) for s in strategy))
    if unknown:
        raise KeyError(f"plan names primitives the network does not have: {', '.join(unknown)}")
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
    ms = _setup()
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
    prims = tag_primitives(built.net)
    unknown = sorted(set(job.get("strategies", {})) - set(prims))
    if unknown:
        raise KeyError(f"plan names primitives the network does not have: {', '.join(unknown)}")
    for path, strategy in sorted(job.get("strategies", {}).items()):
        prims[path].shard(tuple(tuple(s) for s in strategy))
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
    the built ones tiled ``micro_batches`` times along the batch axis (the global batch).
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
    prims = tag_primitives(built.net)
    unknown = sorted(set(job.get("strategies", {})) - set(prims))
    if unknown:
        raise KeyError(f"plan names primitives the network does not have: {', '.join(unknown)}")
    for path, strategy in sorted(job.get("strategies", {}).items()):
        prims[path].shard(tuple(tuple(s) for s in strategy))
    marked = mark_cells(built.net, pipeline)
    net = built.net

    class _WithLoss(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.network = net
            self.mean = ops.ReduceMean()

        def construct(self, *args):
            return self.mean(self.network(*args))

    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    train = pipeline_train_cell(_WithLoss(), opt, pipeline)
    micro = int(pipeline["micro_batches"]) if int(pipeline["stages"]) > 1 else 1
    inputs = tuple(ms.Tensor(np.tile(x.asnumpy(), (micro,) + (1,) * (x.ndim - 1)))
                   for x in built.inputs)
    phase = compile_cell(train, inputs, phase="train")
    return {"collectives": read_collectives(train, phase), "marked": marked,
            "seconds": time.perf_counter() - t0}


JOBS = {"capture": job_capture, "compile": job_compile, "init": job_init,
        "pipeline_compile": job_pipeline_compile, "plan_compile": job_plan_compile}


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
