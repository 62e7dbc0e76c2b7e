"""Backward AllReduces of equal constant gradients in a pipeline stage are one (MindSpore's CSE).

A forward ``AllReduce`` that an operator's strategy needs (a ``ReduceMean`` over a cut axis)
has an ``AllReduce`` of its output's gradient as bprop (``grad_comm_ops.py``). Where that
gradient is a constant (an auxiliary loss summed into the returned loss: mindformers' MoE
routers), a one-stage compile folds the AllReduce (``AllReduceConstElim``,
``frontend/optimizer/irpass/special_op_eliminate``: an AllReduce whose input is a
``ValueNode``; :class:`~smsg_ms.cost.model.CostModel`'s ``fold_constant_gradients``). A stage
of a pipeline keeps it: its ``dout`` is a CNode (the loss's sens, or a gradient received from
the next stage), so the gradient is an expression, not a value; so does one stage whose loss
has rank 2 or more (its bprop ``RealDiv(Tensor[[1]], 1)`` stays a CNode:
:func:`~smsg_ms.cost.gradient_flow.folds_loss_gradient`), where a single-stage plan merges them
as one stage (``networks/stage_aux`` on 8 devices: 2 and 3 kept, as predicted). The ``"cse"`` pass of
``opt_a``, after autodiff (``frontend/optimizer/cse.cc``), then merges CNodes whose inputs are
the same nodes or tensor ``ValueNode``\\ s equal in value, shape and dtype
(``Tensor::ValueEqual``) and whose primitives compare equal: two blocks scaling their
auxiliary term by the same coefficient, ``Mul(mean_i, 0.01)``, get the same
``Mul(dout, 0.01)``, the same ``RealDiv`` of the mean's bprop and one ``AllReduce``. Micro-
batches are never merged (each has its own ``dout``), nor are stages (separate graphs).

Seen in the dry-run compile (MindSpore 2.10, ``networks/stage_aux``, 2 stages of 4 devices,
2 micro-batches, IR dumps in ``docs/networks.md``, "Constant gradients in a pipeline"): 4
blocks of coefficient 0.01 insert 2 backward AllReduces on stage 0 (4 before this rule) and 4
on stage 1 (6); coefficients 0.01, 0.02, 0.03, 0.04 insert 4 and 6.

Two such AllReduces are one when they are on one stage and their keys are equal: the
operator's type, attributes, strategy and tensor shapes (its bprop up to the AllReduce), the
collective's group and bytes, and the gradient key of the tensor
(:func:`~smsg_ms.planner.twin_gradients.gradient_keys`, which keys a constant by its value
fingerprint, :attr:`~smsg_ms.graph.model.TensorInfo.value`), cut at the stage's border: a
tensor a later stage reads has its gradient received, one ``Receive`` per tensor, keyed by its
name (two tensors whose gradients are equal expressions on the later stage still arrive as two
nodes). A gradient through an operator that key does not follow gets a key of its own (not
merged): the rule under-merges rather than over-merges.
"""
from __future__ import annotations

from ..graph.model import OpGraph
from .twin_gradients import gradient_keys
from .variables import chosen_costs


def _op_key(graph: OpGraph, op, cost) -> tuple:
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if not k.startswith("smsg_")))
    shapes = tuple((tuple(graph.tensors[n].shape), graph.tensors[n].dtype)
                   for n in op.inputs + op.outputs)
    return op.type, attrs, tuple(map(tuple, cost.strategy)), shapes


def _received(graph: OpGraph, op_stage: dict[int, int]) -> set[str]:
    """Tensors an operator of a later stage than their producer's reads."""
    out = set()
    for op in graph.ops:
        if op.id in op_stage:
            out.update(t for t in op.outputs if any(
                op_stage.get(c, op_stage[op.id]) > op_stage[op.id]
                for c in graph.tensors[t].consumers))
    return out


def merged_constant_gradients(graph: OpGraph, model, variables: list, choice: list,
                              decisions: list, stage_of: dict[str, int]
                              ) -> dict[tuple[int, int], tuple[int, int]]:
    """``{(decision index, collective index): (decision index, collective index) it is merged
    into}`` for the backward ``AllReduce`` collectives of constant gradients
    (``model.constant_gradient``) that MindSpore computes once per stage (module docstring);
    the first in decision order keeps its collective.

    Args:
        graph: the captured network the plan was made of.
        model: its :class:`~smsg_ms.cost.model.CostModel`.
        variables, choice: the stage plan's variables (:func:`~.variables.group_variables`)
            and the option chosen for each.
        decisions: the plan's decisions (``OpDecision``, one per variable, same name), their
            collectives as dicts with ``kind``, ``phase``, ``group``, ``bytes``, ``tensor``.
        stage_of: ``{decision name: stage}`` (:func:`~.pipelined.stage_of_decision`).
    """
    costs = chosen_costs(variables, choice)
    op_stage = {op.id: stage_of[var.name] for var in variables if var.name in stage_of
                for op in var.ops}
    keys = None
    first: dict[tuple, tuple[int, int]] = {}
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for di, decision in enumerate(decisions):
        for ci, c in enumerate(decision.collectives):
            if c.get("kind") != "AllReduce" or c.get("phase") != "backward":
                continue
            tensor = c.get("tensor")
            op = graph.producer_of(tensor) if tensor in graph.tensors else None
            if op is None or op.id not in costs or not model.constant_gradient(tensor):
                continue
            if keys is None:
                keys = gradient_keys(graph, costs, model.normalized,
                                     _received(graph, op_stage))
            if tensor not in keys:
                continue
            key = (stage_of[decision.name], c.get("group"), c.get("bytes"),
                   _op_key(graph, op, costs[op.id]), keys[tensor])
            if key in first:
                out[(di, ci)] = first[key]
            else:
                first[key] = (di, ci)
    return out


def merge_constant_gradients(graph: OpGraph, model, variables: list, choice: list,
                             decisions: list, stage_of: dict[str, int]) -> int:
    """Drop from ``decisions`` (in place) each backward ``AllReduce`` that
    :func:`merged_constant_gradients` merges into an earlier one of its stage, with a note on
    the decision; returns how many were dropped."""
    merged = merged_constant_gradients(graph, model, variables, choice, decisions, stage_of)
    for (di, ci), (dk, _) in sorted(merged.items(), reverse=True):
        decision = decisions[di]
        tensor = decision.collectives[ci].get("tensor")
        del decision.collectives[ci]
        decision.notes.append(f"backward AllReduce of {tensor}'s constant gradient shared with "
                              f"{decisions[dk].name}'s (equal gradient expressions on one "
                              "stage: MindSpore's CSE)")
    return len(merged)


__all__ = ["merge_constant_gradients", "merged_constant_gradients"]
