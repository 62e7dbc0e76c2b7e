"""Compile jobs: the training graph of a network with given strategies, as ``smsg-ms check``
and the tests compile it.

* ``compile``: build the spec, apply ``strategies`` (``{prim path: in_strategy}``), compile the
  training graph (``TrainOneStepCell``) on ``devices``, return the inserted collectives and the
  strategies MindSpore used (:mod:`smsg_ms.dryrun.collectives`).
* ``plan_compile``: ``compile`` with a plan's data-input layout (``dataset_strategy`` or full
  batch) and write-back (``write_back``: ``shard``, or ``propagate`` = auto_parallel with
  sharding propagation seeded by the strategies) and ``enable_alltoall``, used by
  ``smsg-ms check``.
* ``compile_each``: ``compile`` of each of several jobs in turn in one child (one start of
  MindSpore instead of one per job), each result or error kept: what the tests use to see
  MindSpore refuse several strategies, one compile each.
* ``init``: does MindSpore accept the device count?

Inputs a network declares dynamic (``set_inputs``) are compiled dynamic (:func:`declared_inputs`).
"""
from __future__ import annotations

import time

from .common import executor_strategies, setup_parallel, shard_all


def job_compile(job: dict) -> dict:
    from ...graph.capture import compile_cell, tag_primitives
    from ...networks import build_network
    from ..collectives import read_collectives

    t0 = time.perf_counter()
    ms = setup_parallel(parallel_mode=job.get("parallel_mode", "semi_auto_parallel"),
                        extra_context=job.get("context", {"full_batch": True}))
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    shard_all(tag_primitives(built.net), job.get("strategies", {}), job.get("out_strategies"))
    train = built.train_cell(ms)
    phase = compile_cell(train, declared_inputs(built, built.train_inputs), phase="train")
    strategies = executor_strategies(phase)
    collectives = read_collectives(train, phase)
    return {"collectives": collectives, "strategies": strategies,
            "seconds": time.perf_counter() - t0}


def job_compile_each(job: dict) -> dict:
    """``{"results": [...]}``: for each of ``job["jobs"]`` (``compile`` jobs), its result, or
    ``{"ok": False, "error": one line}`` when MindSpore refused it (any exception)."""
    results = []
    for one in job["jobs"]:
        try:
            results.append(dict(job_compile(one), ok=True))
        except Exception as exc:  # a refusal is a result here: the caller asserts on it
            results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
    return {"results": results}


def job_plan_compile(job: dict) -> dict:
    """``compile`` of a plan with its data-input layout: with a ``dataset_strategy``, every rank
    is given its slice of the built (global) inputs, as a data loader would, and MindSpore gets
    that ``dataset_strategy`` (labels: the batch cut of the first input on their first axis, as
    in :func:`smsg_ms.integration.writeback.dataset_layout`); without one, ``full_batch``."""
    import numpy as np

    from ...graph.capture import compile_cell, tag_primitives
    from ...networks import build_network
    from ..collectives import read_collectives

    t0 = time.perf_counter()
    propagate = job.get("write_back", "shard") == "propagate"
    context = {"search_mode": "sharding_propagation"} if propagate else {}
    if job.get("enable_alltoall"):
        context["enable_alltoall"] = True
    ms = setup_parallel(parallel_mode="auto_parallel" if propagate else "semi_auto_parallel",
                        extra_context=context)
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
    shard_all(tag_primitives(built.net), job.get("strategies", {}), job.get("out_strategies"))
    train = built.train_cell(ms)
    phase = compile_cell(train, declared_inputs(built, tuple(inputs)), phase="train")
    strategies = executor_strategies(phase)
    return {"collectives": read_collectives(train, phase), "strategies": strategies,
            "dataset_strategy": None if layout is None else [list(r) for r in ranks],
            "seconds": time.perf_counter() - t0}


def declared_inputs(built, inputs: tuple) -> tuple:
    """The training step's ``inputs`` with the axes the network declares dynamic
    (``set_inputs``) dynamic again, so MindSpore compiles the shapes the user trains with
    (:func:`smsg_ms.networks.dynamic_inputs.with_declared_dynamic`); a network that computes
    its own loss on other training inputs keeps them."""
    from ...networks.dynamic_inputs import with_declared_dynamic

    if built.train_example:
        return tuple(inputs)
    labels = len(built.labels) if built.loss is not None else 0
    return with_declared_dynamic(built.net, tuple(inputs), labels)


def job_init(job: dict) -> dict:
    """Does MindSpore accept this device count? ``init()`` succeeds for any count; the parallel
    initialisation fails at the first compile, so compile a one-MatMul network."""
    ms = setup_parallel(extra_context={"full_batch": True})
    import numpy as np
    from mindspore import nn
    from mindspore.communication import get_group_size

    from ...graph.capture import compile_cell

    n = 48 * get_group_size()
    net = nn.Dense(n, n)
    compile_cell(net, (ms.Tensor(np.zeros((n, n), np.float32)),), phase="init_probe")
    return {"group_size": get_group_size()}
