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
    """``compile`` with a plan's data-input layout: ``dataset_strategy`` (lists → tuples, as
    MindSpore wants) or ``full_batch`` when it is ``None``."""
    layout = job.get("dataset_strategy")
    context = dict(job.get("context", {}))
    if layout is None:
        context["full_batch"] = True
    else:
        context.update(full_batch=False,
                       dataset_strategy=tuple(tuple(int(c) for c in s) for s in layout))
    return job_compile(dict(job, context=context))


JOBS = {"capture": job_capture, "compile": job_compile, "plan_compile": job_plan_compile}


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
