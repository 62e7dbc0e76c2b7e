"""The super-step of a pipelined training step (1F1B schedule), optimizer sharding and recompute.

Units: seconds, bytes per device, elements. Everything here is plain numbers (no sympy): the
outer pipeline search evaluates these formulas many thousand times.

Schedule (PipeDream-Flush / 1F1B, Narayanan et al. 2021, "Efficient large-scale language model
training on GPU clusters using Megatron-LM", §2.2): with ``p`` stages and ``m`` micro-batches a
training step takes ``(m + p − 1)`` micro-step slots of the slowest stage, whose per-micro-batch time
``t_s`` is its forward + backward micro-steps plus its point-to-point sends (the boundary activation
forward, the gradient of its input backward; sends are not overlapped with compute). The idle part is
the bubble ``(p − 1) / (m + p − 1)`` (Huang et al. 2019, "GPipe", §2.2). Each stage then synchronises
its own parameters' gradients once per step (``g_s``), right after its last backward micro-step, so

    super-step = max_s ((m + p − 1) · t_s + g_s)

which equals ``(m + p − 1) · max t_s + max g_s`` when the slowest stage also has the largest
synchronisation (identical blocks), and is what the search minimises exactly.

Memory of stage ``s`` (0-based) under 1F1B holds the stored activations of ``p − s`` micro-batches
in flight (``p`` on the first stage; Narayanan et al. 2021 §2.2) plus parameters, gradients and
optimizer state.

Optimizer sharding (MindSpore ``enable_parallel_optimizer``): a parameter replicated on ``r`` devices
has its gradient ReduceScattered and its weight AllGathered (instead of one AllReduce: same ring volume
``2(r−1)/r·S``, one more synchronisation) and keeps ``1/r`` of its weight and of its optimizer state
(its gradient, accumulated over the micro-batches before the ReduceScatter, stays whole), but only
when its ``Parameter.parallel_optimizer`` flag is on and the
first axis of its per-device slice divides ``r``; otherwise MindSpore leaves it out (full optimizer
state on every device, AllReduce as before; ``shared/docs/mindspore-notes.md``), and only when the
whole parameter holds at least ``parallel_optimizer_threshold`` (64 KB by default) bytes.

Recompute (MindSpore ``Cell.recompute()``, Chen et al. 2016 "Training deep nets with sublinear memory
cost"): a recomputed layer stores only its input per micro-batch, recomputes its forward in the
backward pass (``+ forward seconds``), and while it is recomputed holds its full activations once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .api import collective_seconds

#: MindSpore's default ``parallel_optimizer_threshold``: 64 KB (KB = 1024 bytes), opt_param_mgr.cc.
OPTIMIZER_THRESHOLD_BYTES = 64 * 1024

#: Bytes per parameter element by kind for mixed-precision Adam: fp16 weight and gradient, fp32
#: master weight + two Adam moments (Rajbhandari et al. 2020, "ZeRO", §3: 2 + 2 + 12 = 16 B/param).
MIXED_PRECISION_ADAM = {"parameter": 2.0, "gradient": 2.0, "optimizer": 12.0}


@dataclass(frozen=True)
class ParamSlice:
    """One parameter as one device of a stage holds it.

    Attributes:
        elements: elements of the per-device slice (after operator-level sharding).
        first_axis: length of the slice's first axis (decides MindSpore's optimizer sharding).
        replicas: devices of the stage holding the same slice (data-parallel degree of this
            parameter: gradient AllReduce group size, optimizer shard count).
        full_bytes: bytes of the whole parameter (all its elements × dtype size), what
            MindSpore's optimizer-sharding threshold is compared with (default: above any
            threshold).
        parallel_optimizer: the parameter's own ``Parameter.parallel_optimizer`` flag;
            ``False`` keeps it out of optimizer sharding (mindformers' embedding table).
        span: the replicas' ranks inside the stage, ``((size, stride), ...)``
            (:meth:`smsg_ms.cost.layout.TensorLayout.replica_span`); ``()``: ranks
            ``0 .. replicas − 1``.
    """

    elements: int
    first_axis: int
    replicas: int
    full_bytes: float = math.inf
    parallel_optimizer: bool = True
    span: tuple = ()

    def optimizer_shardable(self, threshold: float = OPTIMIZER_THRESHOLD_BYTES) -> bool:
        """MindSpore shards it only when its ``parallel_optimizer`` flag is on, ``replicas > 1``,
        ``first_axis % replicas == 0`` and the whole parameter is not smaller than ``threshold``
        bytes
        (``frontend/parallel/parallel_optimizer/opt_param_mgr.cc``: ``SplitParam`` skips
        ``size < parallel_optimizer_threshold``, size = whole shape × dtype size in KB, default
        64 KB; checked in the dry-run: a 128 KB weight whose slice is 32 KB is sharded, a 64 KB
        one is, a 512 B norm weight is not)."""
        return (self.parallel_optimizer and self.replicas > 1
                and self.first_axis % self.replicas == 0 and self.full_bytes >= threshold)


@dataclass(frozen=True)
class LayerCost:
    """Per-device cost of one layer of the chain, for one micro-batch on a stage of ``d`` devices.

    Attributes:
        forward_seconds, backward_seconds: micro-step times of the layer's operators (compute and
            forward/backward collectives of its strategies), one micro-batch.
        activation_bytes: bytes stored for the backward pass, one micro-batch.
        input_bytes: bytes of the layer's input per device (what recompute keeps), one micro-batch.
        output_bytes: bytes of its output per device (sent to the next stage at a boundary).
        params: the layer's parameters as :class:`ParamSlice`.
        name: label (``layers.3``) used in plans.
        hidden_sync_seconds: of the gradient synchronisation of its parameters, the seconds the
            backward pass hides when a step has one micro-batch (no gradient accumulation:
            :mod:`smsg_ms.cost.overlap`).
    """

    forward_seconds: float
    backward_seconds: float
    activation_bytes: float
    input_bytes: float
    output_bytes: float
    params: tuple[ParamSlice, ...] = ()
    name: str = ""
    hidden_sync_seconds: float = 0.0


@dataclass(frozen=True)
class Links:
    """Communication constants. With ``machine`` (a :class:`~smsg_ms.cost.hardware.Machine`)
    every group is placed on its levels: a send between neighbour stages pairs rank ``r`` with
    ``r + stage_devices`` (MindSpore numbers the ranks of a stage consecutively, stage ``s``
    holds ranks ``s·d .. s·d + d − 1``: ``stage_id = rank / per_stage_device_num``), a
    gradient synchronisation the parameter's replicas (:attr:`ParamSlice.span`). Without, one
    flat level: ``bandwidth`` bytes/s per device, ``latency`` s per collective or send,
    ``p2p_bandwidth`` for sends between stages (defaults to ``bandwidth``)."""

    bandwidth: float
    latency: float = 0.0
    p2p_bandwidth: float | None = None
    machine: Any = None
    stage_devices: int = 1

    def for_stage(self, devices: int) -> "Links":
        """The same links for stages of ``devices`` devices."""
        return replace(self, stage_devices=devices)

    def send_seconds(self, nbytes: float) -> float:
        """One Send of ``nbytes`` to the neighbour stage."""
        if nbytes <= 0:
            return 0.0
        # a Send pairs two devices; ring_volume counts its whole tensor
        if self.machine is not None:
            return self.machine.collective_seconds("Send", 2, nbytes,
                                                   ((2, self.stage_devices),))
        return collective_seconds("Send", (2,), nbytes,
                                  ((self.p2p_bandwidth or self.bandwidth, self.latency),))

    def grad_sync_seconds(self, param: ParamSlice, grad_bytes: float, sharded: bool) -> float:
        """Gradient synchronisation of one parameter once per step: AllReduce ``2(r−1)/r·S``, or
        ReduceScatter + AllGather (same volume, two synchronisations) when optimizer-sharded."""
        sync = 2 if sharded else 1
        if self.machine is not None:
            return self.machine.collective_seconds("AllReduce", param.replicas,
                                                   param.elements * grad_bytes, param.span, sync)
        return collective_seconds("AllReduce", (param.replicas,), param.elements * grad_bytes,
                                  ((self.bandwidth, self.latency),), sync)


def parameter_memory(params, sharding: bool, bytes_per: dict | None = None) -> dict[str, float]:
    """Bytes per device by kind (``parameter``, ``gradient``, ``optimizer``) of ``params``.

    With ``sharding`` the weight and the optimizer state of each shardable parameter are divided by
    its replicas ``r``, its gradient is not: in MindSpore's compiled training graph (CPU dry-run,
    ``tests/test_pipeline_check.py``) a sharded weight and its optimizer moments have the slice's
    first axis divided by ``r`` while its gradient accumulator (``accu_grads``) keeps the slice.
    """
    b = bytes_per or MIXED_PRECISION_ADAM
    out = {"parameter": 0.0, "gradient": 0.0, "optimizer": 0.0}
    for prm in params:
        div = prm.replicas if sharding and prm.optimizer_shardable() else 1
        out["parameter"] += prm.elements * b["parameter"] / div
        out["gradient"] += prm.elements * b["gradient"]
        out["optimizer"] += prm.elements * b["optimizer"] / div
    return out


def stored_activation_bytes(layers, recompute) -> tuple[float, float]:
    """``(kept, work)``: activation bytes one micro-batch keeps for the backward pass over
    ``layers`` (inputs only for recomputed layers), and the working set of rematerialising the
    largest recomputed layer (held once, not per micro-batch)."""
    kept, work = 0.0, 0.0
    for layer, rc in zip(layers, recompute):
        if rc:
            kept += layer.input_bytes
            work = max(work, layer.activation_bytes - layer.input_bytes)
        else:
            kept += layer.activation_bytes
    return kept, work


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Idle fraction of the 1F1B/GPipe schedule: ``(p − 1)/(m + p − 1)`` (GPipe §2.2)."""
    if stages < 1 or micro_batches < 1:
        raise ValueError(f"stages and micro-batches must be >= 1, got {stages}, {micro_batches}")
    return (stages - 1) / (micro_batches + stages - 1)


@dataclass
class StageCost:
    """Cost of one stage (layers ``[start, stop)`` of the chain) under 1F1B."""

    start: int
    stop: int
    micro_seconds: float          # t_s: forward + backward (+ recompute) + sends, one micro-batch
    grad_sync_seconds: float      # g_s: once per step
    memory: dict[str, float] = field(default_factory=dict)   # bytes per device by kind

    @property
    def memory_bytes(self) -> float:
        return sum(self.memory.values())


def stage_cost(layers, start: int, stop: int, stage: int, stages: int, *, recompute,
               sharding: bool, links: Links, bytes_per: dict | None = None,
               micro_batches: int | None = None) -> StageCost:
    """Cost of stage ``stage`` of ``stages`` holding ``layers[start:stop]``.

    Args:
        layers: the whole chain (list of :class:`LayerCost` for this stage size and micro-batch).
        recompute: one bool per layer of the stage.
        sharding: optimizer sharding on.
        links: communication constants.
        micro_batches: with 1 (and no optimizer sharding), no gradient accumulation: the
            synchronisation overlaps the backward pass (:attr:`LayerCost.hidden_sync_seconds`);
            otherwise MindSpore synchronises the accumulated gradients after the last
            micro-batch, not overlapped.

    Raises:
        ValueError: empty stage or stage index outside ``[0, stages)``.
    """
    if not 0 <= start < stop <= len(layers):
        raise ValueError(f"stage {stage} holds no layer (layers {start}..{stop})")
    if not 0 <= stage < stages:
        raise ValueError(f"stage index {stage} is outside 0..{stages - 1}")
    part = layers[start:stop]
    b = bytes_per or MIXED_PRECISION_ADAM
    t = sum(x.forward_seconds + x.backward_seconds for x in part)
    t += sum(x.forward_seconds for x, rc in zip(part, recompute) if rc)
    if stop < len(layers):
        t += links.send_seconds(part[-1].output_bytes)       # activation to the next stage
    if start > 0:
        t += links.send_seconds(part[0].input_bytes)         # gradient to the previous stage
    params = [prm for x in part for prm in x.params]
    g = sum(links.grad_sync_seconds(prm, b["gradient"],
                                    sharding and prm.optimizer_shardable()) for prm in params)
    if micro_batches == 1 and not sharding:
        g = max(0.0, g - sum(x.hidden_sync_seconds for x in part))
    memory = parameter_memory(params, sharding, b)
    kept, work = stored_activation_bytes(part, recompute)
    memory["activation"] = (stages - stage) * kept + work
    return StageCost(start, stop, t, g, memory)


def super_step_seconds(stage_costs, micro_batches: int) -> float:
    """``max_s ((m + p − 1) · t_s + g_s)`` over the stages (see the module docstring)."""
    slots = micro_batches + len(stage_costs) - 1
    return max(slots * c.micro_seconds + c.grad_sync_seconds for c in stage_costs)
