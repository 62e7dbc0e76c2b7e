"""Expert parallelism of mindformers' MoE layers (mindformers 1.9.0 ``parallel_core``
``training_graph/transformer/moe/ffn.py``): a run-level degree ``ep``, priced per candidate.

There, the token dispatcher and the experts run inside one ``Morph`` primitive with
``self_define_shard`` (MindSpore: ``frontend/parallel/ops_info/self_define_shard_info.cc``, the
layout the network configures is the only one accepted). Its layout is fixed by
``parallel_config`` (``device_matrix.py``, ``MoeLayoutManager``: device matrix
``(dp·tp/ep, ep)``): the tokens ``(B, S, h)`` cut over all ``dp·tp`` devices of a stage, the
stacked expert weights ``(E, h, 2F)`` and ``(E, F, h)`` cut ``ep``-way on ``E`` and replicated on
the ``dp·tp/ep`` others. Inside, the network's own ``AlltoAllV`` primitives (not inserted by the
compiler; the captured graph holds them) move the routed rows among the ``ep`` devices: in the
capture, per layer, two of the hidden states (dispatch and combine, ``block_size = h``) and one
of the routing probabilities (``block_size = 1``), each with its global size. So ``ep`` is no per-operator strategy:
it changes, against ``ep = 1`` (the capture's layout, which the per-operator cost model prices:
rows cut over the stage, expert weights replicated with one gradient AllReduce over the stage):

* communication per micro-batch: each ``AlltoAllV`` of hidden-state rows forward and its bprop
  (an ``AlltoAllV`` again) backward, the one of the routing probabilities forward only (the
  compiled graph of the dry-run holds 3 forward and 2 backward per layer,
  ``tests/test_mindformers_moe.py``), over ``ep`` devices, each device's buffer being ``1/d`` of
  the global tensor (``d`` = devices per stage; the dry-run's inserted ``AlltoAllV`` input at
  ``ep = d = 4`` is a quarter of the captured one), of which it sends ``(ep − 1)/ep``
  (:func:`dispatch_collectives`);
* gradient synchronisation once per step: the expert weights' AllReduce over ``d/ep`` devices
  of ``1/ep`` of them (the replicas of one expert slice: ranks ``ep`` apart, the expert axis
  being the device matrix's last), in place of one over ``d`` of all of them, none when
  ``ep = d`` (:func:`expert_sync_collectives`, the one rule the plan's predicted collectives,
  ``check`` and the price share). It is priced as the planner prices every gradient
  synchronisation (:meth:`smsg_ms.cost.model.CostModel.breakdown`: the part the operator's
  backward pass does not hide, :func:`smsg_ms.cost.overlap.exposed_grad_sync`), so the
  difference at ``ep`` subtracts exactly what the stage plan charged at ``ep = 1``;
* memory per device: parameters, gradients and optimizer states of the expert weights ÷ ``ep``,
  but for the part optimizer sharding already divides among the replicas
  (:func:`expert_memory_bytes`).

The GroupedMatmul FLOPs per device do not change (each device computes about ``N·k/d`` routed
rows whichever ``ep``). With ``p`` pipeline stages and ``m`` micro-batches (1F1B), a stage holds
``1/p`` of the layers: the step gains ``(m + p − 1)/p`` times the per-micro-batch
communication of all layers, ``1/p`` of their gradient synchronisation (stages synchronise in
parallel), and memory ``1/p`` of theirs (a derivation from the 1F1B schedule of
:mod:`smsg_ms.cost.pipeline`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..graph.model import DTYPE_BYTES
from ..graph.morph_regions import MORPH_ATTR

#: the collective primitive mindformers' dispatcher calls
ALLTOALLV = "AlltoAllV"
EXPERT_MATMUL = "GroupedMatmul"


@dataclass
class ExpertLayout:
    """What ``ep`` changes in a captured graph (global sizes at the capture's batch).

    Attributes:
        experts: routed experts per layer ``E`` (the first axis of the stacked weights).
        weights: ``{name: bytes}`` of the expert weight parameters (global).
        weight_elements: elements of those parameters.
        dispatch: ``(bytes, has_bprop)`` of every ``AlltoAllV`` of the forward pass.
        batch: samples of the capture (the bytes above are for this many).
        ops: ids of the forward ``GroupedMatmul`` operators reading the expert weights (they
            hold and synchronise them in the cost model).
        dispatch_ops: ids of the forward ``AlltoAllV`` operators, in the order of ``dispatch``.
    """

    experts: int
    weights: dict = field(default_factory=dict)
    weight_elements: int = 0
    dispatch: list = field(default_factory=list)
    batch: int = 1
    ops: list = field(default_factory=list)
    dispatch_ops: list = field(default_factory=list)


def parameter_behind(graph, name: str, hops: int = 4):
    """The parameter (:class:`~smsg_ms.graph.model.TensorInfo`) the tensor ``name`` is read
    from through at most ``hops`` Cast/Reshape, or ``None``."""
    for _ in range(hops + 1):
        t = graph.tensors.get(name)
        if t is None:
            return None
        if t.kind == "parameter":
            return t
        op = graph.producer_of(name)
        if op is None or op.type not in ("Cast", "Reshape") or not op.inputs:
            return None
        name = op.inputs[0]
    return None


def expert_layout(graph, batch: int) -> ExpertLayout | None:
    """The expert weights and dispatch collectives of mindformers' MoE layers in ``graph`` (an
    :class:`~smsg_ms.graph.model.OpGraph` captured at ``batch`` samples), or ``None`` when it has
    no ``GroupedMatmul`` reading a stacked parameter."""
    out = None
    for op in graph.ops:
        if op.type != EXPERT_MATMUL or len(op.inputs) < 2 or op.phase != "forward":
            continue
        param = parameter_behind(graph, op.inputs[1])
        w_shape = tuple(graph.tensors[op.inputs[1]].shape)
        if param is None or len(w_shape) != 3:
            continue
        out = out or ExpertLayout(int(w_shape[0]), batch=batch)
        out.ops.append(op.id)
        if param.name not in out.weights:
            out.weights[param.name] = (param.numel or 0) * DTYPE_BYTES.get(param.dtype, 4)
            out.weight_elements += param.numel or 0
    if out is None:
        return None
    rows = hidden_state_rows(graph)
    for op in graph.ops:
        if op.type == ALLTOALLV and op.phase == "forward" and op.inputs:
            t = graph.tensors[op.inputs[0]]
            # rows of hidden states (block_size h) have a bprop AlltoAllV; the routing
            # probabilities (block_size 1) none (the dry-run's compiled graph)
            hidden = int(op.attrs.get("block_size", 1) or 1) > 1
            nbytes = (t.numel or 0) * DTYPE_BYTES.get(t.dtype, 4)
            out.dispatch.append((rows.get(op.attrs.get(MORPH_ATTR), nbytes) if hidden
                                 else nbytes, hidden))
            out.dispatch_ops.append(op.id)
    return out


def hidden_state_rows(graph) -> dict[str, int]:
    """``{Morph path: bytes}``: the largest hidden-state ``AlltoAllV`` input (``block_size >
    1``) of each experts ``Morph`` region. The combine (``token_unpermutation``) sends back the
    rows the dispatch (``token_permutation``) received: the same bytes (MindSpore's 8-device
    compile of DeepSeek-V3: 0.50 MiB each). The capture sizes the combine from data-dependent
    shapes (``NonZero``, ``MaskedSelect``) of the ``fn`` compiled on the global tokens; at
    ``dp > 1`` (a network captured for the plan's devices, ``(dp, N/dp, h)`` tokens) it comes
    out ``1/dp`` of them, so each hidden-state call of a region is priced at the largest."""
    out: dict[str, int] = {}
    for op in graph.ops:
        path = op.attrs.get(MORPH_ATTR)
        if (op.type == ALLTOALLV and op.phase == "forward" and op.inputs and path
                and int(op.attrs.get("block_size", 1) or 1) > 1):
            t = graph.tensors[op.inputs[0]]
            out[path] = max(out.get(path, 0), (t.numel or 0) * DTYPE_BYTES.get(t.dtype, 4))
    return out


def morph_expert_weights(graph) -> frozenset[str]:
    """Names of the expert weight parameters :func:`expert_layout` finds (empty without)."""
    layout = expert_layout(graph, 1)
    return frozenset(layout.weights) if layout is not None else frozenset()


def expert_parallel_candidates(layout: ExpertLayout, devices: int) -> list[int]:
    """Degrees mindformers accepts: ``ep`` dividing the stage's ``dp·tp`` devices
    (``ffn.py`` ``shard``: "expert_model_parallel_size must divide (data_parallel_size *
    tensor_model_parallel_size)") and the expert count (``moe_layer.py``)."""
    return [ep for ep in range(1, devices + 1) if devices % ep == 0 and layout.experts % ep == 0]


def expert_sync_collectives(collectives, weights, ep: int) -> list:
    """``collectives`` (:class:`~smsg_ms.cost.api.Collective`, priced at ``ep = 1``) with each
    gradient AllReduce of an expert weight (``tensor`` in ``weights``) taken over the replicas of
    its ``1/ep`` slice: group ``g/ep`` (ranks ``ep`` apart, span ``((g/ep, ep),)``), ``1/ep`` of
    its bytes; dropped when ``g/ep = 1`` (each slice on one device). Others are kept as they
    are. Source: mindformers' ``MoeLayoutManager`` device matrix ``(dp·tp/ep, ep)``, expert
    axis last; MindSpore synchronises a parameter over the devices holding the same slice
    (``_MirrorOperator``, ``frontend/parallel/step_parallel.cc``)."""
    out = []
    for c in collectives:
        if ep > 1 and c.phase == "grad_sync" and c.tensor in weights:
            group = c.group // ep
            if group > 1:
                out.append(replace(c, group=group, full_bytes=c.full_bytes / ep,
                                   span=((group, ep),)))
            continue
        out.append(c)
    return out


def dispatch_collectives(layout: ExpertLayout, devices: int, ep: int,
                         micro_batch: int | None = None) -> list[dict]:
    """The ``AlltoAllV`` calls of one micro-batch at ``ep`` (none at ``ep = 1``), as plan
    collectives ``{"kind", "group", "phase", "bytes", "op"}`` (``op``: the forward operator's
    id; ``bytes``: ``S``, each device's buffer, the tensor the capture holds (all ``N·k``
    routed rows of ``micro_batch`` samples) over the stage's ``d`` devices, of which it sends
    ``(ep − 1)/ep``, :func:`smsg_ms.cost.api.ring_volume`). A hidden-state call (``block_size
    h``) has its bprop in the backward pass, the routing probabilities' none (module
    docstring)."""
    if ep <= 1:
        return []
    return [dict(c, group=ep) for c in network_dispatch_calls(layout, devices, micro_batch)]


def network_dispatch_calls(layout: ExpertLayout, devices: int,
                           micro_batch: int | None = None) -> list[dict]:
    """The ``AlltoAllV`` calls of the network's own primitives in one micro-batch's compiled
    graph, whatever the expert-parallel degree: :func:`dispatch_collectives`' calls at
    ``"group": 1`` (``ep = 1``; a plan marks them ``own_group``: the group is mindformers' own,
    which the compiled graph's reader cannot size). At ``ep = 1`` MindSpore keeps them (a
    group of one device, nothing sent: the dry-run's 8-device compile of Qwen3-MoE at
    ``ep = 1`` holds 3 forward and 2 backward per layer, of these bytes), so a plan predicts
    them there too, at no cost."""
    scale = (micro_batch or layout.batch) / layout.batch
    out = []
    for op_id, (nbytes, grad) in zip(layout.dispatch_ops, layout.dispatch):
        call = {"kind": ALLTOALLV, "group": 1, "bytes": nbytes * scale / devices, "op": op_id}
        out.append(dict(call, phase="forward"))
        if grad:
            out.append(dict(call, phase="backward"))
    return out


def expert_sync_ops(layout: ExpertLayout, graph) -> list[int]:
    """Ids of the operators that may pay the expert weights' gradient sync, ascending: the
    expert ``GroupedMatmul`` operators (``layout.ops``, priced by their family) and each expert
    weight's first reader (the holder, :mod:`smsg_ms.cost.shared_parameters`; inside the
    experts' ``Morph`` region, ``cost/morph_region.py``, the Reshape to ``[E, h, H]``)."""
    from .shared_parameters import readers

    out = set(layout.ops)
    for name in layout.weights:
        if name in graph.tensors:
            out.update(readers(graph, name)[:1])
    return sorted(out)


def expert_grad_sync_seconds(layout: ExpertLayout, model, ep: int, ops=None) -> float:
    """Seconds of the expert weights' gradient synchronisation at ``ep`` as the planner prices
    it: per expert operator (``layout.ops``) and first reader of an expert weight, its priced
    option on ``model`` (a
    :class:`~smsg_ms.cost.model.CostModel` of the stage graph on its ``d`` devices; the
    operator runs inside mindformers' ``Morph``, so it has one option, MindSpore's default),
    its collectives through :func:`expert_sync_collectives`, the ``grad_sync`` of
    :meth:`~smsg_ms.cost.model.CostModel.breakdown` (exposed past its backward pass).
    ``ops``: those operators only (default :func:`expert_sync_ops`)."""
    total = 0.0
    for op_id in (expert_sync_ops(layout, model.graph) if ops is None else ops):
        cost = model.options(model.graph.ops[op_id])[0]
        moved = replace(cost, collectives=expert_sync_collectives(cost.collectives,
                                                                  layout.weights, ep))
        total += model.breakdown(moved).get("grad_sync", 0.0)
    return total


def expert_memory_bytes(layout: ExpertLayout, graph, devices: int, ep: int, sharding=False,
                        optimizer_states: int = 2) -> float:
    """Bytes per device of the expert weights, their gradients and optimizer states (all
    captured layers) at expert parallel ``ep`` on a stage of ``devices``, counted as the
    planner counts every parameter (:func:`smsg_ms.cost.pipeline.parameter_memory`, the stage
    price's own rule): each weight's slice is ``1/ep`` of it (the stacked expert axis, its first,
    cut ``ep`` ways), held by ``devices/ep`` replicas, which shard its optimizer states (and, by
    level, the weight and the gradient) when ``sharding`` is on and MindSpore's conditions hold
    (:meth:`~smsg_ms.cost.pipeline.ParamSlice.optimizer_shardable`). Weight and gradient in the
    weight's dtype, ``optimizer_states`` fp32 states per element."""
    from .pipeline import ParamSlice, parameter_memory

    slices = []
    for name, nbytes in sorted(layout.weights.items()):
        t = graph.tensors[name]
        slices.append(ParamSlice(int(t.numel or 0) // ep, int(t.shape[0]) // ep if t.shape else 1,
                                 max(devices // ep, 1), float(nbytes),
                                 bool(t.parallel_optimizer)))
    per_element = sum(layout.weights.values()) / max(layout.weight_elements, 1)
    kinds = parameter_memory(slices, sharding, {"parameter": per_element, "gradient": per_element,
                                                "optimizer": 4.0 * optimizer_states})
    return float(sum(kinds.values()))


def expert_parallel_delta(layout: ExpertLayout, model, ep: int, *,
                          micro_batch: int | None = None, stages: int = 1,
                          micro_batches: int = 1, optimizer_states: int = 2,
                          sharding=False) -> dict:
    """Change of the step against ``ep = 1`` (module docstring):
    ``{"seconds", "memory_bytes", "alltoall_seconds", "grad_sync_seconds"}`` per device, the
    seconds of one training step, bytes of the largest stage; ``alltoall_forward`` /
    ``alltoall_backward``: the ``AlltoAllV`` calls over ``ep`` devices the compiled graph holds
    per micro-batch (all captured layers; none at ``ep = 1``, where the network's calls have a
    group of one).

    Args:
        model: :class:`~smsg_ms.cost.model.CostModel` of the stage graph on its ``d = dp·tp``
            devices (its hardware prices the AlltoAllV; :func:`expert_grad_sync_seconds`).
        micro_batch: samples per micro-batch (default the capture's batch).
        optimizer_states: fp32 states per parameter element (Adam: 2).
        sharding: the run's optimizer sharding (``enable_parallel_optimizer``: ``True`` or a
            level), as :func:`smsg_ms.cost.pipeline.parameter_memory` takes it; the memory change
            is :func:`expert_memory_bytes` at ``ep`` less at 1, so it never removes more than
            the base price charges the expert weights.

    Raises:
        ValueError: ``ep`` not in :func:`expert_parallel_candidates`.
    """
    devices, hardware = model.devices, model.hardware
    if ep not in expert_parallel_candidates(layout, devices):
        raise ValueError(f"expert_parallel {ep} must divide the stage's {devices} devices and "
                         f"the {layout.experts} experts")
    a2a = 0.0
    if ep > 1:
        for call in dispatch_collectives(layout, devices, ep, micro_batch):
            a2a += hardware.collective_seconds("AlltoAll", ep, call["bytes"])
    grad = (expert_grad_sync_seconds(layout, model, ep) - expert_grad_sync_seconds(layout, model, 1)
            if ep > 1 else 0.0)
    memory = (expert_memory_bytes(layout, model.graph, devices, ep, sharding, optimizer_states)
              - expert_memory_bytes(layout, model.graph, devices, 1, sharding, optimizer_states))
    seconds = (micro_batches + stages - 1) / stages * a2a + grad / stages
    return {"seconds": seconds, "memory_bytes": memory / stages,
            "alltoall_forward": len(layout.dispatch) if ep > 1 else 0,
            "alltoall_backward": sum(g for _, g in layout.dispatch) if ep > 1 else 0,
            "alltoall_seconds": (micro_batches + stages - 1) / stages * a2a,
            "grad_sync_seconds": grad / stages}


def choose_expert_parallel(layout: ExpertLayout, model, **kw) -> tuple[int, dict]:
    """The candidate ``ep`` of least predicted step (ties: least memory, then the smaller
    ``ep``) and its :func:`expert_parallel_delta`; every candidate is priced (a search over
    one run-level dimension)."""
    priced = [(expert_parallel_delta(layout, model, ep, **kw), ep)
              for ep in expert_parallel_candidates(layout, model.devices)]
    best = min(priced, key=lambda item: (round(item[0]["seconds"], 12),
                                         item[0]["memory_bytes"], item[1]))
    return best[1], best[0]


__all__ = ["ExpertLayout", "choose_expert_parallel", "expert_grad_sync_seconds", "expert_layout",
           "expert_memory_bytes", "expert_sync_ops",
           "expert_parallel_candidates", "expert_parallel_delta", "expert_sync_collectives",
           "dispatch_collectives", "network_dispatch_calls",
           "morph_expert_weights", "parameter_behind"]
