"""The ``pipeline_compile`` job: one rank of a pipelined plan's training graph (``pipeline``
record: stages, micro-batches, stage and recompute per block, optimizer sharding)."""
from __future__ import annotations

import time

from .common import setup_parallel, shard_all


def job_pipeline_compile(job: dict) -> dict:
    """Compile one rank of a pipelined training graph (``shared/docs/mindspore-dryrun.md``).

    Job keys: ``spec``, ``options`` (network options; ``batch`` is the *micro-batch* size the network
    is built for), ``pipeline`` (the ``Plan.pipeline`` record), ``strategies``. The data inputs are
    the built training inputs (labels too; mindformers' ``seq + 1`` tokens) tiled
    ``micro_batches`` times along the batch axis (the global batch); the network's loss (if it
    has one outside) is applied, as in ``BuiltNetwork.train_cell``.
    """
    import numpy as np

    from ...graph.capture import compile_cell, tag_primitives
    from ...integration.pipeline import (check_pipeline, mark_cells, pipeline_context,
                                         pipeline_train_cell)
    from ...networks import build_network
    from ...networks.default_loss import outputs_mean
    from ..collectives import read_collectives

    t0 = time.perf_counter()
    pipeline = job["pipeline"]
    ctx = {"full_batch": True}
    ctx.update(pipeline_context(pipeline))
    if job.get("enable_alltoall"):
        ctx["enable_alltoall"] = True
    ms = setup_parallel(extra_context=ctx)
    from mindspore import nn
    from mindspore.communication import get_group_size
    check_pipeline(pipeline, get_group_size())
    built = build_network(job["spec"], no_init=True, **job.get("options", {}))
    shard_all(tag_primitives(built.net), job.get("strategies", {}), job.get("out_strategies"))
    marked = mark_cells(built.net, pipeline)
    net = built.net

    loss_fn = built.loss
    n_labels = len(built.labels) if loss_fn is not None else 0

    class _WithLoss(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.network = net
            self.loss_fn = loss_fn
            # mean(out²), not mean(out): its gradient depends on the micro-batch, so the
            # compiler cannot merge the micro-batches' backward passes as common terms
            self.mean = outputs_mean(square=True)

        def construct(self, *args):
            out = self.network(*args[:len(args) - n_labels])
            if self.loss_fn is None:
                return self.mean(out)
            return self.loss_fn(out, *args[len(args) - n_labels:])

    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    train = pipeline_train_cell(_WithLoss(), opt, pipeline)
    micro = int(pipeline.get("micro_batches", 1))
    inputs = tuple(ms.Tensor(np.tile(x.asnumpy(), (micro,) + (1,) * (x.ndim - 1)))
                   for x in built.train_inputs)
    phase = compile_cell(train, inputs, phase="train")
    from ...cost.pipeline import SELECTIVE_TYPES
    from ..collectives import read_op_counts

    return {"collectives": read_collectives(train, phase), "marked": marked,
            "selective_ops": read_op_counts(train, phase, SELECTIVE_TYPES),
            "parameters": parameter_layouts(train), "seconds": time.perf_counter() - t0}


def parameter_layouts(train) -> list[dict]:
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
