"""Tensors a pipelined step computes once, not once per micro-batch: those made from trained
parameters alone (no data input, no tensor received from another stage).

MindSpore's pipeline runs the network once per micro-batch (``nn.PipelineCell``); a
computation that reads no micro-batch is the same in every copy and is merged into one, so a
forward redistribution of such a tensor is inserted once per step. Observed in the CPU dry-run
(MindSpore 2.10, ``tests/test_border_tails.py``: :mod:`smsg_ms.networks.window_bias` chained,
the relative-position bias ``matmul(index, table)`` gathered at ``attn + bias``: one forward
AllGather per block and step on both stages, its backward ReduceScatter once per
micro-batch; mindcv Swin's stage 1 likewise).
"""
from __future__ import annotations

from ..graph.model import OpGraph


def parameter_only(graph: OpGraph) -> list[str]:
    """Names of the activations computed from trained parameters and constants only (at least
    one trained parameter), sorted."""
    weights = {n for n, t in graph.tensors.items() if t.kind == "parameter" and t.requires_grad}
    data = set(graph.inputs)
    from_data: set[str] = set(data)
    from_weight: set[str] = set(weights)
    for op in graph.ops:                    # topological order
        if any(n in from_data for n in op.inputs):
            from_data.update(op.outputs)
        elif any(n in from_weight for n in op.inputs):
            from_weight.update(op.outputs)
    return sorted(n for n in from_weight - weights if n not in from_data)


__all__ = ["parameter_only"]
