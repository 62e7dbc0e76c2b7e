"""What the training wrapper's loss reads of the network, and what moving it there costs.

The one place the loss redistribution is defined: which outputs the loss reads, from which
producer, in which layout (:func:`loss_reads`), and what the move costs
(:meth:`LossRead.seconds`, :meth:`LossRead.collectives`). The problem's unary terms
(:mod:`smsg_ms.planner.problem`), the plan's breakdown and collectives
(:mod:`smsg_ms.planner.decisions`) and the per-block pipeline costs
(:mod:`smsg_ms.planner.stages`, which splits the collectives' seconds into forward and
backward) all read it from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..graph.model import OpGraph, TensorInfo


def loss_layout(tensor, devices: int):
    """Layout the training wrapper's loss needs on a network output.

    The loss cell's primitives carry no strategy, so semi-auto parallel gives them MindSpore's
    batch-parallel default (``operator_info.cc``, ``GenerateBatchParallelStrategy``): the first
    dimension cut ``gcd(devices, size)``-way (:func:`smsg_ms.cost.model.batch_parallel_cut`),
    the tensor replicated when that is 1. A producer
    with another layout pays the redistribution into it (a vocabulary-parallel LM head pays an
    AllGather of the logits forward and a ReduceScatter backward).
    """
    from ..cost.layout import TensorLayout, operator_layout
    from ..cost.model import batch_parallel_cut

    shape = tensor.shape
    cut = batch_parallel_cut(devices, [shape[0]]) if shape else 1
    if cut == devices:
        return TensorLayout.from_cuts((cut,) + (1,) * (len(shape) - 1), devices)
    if cut > 1:  # an operator's layout: replicas on the right of the device matrix
        return operator_layout([cut] + [1] * (len(shape) - 1), list(range(len(shape))), devices)
    return TensorLayout.replicated(len(shape), devices)


@dataclass(frozen=True)
class LossRead:
    """One network output the loss reads: the tensor, its producer (operator id, output index,
    and its search variable and call), and the layout the loss needs (:func:`loss_layout`)."""

    tensor: TensorInfo
    producer: int
    output: int
    variable: int
    call: int
    need: object

    def source(self, variables, option: int):
        """The producer's output layout under option ``option`` of its variable."""
        return variables[self.variable].options[option][self.call].out_layouts[self.output]

    def seconds(self, model, src) -> float:
        """Seconds of the redistribution from the producer's layout ``src`` into the loss's
        (``CostModel.redistribution_seconds`` of the normal forms)."""
        return model.redistribution_seconds(self.tensor, model.normalized(src),
                                            model.normalized(self.need))

    def collectives(self, model, src) -> list:
        """The collectives of that redistribution (``CostModel.redistribution``)."""
        return model.redistribution(self.tensor, src, self.need)


def loss_reads(graph: OpGraph, devices: int, index: dict) -> list[LossRead]:
    """Every network output made by an operator, once each in output order, as a
    :class:`LossRead`; ``index``: :func:`smsg_ms.planner.variables.variable_index`."""
    out = []
    for tname in dict.fromkeys(graph.outputs):
        t = graph.tensors[tname]
        if t.producer is None:
            continue
        u, uc = index[t.producer]
        out.append(LossRead(t, t.producer, graph.ops[t.producer].outputs.index(tname), u, uc,
                            loss_layout(t, devices)))
    return out
