"""Weights whose gradients are one expression share one gradient AllReduce (MindSpore's CSE).

MindSpore inserts a ``_MirrorOperator`` per replicated weight (``step_parallel.cc``,
``InsertMirrorOps``); its bprop is an ``AllReduce`` of the weight's gradient
(``grad_comm_ops.py``, ``get_bprop_mirror_operator``). Autodiff runs after the parallel pass,
and the ``"cse"`` pass of ``GetOptPassesA`` (``frontend/optimizer/cse.cc``) then merges CNodes
whose inputs are the same nodes and whose primitives compare equal (``CSE::CheckReplace``: it
looks at neither ``no_eliminate`` nor the ``mirror_user_id`` primal attribute). Two weights
whose gradients are the same expression, e.g. ``h * w1 + h * w2`` (``dw1 = dw2 = dout * h``)
or ``x @ w1 + b1 + y @ w2 + b2`` (``db1 = db2``, the bias gradient of the same ``dout``), thus
end with one backward ``Mul`` (or ``BiasAddGrad``) and one ``AllReduce`` over the same group,
which both weights' optimizer updates read. Seen in the dry-run compile (MindSpore 2.10,
``networks/two_step_gathers``, ``networks/twin_dense``): after ``opt_a`` the two
``ApplyMomentum`` of ``w1`` and ``w2`` read one ``AllReduce``.

The gradient of a tensor is keyed structurally (:func:`gradient_keys`), against the operators'
order: equal keys mean equal expressions after CSE. A tensor read by one operator input only
gets

* from an ``Add`` (:data:`~smsg_ms.planner.decisions.DOUT_TO_EACH_INPUT`): the Add's output
  gradient itself where the tensor has the output's shape and dtype and needs no
  redistribution into the Add; else that gradient summed to the tensor's shape (a broadcast
  bias) and redistributed back from the Add's input layout to the tensor's own (equal for
  inputs of one shape and layouts);
* from an operator of :data:`BPROP_READS`: a key of the operator's type, attributes, strategy,
  input index, the forward tensors the bprop of that input reads (the same tensor, redistributed
  alike, is one node after CSE; a constant by its value fingerprint, shape and dtype, as CSE
  takes tensor ``ValueNode``\\ s equal in value for one) and the output's gradient key;
* from anything else, or from more than one read: a key of its own (not merged).

Weights merge when their keys, shapes, dtypes and layouts (so the mirror's group) are equal.

Not modelled: longer chains of operators outside :data:`BPROP_READS`, a weight read twice, an
optimizer-sharded weight (its AllGather is its own, only its gradient's ReduceScatter would be
shared: not checked against a compile, and the dropped ``grad_sync`` entry takes both out of
``check``'s per-stage prediction). The cost model still prices each weight's AllReduce (the
planner's objective is a sum per operator): only the plan's predicted collectives are merged.
"""
from __future__ import annotations

from collections import defaultdict

from ..graph.model import OpGraph

#: ``{operator type: {input index: indices of the forward inputs its bprop reads}}`` besides
#: ``dout`` (``mindspore/ops/_grad_experimental``, bprop expanders): ``Mul``: ``dx = dout * y``;
#: ``MatMul``: ``dw = x^T dout``; ``BiasAdd``: ``dx = dout``, ``db = BiasAddGrad(dout)``;
#: ``Sub``: ``dx = dout``, ``dy = -dout``. None reads the input it differentiates for, or the
#: output.
BPROP_READS = {
    "Mul": {0: (1,), 1: (0,)},
    "MatMul": {0: (1,), 1: (0,)},
    "BatchMatMul": {0: (1,), 1: (0,)},
    "MatMulExt": {0: (1,), 1: (0,)},
    "BatchMatMulExt": {0: (1,), 1: (0,)},
    "BiasAdd": {0: (), 1: ()},
    "Sub": {0: (), 1: ()},
}
#: operators whose bprop gives ``dout`` itself to each input of the output's shape
#: (:data:`smsg_ms.planner.decisions.DOUT_TO_EACH_INPUT` less ``InplaceAddExt``, whose
#: gradients' merge was not checked against a compile)
_DOUT_TO_EACH_INPUT = frozenset({"Add", "AddExt"})


def _attrs(op) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if not k.startswith("smsg_")))


def _read_key(graph: OpGraph, name: str):
    """A forward tensor a bprop reads, as CSE tells it apart: a constant whose value the capture
    fingerprinted by that value, shape and dtype (two tensor ``ValueNode``\\ s equal in value
    are one, ``Tensor::ValueEqual``); anything else by its name."""
    tensor = graph.tensors[name]
    if tensor.kind == "constant" and tensor.value:
        return ("constant", tensor.value, tuple(tensor.shape), tensor.dtype)
    return name


def gradient_keys(graph: OpGraph, costs: dict, normalized,
                  received=()) -> dict[str, tuple]:
    """``{tensor name: key of its gradient expression}`` for the tensors the outputs read
    (module docstring); equal keys: MindSpore's CSE computes the two gradients once.

    Args:
        graph: the captured network.
        costs: ``{operator id: chosen OpCost}``
            (:func:`~smsg_ms.planner.variables.chosen_costs`); operators not in it (not
            planned) give their inputs keys of their own.
        normalized: ``TensorLayout -> TensorLayout`` normal form (``CostModel.normalized``).
        received: tensors whose gradient a pipeline stage receives from a later stage (a
            ``Receive`` of its own each): keyed ``("received", name)``, as the outputs are.
    """
    key: dict[str, tuple] = {name: ("output", name) for name in graph.outputs}
    key.update({name: ("received", name) for name in received if name not in key})

    def layout_out(name):   # the layout the tensor's producer gives it (None: no producer)
        op = graph.producer_of(name)
        cost = costs.get(op.id) if op is not None else None
        return None if cost is None else normalized(cost.out_layouts[op.outputs.index(name)])

    for op in reversed(graph.ops):          # topological order, reversed
        cost = costs.get(op.id)
        out_key = key.get(op.outputs[0]) if len(op.outputs) == 1 else None
        for i, name in enumerate(op.inputs):
            tensor = graph.tensors[name]
            own = ("own", name)
            if name in key or tensor.kind == "constant":
                continue
            if cost is None or out_key is None or op.inputs.count(name) != 1 \
                    or len(tensor.consumers) != 1:
                key[name] = own
                continue
            source, into = layout_out(name), normalized(cost.in_layouts[i])
            back = (tuple(tensor.shape), tensor.dtype, source, into)
            if op.type in _DOUT_TO_EACH_INPUT:
                out = graph.tensors[op.outputs[0]]
                same = back[:2] == (tuple(out.shape), out.dtype)
                if same and source in (None, into):
                    key[name] = out_key             # dout itself, not redistributed
                else:                               # reduced to the shape, redistributed back
                    key[name] = ("dout", out_key) + back
            elif i in BPROP_READS.get(op.type, {}):
                reads = tuple((j, _read_key(graph, op.inputs[j]), normalized(cost.in_layouts[j]))
                              for j in BPROP_READS[op.type][i])
                key[name] = ("bprop", op.type, _attrs(op), tuple(map(tuple, cost.strategy)), i,
                             reads, out_key) + back
            else:
                key[name] = own
    return key


def shared_syncs(graph: OpGraph, costs: dict, normalized) -> dict[str, str]:
    """``{weight: the earlier weight whose gradient AllReduce it shares}``: trained weights
    (``requires_grad``) with equal gradient keys (:func:`gradient_keys`), the first in graph
    order keeping its AllReduce."""
    keys = gradient_keys(graph, costs, normalized)
    groups: dict[tuple, list[str]] = defaultdict(list)
    for name, tensor in graph.tensors.items():
        if tensor.kind != "parameter" or not tensor.requires_grad or name not in keys \
                or len(tensor.consumers) != 1 or tensor.consumers[0] not in costs:
            continue            # ("own", name) keys are another tensor's only through Adds
        reader = graph.ops[tensor.consumers[0]]
        layout = normalized(costs[reader.id].in_layouts[reader.inputs.index(name)])
        groups[(keys[name], tuple(tensor.shape), tensor.dtype, layout)].append(name)
    order = {name: i for i, name in enumerate(graph.tensors)}
    out = {}
    for names in groups.values():
        if len(names) > 1:
            first, *rest = sorted(names, key=order.__getitem__)
            out.update({name: first for name in rest})
    return out


def merge_shared_syncs(graph: OpGraph, costs: dict, normalized, decisions: list,
                       where: dict) -> None:
    """Drop from ``decisions`` (in place) the ``grad_sync`` collective of each weight whose
    AllReduce MindSpore shares with an earlier one (:func:`shared_syncs`), with a note on the
    decision (``where``: :func:`~smsg_ms.planner.variables.variable_index`)."""
    for weight, kept in sorted(shared_syncs(graph, costs, normalized).items()):
        reader = graph.tensors[weight].consumers[0]
        if reader not in where:
            continue
        decision = decisions[where[reader][0]]
        before = len(decision.collectives)
        decision.collectives = [c for c in decision.collectives
                                if not (c.get("phase") == "grad_sync"
                                        and c.get("tensor") == weight)]
        if len(decision.collectives) < before:
            decision.notes.append(f"gradient AllReduce of {weight} shared with {kept}'s "
                                  "(equal gradient expressions: MindSpore's CSE)")


__all__ = ["BPROP_READS", "gradient_keys", "merge_shared_syncs", "shared_syncs"]
