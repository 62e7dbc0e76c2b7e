"""The super-step of a pipelined training step (1F1B schedule), optimizer sharding and recompute.

Units: seconds, bytes per device, elements. Everything here is plain numbers (no sympy): the
outer pipeline search evaluates these formulas many thousand times.

Schedule (PipeDream-Flush / 1F1B, Narayanan et al. 2021, "Efficient large-scale language model
training on GPU clusters using Megatron-LM", §2.2): with ``p`` stages and ``m`` micro-batches a
training step takes ``(m + p − 1)`` micro-step slots of the slowest stage, whose per-micro-batch time
``t_s`` is its forward + backward micro-steps plus its point-to-point transfers (the boundary activation
forward, the gradient of its input backward, each Sent by one stage and Received by the next;
transfers are not overlapped with compute). The idle part is
the bubble ``(p − 1) / (m + p − 1)`` (Huang et al. 2019, "GPipe", §2.2).

Send/Receive and compute do not overlap in MindSpore's 1F1B: its scheduler
(``frontend/parallel/pipeline_transformer/pipeline_scheduler.cc``, ``InterleavedScheduler``,
which with one chunk is the plain 1F1B, ``WarmUpPhaseReorder`` / ``StablePhaseReorder``) chains
every border by ``Depend`` edges (``ControlOrder``): on an odd stage backward cell ``i`` →
Receive of forward ``i + 1`` → Send of forward ``i`` → forward cell ``i + 1``, and Receive of
the next backward → Send of this backward's input gradient → next backward cell; even stages
swap Send and Receive so that neighbours pair up. Each transfer thus sits between two compute
cells on the stage's critical path, and the per-micro-batch ``t_s`` charges every transfer the
stage takes part in, Receives as well as Sends (one transfer of a tensor over the pair's link
each, :meth:`Links.send_seconds`): a middle stage four per micro-batch (Receive of the forward
activation, Send of its own, Receive of the backward gradient, Send of its input gradient), the
first and the last stage two (stage 0: Send of the activation, Receive of the gradient; the
last: the reverse). Each stage then synchronises
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

Optimizer levels (MindSpore 2.10 ``parallel_optimizer_config={"optimizer_level": ...}``,
``parallel/_auto_parallel_context.py``): ``level1`` is the above (weight and optimizer state
sharded, gradient accumulated whole, one ReduceScatter and one AllGather per step); ``level2`` also
shards the accumulated gradient (MindSpore's ``grad_accumulation_shard``: ``accu_grads`` has the
slice's first axis divided by ``r``) and so ReduceScatters every micro-batch's gradient (``m``
ReduceScatters and one AllGather per step); ``level3`` (ZeRO-3) gathers the weight again for
every use: per micro-batch two AllGathers (forward, and backward) and one ReduceScatter, nothing
once per step. Memory counts the tensors MindSpore stores (the compiled parameter shapes), not the
transient gathered weight, so level 3 saves nothing over level 2 in this model and costs more
communication. MindSpore 2.10 compiles levels 2 and 3 only with the micro-batch graph shared
(``lazy_inline``; :func:`smsg_ms.integration.pipeline.needs_shared_graph`). Counts checked in the
dry-run (``tests/test_optimizer_levels.py``).

Interleaved pipeline (``pipeline_config={"pipeline_interleave": True}``, Narayanan et al. 2021
§2.2.2): the chain is cut into ``p·v`` chunks, chunk ``c`` on stage ``c mod p``; a step takes
``(m + (p − 1)/v)`` slots of the slowest stage's per-micro-batch time (bubble ``(p − 1)/(v·m)`` of
the ideal time), each chunk boundary transfers once per micro-batch and direction (``v×`` the transfers),
and stage ``s`` holds ``((v − 1)·p + 2(p − s − 1) + 1)/v`` micro-batches' activations (the warm-up
micro-batches of Megatron-LM's interleaved schedule, ``schedules.py``, plus the one in flight).

Recompute (MindSpore ``Cell.recompute()``, Chen et al. 2016 "Training deep nets with sublinear memory
cost"): a recomputed layer stores only its input per micro-batch, recomputes its forward in the
backward pass (``+ forward seconds``), and while it is recomputed holds its full activations once.
Selective recompute (Korthikanti et al. 2022, "Reducing activation recomputation in large
transformer models", §4: recompute the cheap, memory-heavy operators only; MindSpore
``Primitive.recompute()``): the layer keeps all but the selective primitives' stored activations,
re-spends their forward seconds, and holds their activations once while recomputing them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .param_traffic import OPTIMIZER_LEVELS, ParamTraffic, optimizer_level

from .api import collective_seconds

#: MindSpore's default ``parallel_optimizer_threshold``: 64 KB (KB = 1024 bytes), opt_param_mgr.cc.
OPTIMIZER_THRESHOLD_BYTES = 64 * 1024

#: Bytes per parameter element by kind for mixed-precision Adam: fp16 weight and gradient, fp32
#: master weight + two Adam moments (Rajbhandari et al. 2020, "ZeRO", §3: 2 + 2 + 12 = 16 B/param).
MIXED_PRECISION_ADAM = {"parameter": 2.0, "gradient": 2.0, "optimizer": 12.0}


def level_rank(sharding) -> int:
    """Order of the settings in ties: off, level1, level2."""
    level = optimizer_level(sharding)
    return 0 if level is None else 1 + OPTIMIZER_LEVELS.index(level)


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
        selective_seconds: forward seconds of the layer's primitives that selective recompute
            runs again (:data:`SELECTIVE` kinds: ``Primitive.recompute()``), one micro-batch.
        selective_bytes: the activation bytes those primitives store (freed by recomputing
            them), one micro-batch; 0: no selective option for this layer.
        output_sizes, input_sizes: per-device bytes of each tensor of ``output_bytes`` /
            ``input_bytes`` when more than one crosses (a side tensor beside the activation:
            mindformers' MoE auxiliary loss); MindSpore Sends each on its own
            (:func:`transfer_seconds`). Empty: one tensor.
        shared: ``(parameter name, per-device slice bytes)`` of each parameter the layer reads
            that another layer of the chain reads too (a tied embedding table): read on two
            stages, it is sent between them once per step (:func:`shared_parameter_seconds`).
    """

    forward_seconds: float
    backward_seconds: float
    activation_bytes: float
    input_bytes: float
    output_bytes: float
    params: tuple[ParamSlice, ...] = ()
    name: str = ""
    hidden_sync_seconds: float = 0.0
    selective_seconds: float = 0.0
    selective_bytes: float = 0.0
    output_sizes: tuple[float, ...] = ()
    input_sizes: tuple[float, ...] = ()
    shared: tuple[tuple[str, float], ...] = ()


def shared_parameter_seconds(layers, chunks, links: "Links", stage_of=None) -> float:
    """Once per step, seconds of the transfers of the parameters the chunks ``[(start, stop),
    ...]`` of the chain share with layers outside them (:attr:`LayerCost.shared`): MindSpore's
    ``PipelineTransformer::HandleSharedParameter`` (``pipeline_transformer.cc``) has the first
    stage reading a parameter Send it (its per-device slice) once per step to every other stage
    reading it, which Receives it; the gradient goes back the same way. Each pair is two
    transfers (:meth:`Links.send_seconds`): a stage reading the parameter after the first pays
    one pair, the first pays one per other stage reading it.

    ``stage_of``: the stage of every layer (a list as long as ``layers``), which tells how many
    stages read a parameter; ``None`` (a stage priced alone, the cut search's
    :func:`stage_cost`): one pair for the first stage too, exact where two stages read it.
    Checked in the dry-run: ``tests/test_pipeline_tied_stages.py``."""
    held = {i for start, stop in chunks for i in range(start, stop)}
    readers: dict[str, tuple[float, set]] = {}
    for i, layer in enumerate(layers):
        for name, nbytes in layer.shared:
            readers.setdefault(name, (nbytes, set()))[1].add(i)
    total = 0.0
    for nbytes, at in readers.values():
        if not at & held or at <= held:
            continue
        pairs = 1
        if stage_of is not None:
            reading = {stage_of[i] for i in at}
            if stage_of[min(at & held)] == min(reading):    # the sender
                pairs = len(reading) - 1
        total += pairs * shared_pair_seconds(links, nbytes)
    return total


def shared_pair_seconds(links: "Links", nbytes: float) -> float:
    """Seconds of one Send/Receive pair of a shared parameter's per-device slice of ``nbytes``
    (bytes): the slice one way and its gradient back, each sent whole (no ``send_split``),
    :meth:`Links.send_seconds` each."""
    return 2 * replace(links, send_split=1).send_seconds(nbytes)


def transfer_seconds(links: "Links", nbytes: float, sizes: tuple[float, ...] = ()) -> float:
    """Seconds of one border's transfer in one direction: one :meth:`Links.send_seconds` per
    tensor of ``sizes`` (MindSpore inserts a Send/Receive pair per tensor crossing a stage
    boundary, checked in the dry-run: ``tests/test_pipeline_side_tensor.py``), or one Send of
    ``nbytes`` when ``sizes`` is empty."""
    if sizes:
        return sum(links.send_seconds(x) for x in sizes)
    return links.send_seconds(nbytes)


@dataclass(frozen=True)
class Links(ParamTraffic):
    """Communication constants. With ``machine`` (a :class:`~smsg_ms.cost.hardware.Machine`)
    every group is placed on its levels: a send between neighbour stages pairs rank ``r`` with
    ``r + stage_devices`` (MindSpore numbers the ranks of a stage consecutively, stage ``s``
    holds ranks ``s·d .. s·d + d − 1``: ``stage_id = rank / per_stage_device_num``), a
    gradient synchronisation the parameter's replicas (:attr:`ParamSlice.span`). Without, one
    flat level: ``bandwidth`` bytes/s per device, ``latency`` s per collective or send,
    ``p2p_bandwidth`` for sends between stages (defaults to ``bandwidth``).

    ``send_split``: 1 (MindSpore: every device sends its whole slice), or the tensor-parallel
    degree ``t`` over which a boundary tensor replicated on ``t`` consecutive ranks is cut
    before it crosses: each rank sends ``1/t`` of it and the receiving ranks AllGather the
    pieces (Megatron-LM's scatter/gather optimisation, Narayanan et al. SC'21 §4.1;
    Megatron-DeepSpeed's pipeline engine, ``is_pipe_partitioned`` in DeepSpeed
    ``runtime/pipe/engine.py``). Not what MindSpore does: an option for pricing measurements
    of those frameworks (``scripts/bench_measured.py``).

    ``main_grad_bytes``: ``None`` (MindSpore: the gradient is accumulated and synchronised in
    the parameter's dtype), or the bytes per element of a separate gradient accumulator in
    which another framework accumulates and AllReduces the gradients (4: DeepSpeed's bf16
    pipeline engine, ``_bf16_reduce_grads`` in ``deepspeed/runtime/pipe/engine.py``, AllReduces
    ``BF16_Optimizer.get_grads_for_reduction()``, the fp32 gradients, also under ZeRO-1, and
    the optimizer then AllGathers the updated bf16 weight partitions,
    ``runtime/bf16_optimizer.py``). Also an option for pricing measurements only.

    ``paired_transfers``: ``False`` (MindSpore: every Send and Receive at a border is its own
    transfer between two compute cells), or ``True`` when the framework issues the Send of the
    activation and the Receive of its gradient at a border (and at the other border the Send of
    the input gradient and the Receive of the next input) as one batched pair with the same
    neighbour, which a full-duplex link carries at once: Megatron-LM's 1F1B steady state,
    ``communicate(tensor_send_next=output_tensor, recv_backward=True)`` and
    ``communicate(tensor_send_prev=input_grad_tensor, recv_forward=True)``, each one
    ``torch.distributed.batch_isend_irecv`` (``megatron/training.py`` at commit 8aa4619,
    ``forward_and_backward_steps_with_communication``; ``send_forward_recv_backward`` in later
    ``p2p_communication.py``). A border then costs one transfer per micro-batch, not two
    (:func:`border_seconds`). Also an option for pricing measurements only."""

    bandwidth: float
    latency: float = 0.0
    p2p_bandwidth: float | None = None
    machine: Any = None
    stage_devices: int = 1
    send_split: int = 1
    hbm_bandwidth: float | None = None
    main_grad_bytes: float | None = None
    paired_transfers: bool = False

    def for_stage(self, devices: int) -> "Links":
        """The same links for stages of ``devices`` devices."""
        return replace(self, stage_devices=devices)

    def send_seconds(self, nbytes: float) -> float:
        """One Send of ``nbytes`` to the neighbour stage; with :attr:`send_split` ``t > 1``
        the Send of ``nbytes / t`` and the AllGather of the ``nbytes`` tensor over ``t``
        consecutive ranks (ring volume ``(t − 1)/t · nbytes``), charged to each end."""
        if nbytes <= 0:
            return 0.0
        t = self.send_split
        if t > 1:
            gather = self._seconds("AllGather", t, nbytes, ((t, 1),))
            return replace(self, send_split=1).send_seconds(nbytes / t) + gather
        # a Send pairs two devices (rank r and r + stage_devices); ring_volume counts its
        # whole tensor
        return self._seconds("Send", 2, nbytes, ((2, self.stage_devices),),
                             bandwidth=self.p2p_bandwidth)

    def grad_sync_seconds(self, param: ParamSlice, grad_bytes: float, sharded) -> float:
        """Gradient synchronisation of one parameter once per step: AllReduce ``2(r−1)/r·S``, or
        ReduceScatter + AllGather (same volume, two synchronisations) when optimizer-sharded at
        level 1; at level 2 only the weight's AllGather ``(r−1)/r·S`` (the ReduceScatters are
        per micro-batch: :meth:`micro_sync_seconds`)."""
        level = optimizer_level(sharded)
        size = param.elements * grad_bytes
        if self.main_grad_bytes:     # AllReduce of the fp32 accumulator, AllGather of the weight
            t = self.group_seconds("AllReduce", param, param.elements * self.main_grad_bytes)
            return t + (self.group_seconds("AllGather", param, size) if level else 0.0)
        if level == "level3":
            return 0.0
        if level == "level2":
            return self.group_seconds("AllGather", param, size)
        return self.group_seconds("AllReduce", param, size, 2 if level else 1)

    def group_seconds(self, kind: str, param: ParamSlice, size: float, syncs: int = 1) -> float:
        """One ``kind`` collective over the replicas of ``param`` (``size`` bytes, the whole
        group's tensor), placed on the machine's levels when there is one."""
        return self._seconds(kind, param.replicas, size, param.span, syncs)

    def _seconds(self, kind: str, group: int, size: float, span, syncs: int = 1,
                 bandwidth: float | None = None) -> float:
        """One ``kind`` collective over ``group`` devices placed by ``span`` on the machine's
        levels; without a machine, on the one flat level (``bandwidth``, default
        :attr:`bandwidth`)."""
        if self.machine is not None:
            return self.machine.collective_seconds(kind, group, size, span, syncs)
        return collective_seconds(kind, (group,), size,
                                  ((bandwidth or self.bandwidth, self.latency),), syncs)

    def micro_sync_seconds(self, param: ParamSlice, grad_bytes: float, sharded) -> float:
        """Per micro-batch: at level 2 the gradient's ReduceScatter ``(r−1)/r·S`` (MindSpore
        shards the accumulator, so each micro-batch's gradient is scattered before it is added);
        at level 3 that and two AllGathers of the weight (forward, backward); 0 otherwise.
        ``sharded`` is already restricted to shardable parameters."""
        level = optimizer_level(sharded)
        if level not in ("level2", "level3"):
            return 0.0
        size = param.elements * grad_bytes
        rs = self.group_seconds("ReduceScatter", param, size)
        if level == "level3":
            rs += 2 * self.group_seconds("AllGather", param, size)
        return rs


def parameter_memory(params, sharding: bool, bytes_per: dict | None = None) -> dict[str, float]:
    """Bytes per device by kind (``parameter``, ``gradient``, ``optimizer``) of ``params``.

    With ``sharding`` (``True`` / ``"level1"``) the weight and the optimizer state of each
    shardable parameter are divided by its replicas ``r``, its gradient is not: in MindSpore's
    compiled training graph (CPU dry-run, ``tests/test_pipeline_check.py``) a sharded weight and
    its optimizer moments have the slice's first axis divided by ``r`` while its gradient
    accumulator (``accu_grads``) keeps the slice. At ``"level2"`` the accumulator is divided by
    ``r`` as well, and at ``"level3"`` (``tests/test_optimizer_levels.py``).
    """
    b = bytes_per or MIXED_PRECISION_ADAM
    level = optimizer_level(sharding)
    out = {"parameter": 0.0, "gradient": 0.0, "optimizer": 0.0}
    for prm in params:
        div = prm.replicas if level and prm.optimizer_shardable() else 1
        out["parameter"] += prm.elements * b["parameter"] / div
        out["gradient"] += prm.elements * b["gradient"] / (1 if level == "level1" else div)
        out["optimizer"] += prm.elements * b["optimizer"] / div
    return out


#: Primitive kinds selective recompute runs again: cheap (element-wise, normalisation,
#: softmax, dropout), with large stored outputs (Korthikanti et al. 2022 §4).
SELECTIVE_TYPES = frozenset({
    "Add", "Sub", "Mul", "RealDiv", "Div", "Neg", "Exp", "Sqrt", "Rsqrt", "Square", "Pow",
    "Sigmoid", "SiLU", "GeLU", "FastGeLU", "ReLU", "Tanh", "Softmax", "LogSoftmax",
    "RmsNorm", "LayerNorm", "ReduceMean", "Dropout", "DropoutDoMask", "DropoutGenMask"})

#: The per-layer recompute settings: whole layer (``True``, ``Cell.recompute()``) or the
#: selective kinds only (this string, ``Primitive.recompute()`` on them).
SELECTIVE = "selective"


def recompute_seconds(layer: LayerCost, setting) -> float:
    """Forward seconds re-spent in the backward pass under ``setting`` (``False``, ``True`` or
    :data:`SELECTIVE`)."""
    if setting == SELECTIVE:
        return layer.selective_seconds
    return layer.forward_seconds if setting is True else 0.0


def stored_activation_bytes(layers, recompute) -> tuple[float, float]:
    """``(kept, work)``: activation bytes one micro-batch keeps for the backward pass over
    ``layers`` (inputs only for recomputed layers; all but the selective primitives' for
    selectively recomputed ones), and the working set of rematerialising the largest recomputed
    layer or selective part (held once, not per micro-batch)."""
    kept, work = 0.0, 0.0
    for layer, rc in zip(layers, recompute):
        if rc == SELECTIVE:
            kept += layer.activation_bytes - layer.selective_bytes
            work = max(work, layer.selective_bytes)
        elif rc:
            kept += layer.input_bytes
            work = max(work, layer.activation_bytes - layer.input_bytes)
        else:
            kept += layer.activation_bytes
    return kept, work


def bubble_fraction(stages: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle fraction of the 1F1B/GPipe schedule: ``(p − 1)/(m + p − 1)`` (GPipe §2.2); with
    ``v`` virtual stages ``(p − 1)/(v·m + p − 1)`` (a bubble of ``(p − 1)/(v·m)`` of the ideal
    time, Narayanan et al. 2021 §2.2.2)."""
    if stages < 1 or micro_batches < 1 or virtual_stages < 1:
        raise ValueError(f"stages and micro-batches (and virtual stages) must be >= 1, got "
                         f"{stages}, {micro_batches}, {virtual_stages}")
    return (stages - 1) / (virtual_stages * micro_batches + stages - 1)


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
               sharding, links: Links, bytes_per: dict | None = None,
               micro_batches: int | None = None) -> StageCost:
    """Cost of stage ``stage`` of ``stages`` holding ``layers[start:stop]``.

    Args:
        layers: the whole chain (list of :class:`LayerCost` for this stage size and micro-batch).
        recompute: one bool per layer of the stage.
        sharding: optimizer sharding: ``False``/``True`` or a level (:func:`optimizer_level`).
        links: communication constants.
        micro_batches: with 1 (and no optimizer sharding), no gradient accumulation: the
            synchronisation overlaps the backward pass (:attr:`LayerCost.hidden_sync_seconds`);
            otherwise MindSpore synchronises the accumulated gradients after the last
            micro-batch, not overlapped.

    Raises:
        ValueError: empty stage or stage index outside ``[0, stages)``.
    """
    return chunks_cost(layers, [(start, stop)], stage, stages, recompute=recompute,
                       sharding=sharding, links=links, bytes_per=bytes_per,
                       micro_batches=micro_batches)


def in_flight(stage: int, stages: int, virtual_stages: int = 1) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak: ``p − s`` under 1F1B;
    ``((v − 1)·p + 2(p − s − 1) + 1)/v`` whole-stage equivalents under the interleaved schedule
    (Megatron-LM ``schedules.py``: ``(p − s − 1)·2 + (v − 1)·p`` warm-up chunk micro-batches plus
    the one in flight, each ``1/v`` of the stage's layers)."""
    p, v = stages, virtual_stages
    if v <= 1:
        return float(p - stage)
    return ((v - 1) * p + 2 * (p - stage - 1) + 1) / v


def border_seconds(layers, start: int, stop: int, links: Links) -> float:
    """Per micro-batch, seconds of the transfers of the chunk ``layers[start:stop]`` at its two
    borders: at ``stop < len(layers)`` the Send of its output activation forward and the Receive
    of that activation's gradient backward, at ``start > 0`` the Receive of its input activation
    forward and the Send of its input gradient backward; each a transfer of the tensor over the
    pair's link (:meth:`Links.send_seconds`; a gradient has its activation's shape). MindSpore's
    1F1B chains every one of them between two compute cells (module docstring,
    ``pipeline_scheduler.cc``), so they add up. With :attr:`Links.paired_transfers` the two
    transfers of a border overlap (same shape, opposite directions of one link): one each.
    That is Megatron-LM's steady state; its warm-up and cool-down micro-batches (``p − s − 1``
    of ``m`` on stage ``s``) send and receive unpaired, which this charges as paired too."""
    per_border = 1 if links.paired_transfers else 2
    t = 0.0
    if stop < len(layers):
        last = layers[stop - 1]          # Send act, Receive grad (each tensor crossing)
        t += per_border * transfer_seconds(links, last.output_bytes, last.output_sizes)
    if start > 0:
        first = layers[start]            # Receive act, Send grad
        t += per_border * transfer_seconds(links, first.input_bytes, first.input_sizes)
    return t


def chunks_cost(layers, chunks, stage: int, stages: int, *, recompute, sharding, links: Links,
                bytes_per: dict | None = None, virtual_stages: int = 1,
                micro_batches: int | None = None, stage_of=None) -> StageCost:
    """Cost of stage ``stage`` holding the chunks ``[(start, stop), ...]`` of the chain (one
    chunk, or ``v`` under the interleaved schedule): compute, recompute, the Sends and Receives
    at each chunk border and direction (:func:`border_seconds`), per-micro-batch optimizer collectives (level 2/3), gradient
    synchronisation, memory with :func:`in_flight` micro-batches. ``stage_of`` (every layer's
    stage, where the whole cut is known) makes the price of parameters read on several stages
    exact (:func:`shared_parameter_seconds`).

    Raises:
        ValueError: an empty chunk or stage index outside ``[0, stages)``.
    """
    for start, stop in chunks:
        if not 0 <= start < stop <= len(layers):
            raise ValueError(f"stage {stage} holds no layer (layers {start}..{stop})")
    if not 0 <= stage < stages:
        raise ValueError(f"stage index {stage} is outside 0..{stages - 1}")
    part = [x for start, stop in chunks for x in layers[start:stop]]
    b = bytes_per or MIXED_PRECISION_ADAM
    t = sum(x.forward_seconds + x.backward_seconds for x in part)
    t += sum(recompute_seconds(x, rc) for x, rc in zip(part, recompute))
    for start, stop in chunks:
        t += border_seconds(layers, start, stop, links)
    params = [prm for x in part for prm in x.params]
    on = [sharding if prm.optimizer_shardable() else False for prm in params]
    t += sum(links.micro_sync_seconds(prm, b["gradient"], sh) for prm, sh in zip(params, on))
    if micro_batches != 1:
        t += sum(links.accumulate_seconds(prm, b, sh) for prm, sh in zip(params, on))
    g = sum(links.grad_sync_seconds(prm, b["gradient"], sh) for prm, sh in zip(params, on))
    if micro_batches == 1 and not any(on):
        g = max(0.0, g - sum(x.hidden_sync_seconds for x in part))
    g += sum(links.update_seconds(prm, b, sh) for prm, sh in zip(params, on))
    if any(x.shared for x in part):
        g += shared_parameter_seconds(layers, chunks, links, stage_of)
    memory = parameter_memory(params, sharding, b)
    kept, work = stored_activation_bytes(part, recompute)
    memory["activation"] = in_flight(stage, stages, virtual_stages) * kept + work
    return StageCost(chunks[0][0], chunks[-1][1], t, g, memory)


def step_slots(stages: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Slots of the slowest stage's per-micro-batch time in one step: ``m + (p − 1)/v``
    (Narayanan et al. 2021 §2.2.2; ``m + p − 1`` without interleaving)."""
    return micro_batches + (stages - 1) / virtual_stages


def super_step_seconds(stage_costs, micro_batches: int, virtual_stages: int = 1) -> float:
    """``max_s ((m + (p − 1)/v) · t_s + g_s)`` over the stages (see the module docstring)."""
    slots = step_slots(len(stage_costs), micro_batches, virtual_stages)
    return max(slots * c.micro_seconds + c.grad_sync_seconds for c in stage_costs)
