"""Pipelined plans: the operator-level planner inside the outer pipeline search.

:func:`stage_layer_costs` is the ``layer_costs(d, b)`` callable of
:func:`smsg_ms.search.pipeline.plan_pipeline`: it captures the network with ``batch = b`` (the
micro-batch size), plans it with the operator-level planner on ``d`` devices (the devices of one
stage) and sums the chosen operator costs per repeated block (``layers.i``). Operators before the
first block (embedding) are folded into the first block and those after the last (final norm, head)
into the last one: they are not cells MindSpore can give a stage of their own here (unmarked cells
inherit the largest stage of their inputs; ``shared/docs/mindspore-dryrun.md``), so they always
live on the first and last stage.

:func:`plan_network_pipelined` runs the outer search and returns the stage plan (strategies for
``devices / p`` devices, network options with ``batch`` = micro-batch size) with
``Plan.pipeline`` filled. ``p = 1`` is the plain operator-level plan of the global batch, or of
one micro-batch with gradient accumulation (``GradAccumulation``) when asked for or when the whole
batch does not fit.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from math import prod

from .cost.pipeline import LayerCost, Links, ParamSlice
from .graph.blocks import block_prefix
from .graph.model import DTYPE_BYTES, OpGraph
from .plan import Plan
from .planner import loss_layout


class PipelinePlanningError(ValueError):
    """The network cannot be pipelined as asked (no repeated blocks, bad stage count ...)."""


def links_of(hardware) -> Links:
    """Communication constants of a preset: the collective link's bandwidth (bytes/s) and
    latency (s) also carry the point-to-point sends (no separate inter-stage link is modelled)."""
    from .cost.hardware import get_hardware

    hw = get_hardware(hardware)
    return Links(bandwidth=hw.bandwidth, latency=hw.latency)


def bytes_per_element(graph: OpGraph) -> dict[str, float]:
    """Bytes per trained-parameter element by kind (``parameter``, ``gradient``, ``optimizer``)
    as the operator-level :class:`~smsg_ms.cost.model.CostModel` counts them (Adam): weight and
    gradient in the parameter's dtype (MindSpore AllReduces the gradient in that dtype), two fp32
    moments (8 B). With several dtypes, the element-weighted mean (exact for one dtype). The
    stage plan and the super-step then price gradient synchronisation alike.

    Raises:
        PipelinePlanningError: the graph has no trained parameter.
    """
    from .cost.model import OPTIMIZER_STATES

    trained = [t for t in graph.parameters() if t.requires_grad and t.numel]
    elements = sum(t.numel for t in trained)
    if not elements:
        raise PipelinePlanningError(f"network {graph.name} has no trained parameter to pipeline")
    size = sum(t.numel * DTYPE_BYTES.get(t.dtype, 4) for t in trained) / elements
    return {"parameter": size, "gradient": size, "optimizer": 4.0 * OPTIMIZER_STATES["adam"]}


def block_of_ops(graph: OpGraph) -> tuple[list[str], dict[int, int]]:
    """Chain of repeated blocks of ``graph`` and the chain index of every operator.

    Operators with an indexed primitive path (``layers.3.attention.wq.matmul``) belong to that
    block; functional calls (no path) to the block of the operator before them; operators before
    the first block to the first block, and after the last block to the last one.

    Returns:
        ``(block names in order, {op id: block index})``.

    Raises:
        PipelinePlanningError: the graph has no indexed block.
    """
    names: list[str] = []
    raw: dict[int, int | None] = {}
    current: int | None = None
    seen_after = False
    for op in graph.ops:
        bp = block_prefix(op.prim_path) if op.prim_path else None
        if bp is not None:
            name = f"{bp[0]}.{bp[1]}"
            if name not in names:
                names.append(name)
            current = names.index(name)
            seen_after = False
        elif op.prim_path and current is not None:
            seen_after = True
        raw[op.id] = None if seen_after else current
    if not names:
        raise PipelinePlanningError(f"network '{graph.name}' has no repeated blocks "
                                    "(cells named <container>.<index>) to cut into stages")
    last, out, started = len(names) - 1, {}, False
    for op in graph.ops:
        v = raw[op.id]
        started = started or v is not None
        out[op.id] = v if v is not None else (last if started else 0)
    return names, out


def _slice(shape, layout) -> tuple[int, ...]:
    return tuple(int(s) // c for s, c in zip(shape, layout.cuts))


@dataclass
class StageSolution:
    """The operator-level plan of the whole network on one stage's devices."""

    graph: OpGraph
    devices: int
    model: object
    variables: list
    choice: list[int]
    problem: object = None      # the SearchProblem (smsg_ms.search.problem)


def stage_cost_model(graph: OpGraph, devices: int, hardware):
    """The :class:`~smsg_ms.cost.model.CostModel` of a stage plan, as
    :func:`smsg_ms.planner.plan_graph` builds it."""
    from .cost.hardware import get_hardware
    from .cost.model import CostModel
    from .planner import EXHAUSTIVE_UP_TO

    return CostModel(graph, devices, get_hardware(hardware),
                     fully_use_devices=devices > EXHAUSTIVE_UP_TO)


def solve_stage(graph: OpGraph, devices: int, hardware, model=None,
                signatures: dict | None = None) -> StageSolution:
    """Operator-level optimum of ``graph`` on ``devices`` without a memory limit (the outer search
    checks memory per stage). Same problem as :func:`smsg_ms.planner.plan_graph`. ``model``: a
    :func:`stage_cost_model` of the same graph and devices to reuse (its option cache);
    ``signatures``: :func:`smsg_ms.planner.op_signatures` of ``graph``, when known."""
    from .planner import _repeated_variable_groups, build_problem
    from .search import solve

    if model is None:
        model = stage_cost_model(graph, devices, hardware)
    problem, variables = build_problem(graph, model, signatures=signatures)
    solution = solve(problem, repeated=_repeated_variable_groups(graph, problem, variables),
                     progress=False)
    return StageSolution(graph, devices, model, variables, list(solution.choice), problem)


def layer_costs_of(sol: StageSolution, structure: tuple | None = None) -> list[LayerCost]:
    """Per-block :class:`LayerCost` of a stage solution (one micro-batch, per device).

    Forward/backward seconds: compute (``flops / hardware.flops``) and the forward/backward
    collectives of the chosen strategies plus the redistributions into the block's operators
    (``volume / bandwidth + latency``, as :meth:`CostModel.breakdown`); gradient synchronisation
    is excluded (the outer search prices it). Activation bytes: Σ ``memory["activation"]``.
    Parameters: one :class:`ParamSlice` per parameter from the layout its first consumer needs.
    Output bytes: the per-device slices (producer's layout) of the tensors the block produces and
    a later block reads; input bytes: those of the tensors it reads from earlier blocks.
    ``structure``: ``(block_of_ops(graph), weight_dependent(graph))`` when already known.
    """
    graph, model = sol.graph, sol.model
    hw = model.hardware
    (names, block), sent = structure or (block_of_ops(graph), weight_dependent(graph))
    n = len(names)
    fwd, bwd, act = [0.0] * n, [0.0] * n, [0.0] * n
    params: list[dict[str, ParamSlice]] = [dict() for _ in range(n)]
    cost_of: dict[int, object] = {}
    for vi, var in enumerate(sol.variables):
        for op, c in zip(var.ops, var.options[sol.choice[vi]]):
            cost_of[op.id] = c

    def coll_seconds(colls, i):
        for c in colls:
            if c.phase == "grad_sync":
                continue
            t = float(c.volume) / hw.bandwidth + (hw.latency if c.group > 1 else 0.0)
            if c.phase == "backward":
                bwd[i] += t
            else:
                fwd[i] += t

    timed: dict[tuple, tuple] = {}

    def redistribution_seconds(tensor, src, dst, i):
        """``coll_seconds`` of a redistribution, its per-collective seconds memoised by what
        they depend on (:meth:`CostModel.redistribution_seconds`' key); added one by one in
        the collectives' order, so the sums are the unmemoised ones bit for bit."""
        a, b = model.normalized(src), model.normalized(dst)
        if a == b:
            return
        key = (tuple(tensor.shape), tensor.dtype, model.carries_gradient(tensor.name), a, b)
        got = timed.get(key)
        if got is None:
            got = timed[key] = tuple(
                (c.phase == "backward",
                 float(c.volume) / hw.bandwidth + (hw.latency if c.group > 1 else 0.0))
                for c in model.redistribution(tensor, a, b) if c.phase != "grad_sync")
        for backward, t in got:
            if backward:
                bwd[i] += t
            else:
                fwd[i] += t

    for op in graph.ops:
        i, c = block[op.id], cost_of[op.id]
        fwd[i] += float(c.flops_fwd) / hw.flops
        bwd[i] += float(c.flops_bwd) / hw.flops
        act[i] += float(c.memory.get("activation", 0))
        coll_seconds(c.collectives, i)
    for src_id, dst_id, tname, idx in graph.iter_edges():
        src_op = graph.ops[src_id]
        src = cost_of[src_id].out_layouts[src_op.outputs.index(tname)]
        dst = cost_of[dst_id].in_layouts[idx]
        if src != dst:
            redistribution_seconds(graph.tensors[tname], src, dst, block[dst_id])
    for tname in dict.fromkeys(graph.outputs):  # into the loss (planner.loss_layout)
        t = graph.tensors[tname]
        if t.producer is not None:
            src = cost_of[t.producer].out_layouts[graph.ops[t.producer].outputs.index(tname)]
            redistribution_seconds(t, src, loss_layout(t, model.devices), block[t.producer])
    for name, (i, prm) in parameter_slices(sol, _known=(block, cost_of)).items():
        params[i][name] = prm
    out_b, in_b = [0.0] * n, [0.0] * n
    for name, (i, j), nbytes in boundary_tensors(sol, _known=(block, cost_of), _sent=sent):
        out_b[i] += nbytes
        in_b[j] += nbytes
    return [LayerCost(fwd[i], bwd[i], act[i], in_b[i], out_b[i],
                      tuple(params[i][k] for k in sorted(params[i])), names[i])
            for i in range(n)]


def _blocks_and_costs(sol: StageSolution, known=None) -> tuple[dict, dict]:
    """``({op id: block index}, {op id: chosen OpCost})`` of a stage solution (``known``: the
    pair already computed by the caller)."""
    if known is not None:
        return known
    _, block = block_of_ops(sol.graph)
    cost_of = {op.id: c for vi, var in enumerate(sol.variables)
               for op, c in zip(var.ops, var.options[sol.choice[vi]])}
    return block, cost_of


def parameter_slices(sol: StageSolution, _known=None) -> dict[str, tuple[int, ParamSlice]]:
    """Every parameter of a stage solution as one device holds it: ``{name: (block index,
    ParamSlice)}``, from the layout its first consumer (graph order) needs, in graph order."""
    graph = sol.graph
    block, cost_of = _blocks_and_costs(sol, _known)
    out: dict[str, tuple[int, ParamSlice]] = {}
    for op in graph.ops:
        for idx, name in enumerate(op.inputs):
            t = graph.tensors[name]
            if t.kind == "parameter" and name not in out:
                layout = cost_of[op.id].in_layouts[idx]
                sl = _slice(t.shape, layout)
                out[name] = (block[op.id], ParamSlice(int(prod(sl)), int(sl[0]) if sl else 1,
                                                      sol.devices // layout.shards,
                                                      float(t.nbytes or 0),
                                                      t.parallel_optimizer))
    return out


def optimizer_sharded(sol: StageSolution) -> dict[str, int]:
    """Parameters MindSpore shards under ``enable_parallel_optimizer`` and their shard count
    (the replicas of the slice: :meth:`ParamSlice.optimizer_shardable`), sorted by name."""
    return {name: prm.replicas for name, (_, prm) in sorted(parameter_slices(sol).items())
            if sol.graph.tensors[name].requires_grad and prm.optimizer_shardable()}


def weight_dependent(graph: OpGraph) -> set[str]:
    """Names of the tensors computed (transitively) from a trained parameter.

    Only these cross a stage boundary as Send/Receive: a tensor computed from the data inputs and
    constants alone (mindformers' causal mask, RoPE tables) is computed again on the stage that
    reads it (observed in the dry-run on mindformers LLaMA: only the hidden state is sent)."""
    out: set[str] = {n for n, t in graph.tensors.items()
                     if t.kind == "parameter" and t.requires_grad}
    size = -1
    while size != len(out):            # one pass when graph.ops is in topological order
        size = len(out)
        for op in graph.ops:
            if any(name in out for name in op.inputs):
                out.update(op.outputs)
    return out


def boundary_tensors(sol: StageSolution, _known=None, _sent: set | None = None
                     ) -> list[tuple[str, tuple[int, int], float]]:
    """Tensors crossing from one block to the next: ``(name, (producer block, consumer block),
    per-device bytes)`` in graph order; each tensor once, at its first later consumer, with its
    producer's chosen layout; only tensors computed from trained weights
    (:func:`weight_dependent`)."""
    graph = sol.graph
    block, cost_of = _blocks_and_costs(sol, _known)
    sent = _sent if _sent is not None else weight_dependent(graph)
    out = []
    for op in graph.ops:
        for k, name in enumerate(op.outputs):
            if name not in sent:
                continue
            later = sorted({block[c] for c in graph.tensors[name].consumers
                            if block[c] > block[op.id]})
            if later:
                t = graph.tensors[name]
                sl = _slice(t.shape, cost_of[op.id].out_layouts[k])
                out.append((name, (block[op.id], later[0]),
                            float(prod(sl) * DTYPE_BYTES.get(t.dtype, 4))))
    return out


def recomputed_on_later_stages(sol: StageSolution, stage_of_block: list[int]
                               ) -> dict[str, list[int]]:
    """Decisions whose forward MindSpore runs again on a later stage: ``{decision name: [stages]}``
    (sorted).

    A tensor not computed from trained weights (:func:`weight_dependent`: mindformers' causal
    mask) is not sent between stages; the stage that reads it computes it again, with the
    operators that produce it from the data inputs (their forward collectives too: observed in
    the dry-run on mindformers LLaMA, the mask's AllGather appears on both stages). Found by
    walking back from every operator of stage ``s`` through producers on earlier stages whose
    outputs are all weight-independent.
    """
    graph = sol.graph
    _, block = block_of_ops(graph)
    sent = weight_dependent(graph)
    stage = {op.id: stage_of_block[block[op.id]] for op in graph.ops}
    name_of = {op.id: var.name for var in sol.variables for op in var.ops}
    out: dict[str, set[int]] = {}
    for s in sorted(set(stage_of_block))[1:]:
        todo = [op.id for op in graph.ops if stage[op.id] == s]
        seen: set[int] = set()
        while todo:
            for name in graph.ops[todo.pop()].inputs:
                q = graph.tensors[name].producer
                if (q is None or q in seen or stage[q] >= s
                        or any(o in sent for o in graph.ops[q].outputs)):
                    continue
                seen.add(q)
                todo.append(q)
                out.setdefault(name_of[q], set()).add(s)
    return {k: sorted(v) for k, v in sorted(out.items())}


def boundary_slice(sol: StageSolution, boundary: int) -> tuple[list[int], str]:
    """Per-device slice shape and dtype of the (first) tensor computed from trained weights that
    crosses from block ``boundary`` to a later block, under the producer's layout: what MindSpore
    Sends between stages."""
    graph = sol.graph
    _, block = block_of_ops(graph)
    cost_of = {op.id: c for vi, var in enumerate(sol.variables)
               for op, c in zip(var.ops, var.options[sol.choice[vi]])}
    sent = weight_dependent(graph)
    for op in graph.ops:
        if block[op.id] != boundary:
            continue
        for k, name in enumerate(op.outputs):
            t = graph.tensors[name]
            if name in sent and any(block[c] > boundary for c in t.consumers):
                return list(_slice(t.shape, cost_of[op.id].out_layouts[k])), t.dtype
    raise PipelinePlanningError(f"block {boundary} passes no tensor to a later block")


class StageCosts:
    """``layer_costs(d, b)`` for :func:`plan_pipeline`, with captures and solutions cached.

    Returns ``None`` where the network cannot be planned on ``d`` devices with micro-batch ``b``
    (MindSpore's device counts, an operator without a valid strategy). Graphs by micro-batch size
    come from a :class:`smsg_ms.graph.batch_scale.BatchFamily`: two captures, the other batch
    sizes derived by rescaling the batch axis (exact for batch-linear graphs, else captured).
    ``solves`` counts the operator-level stage solves.
    """

    def __init__(self, spec: str, hardware, *, stage_limit: float | None = None,
                 devices: int | None = None, capture=None, **network_options):
        """``stage_limit`` (bytes per device) with ``devices`` (all devices): solve each stage
        plan so that every stage of the even cut fits, ``p = devices / d``
        (:func:`smsg_ms.pipeline_memory.solve_stage_within`); default: no limit. ``capture``:
        ``batch -> OpGraph`` (default: :func:`smsg_ms.graph.capture.capture_network` of
        ``spec`` with ``network_options``), or a ``BatchFamily`` to share."""
        from .graph.batch_scale import BatchFamily

        self.spec, self.hardware = spec, hardware
        self.stage_limit, self.devices = stage_limit, devices
        self.options = {k: v for k, v in network_options.items() if k != "batch"}
        if isinstance(capture, BatchFamily):
            self.family = capture
        else:
            self.family = BatchFamily(capture or self._capture)
        self.solutions: dict[tuple[int, int], StageSolution] = {}
        self.models: dict[tuple[int, int], object] = {}
        self.signatures: dict[int, list] = {}
        self.op_sigs: dict[int, dict[int, tuple]] = {}
        self.structures: dict[int, tuple] = {}
        self.solves = 0
        self.solve_seconds = 0.0         # CPU seconds of this process in the stage solves
        # filled by smsg_ms.pipeline_workers.prefetch for pairs solved in other processes
        self.floors: dict[tuple[int, int], float] = {}
        self.layers: dict[tuple[int, int], list | None] = {}
        self.choices: dict[tuple[int, int], list[int]] = {}
        self.cuts: dict[tuple, tuple | None] = {}    # search.pipeline.cut_key -> cut_chain

    def _capture(self, b: int) -> OpGraph:
        from .graph.capture import capture_network

        return capture_network(self.spec, batch=b, **self.options)

    def graph(self, b: int) -> OpGraph:
        return self.family(b)

    def model(self, d: int, b: int):
        """The stage plan's cost model on ``d`` devices at micro-batch ``b`` (cached until the
        stage is solved)."""
        if (d, b) not in self.models:
            self.models[(d, b)] = stage_cost_model(self.graph(b), d, self.hardware)
        return self.models[(d, b)]

    def solution(self, d: int, b: int) -> StageSolution:
        if (d, b) not in self.solutions and (d, b) in self.choices:
            # solved in a worker process: same variables, its choice (no second solve)
            from .planner import _group_variables

            model = self.model(d, b)
            variables = _group_variables(self.graph(b), model, True,
                                         signatures=self.op_signatures(b))
            self.solutions[(d, b)] = StageSolution(self.graph(b), d, model, variables,
                                                   list(self.choices[(d, b)]))
            self.models.pop((d, b), None)
        if (d, b) not in self.solutions:
            self.solves += 1
            start = time.process_time()
            model = self.model(d, b)
            if self.stage_limit is None:
                self.solutions[(d, b)] = solve_stage(self.graph(b), d, self.hardware, model,
                                                     self.op_signatures(b))
            else:
                from .pipeline_memory import solve_stage_within
                self.solutions[(d, b)] = solve_stage_within(
                    self.graph(b), d, self.hardware, self.devices // d, self.stage_limit,
                    model=model, signatures=self.op_signatures(b))
            self.models.pop((d, b), None)
            self.solve_seconds += time.process_time() - start
        return self.solutions[(d, b)]

    def structure(self, b: int) -> tuple:
        """``(block_of_ops(graph), weight_dependent(graph))`` of the graph at micro-batch
        ``b``: what :func:`layer_costs_of` reads of the graph alone, computed once."""
        if b not in self.structures:
            graph = self.graph(b)
            self.structures[b] = (block_of_ops(graph), weight_dependent(graph))
        return self.structures[b]

    def op_signatures(self, b: int) -> dict[int, tuple]:
        """:func:`smsg_ms.planner.op_signatures` of the graph at micro-batch ``b`` (computed
        once, shared by the stage plans of every device count)."""
        from .planner import op_signatures

        if b not in self.op_sigs:
            self.op_sigs[b] = op_signatures(self.graph(b))
        return self.op_sigs[b]

    def compute_floor(self, d: int, b: int) -> float:
        """Lower bound (s) on ``Σ (forward_seconds + backward_seconds)`` over the layers of
        ``self(d, b)``, without solving: Σ over operators of the least compute seconds
        (``(flops_fwd + flops_bwd) / hardware.flops``) among the strategies the cost model
        offers it on ``d`` devices.

        Why it is a bound: :func:`layer_costs_of` adds every operator's compute seconds under
        its chosen strategy, which is one of those offered (a search variable's options are
        strategies common to its operators' option lists, ``planner._group_variables``), plus
        collective seconds (≥ 0). Operators with equal ``planner.op_signature`` have equal
        option lists, so each signature is costed once. Returns 0 (no bound) where the cost
        model refuses ``d``.
        """
        if (d, b) in self.floors:
            return self.floors[(d, b)]
        graph = self.graph(b)
        if b not in self.signatures:
            groups: dict[tuple, list] = {}
            sigs = self.op_signatures(b)
            for op in graph.ops:
                groups.setdefault(sigs[op.id], [op, 0])[1] += 1
            self.signatures[b] = [tuple(v) for v in groups.values()]
        try:
            model = self.model(d, b)
            peak = model.hardware.flops
            return sum(n * min(float(c.flops_fwd) + float(c.flops_bwd)
                               for c in model.options(op)) / peak
                       for op, n in self.signatures[b])
        except ValueError:
            return 0.0

    def __call__(self, d: int, b: int) -> list[LayerCost] | None:
        from .planner import PlanningError
        from .search import NoFeasiblePlan

        if (d, b) in self.layers:
            return self.layers[(d, b)]
        try:
            return layer_costs_of(self.solution(d, b), self.structure(b))
        except (PlanningError, NoFeasiblePlan, ValueError):
            return None


#: ``plan_network_pipelined`` prefetches stage plans on several processes from this many
#: devices on (below, the search takes about a second at most and forking would cost more)
PREFETCH_FROM_DEVICES = 64


def candidate_pairs(devices: int, global_batch: int, p_list, micro_batches: int | None
                    ) -> list[tuple[int, int]]:
    """``(devices per stage, micro-batch size)`` of every ``(p, m)`` the outer search may
    evaluate: ``p`` in ``p_list``, ``m`` dividing the global batch (or ``micro_batches``),
    ``m >= p`` except for one stage (gradient accumulation, any ``m``)."""
    from .search.pipeline import divisors

    m_all = [micro_batches] if micro_batches is not None else divisors(global_batch)
    out = []
    for p in p_list:
        for m in m_all:
            if global_batch % m == 0 and (m >= p or p == 1):
                out.append((devices // p, global_batch // m))
    return list(dict.fromkeys(out))


def plan_network_pipelined(spec: str, devices: int, *, global_batch: int,
                           stages: str | int = "auto", micro_batches: int | None = None,
                           hardware="ascend910b", memory_gib: float | None = None,
                           optimizer_sharding: bool | None = None, recompute: bool = True,
                           capture=None, stats: dict | None = None, workers: int | None = None,
                           **network_options) -> Plan:
    """Plan ``spec`` on ``devices`` with pipeline stages, micro-batches, optimizer sharding and
    recompute chosen by :func:`smsg_ms.search.pipeline.plan_pipeline`.

    Args:
        spec: network spec (built-in name or ``package.module:function``); it must accept a
            ``batch`` option.
        devices: all devices; global_batch: samples per step.
        stages: ``"auto"`` (every divisor of ``devices`` up to the block count) or a count.
        micro_batches: fixed micro-batch count (default: every divisor of the global batch with
            ``m >= p``). ``p = 1`` is planned with the whole batch (``m = 1``) unless
            ``stages == 1`` and ``micro_batches`` is given, or the whole batch does not fit in
            memory: then with gradient accumulation over ``m`` micro-batches (written back as
            ``mindspore.parallel.nn.GradAccumulation``).
        hardware: preset; memory_gib: per-device limit (GiB, default the preset's).
        optimizer_sharding: force MindSpore's ``enable_parallel_optimizer`` on or off (default:
            searched). recompute: allow ``Cell.recompute()`` of blocks (searched) or never.
        capture: ``batch -> OpGraph`` replacing the capture of ``spec`` (a cache; benchmarks).
        stats: when a dict, filled with ``stage_solves`` (operator-level stage solves, in
            every process), ``stage_solve_seconds`` (their CPU seconds, cost model included,
            this process), ``workers`` (processes that solved stage plans),
            ``worker_seconds`` (CPU seconds of the other processes), ``captures`` (calls of
            the capture) and ``micro_batch_sizes`` (graphs used).
        workers: processes evaluating the stage plans of the candidate (devices per stage,
            micro-batch size) pairs ahead of the search (:mod:`smsg_ms.pipeline_workers`; same
            plan byte for byte). Default: :func:`~smsg_ms.pipeline_workers.default_workers`
            from :data:`PREFETCH_FROM_DEVICES` devices on, one process below (where the
            search is fast and may prune pairs that a prefetch would solve anyway).
        network_options: other network options (``seq``, ``layers`` ...).

    Returns:
        The stage plan: strategies for ``devices / p`` devices, ``devices`` = all devices,
        ``options["batch"]`` = micro-batch size, ``pipeline`` = the outer search's record (plus
        ``global_batch``, ``boundary_shape``, ``boundary_dtype`` (``None`` for ``p = 1``) and
        ``optimizer_sharded``: ``{parameter: shard count}`` of the parameters MindSpore shards
        when optimizer sharding is on (:func:`optimizer_sharded`), ``{}`` otherwise);
        ``totals`` as :func:`pipelined_totals` (``step_seconds`` = the super-step).

    Raises:
        PipelinePlanningError: bad ``stages`` / ``micro_batches`` / ``global_batch``, no blocks.
        smsg_ms.search.pipeline.NoFeasiblePipeline: nothing fits in memory.
    """
    from .devices import check_device_count
    from .planner import _collector_paused

    check_device_count(devices)
    with _collector_paused():
        return _plan_network_pipelined(spec, devices, global_batch, stages, micro_batches,
                                       hardware, memory_gib, optimizer_sharding, recompute,
                                       capture, stats, workers, network_options)


def _plan_network_pipelined(spec, devices, global_batch, stages, micro_batches, hardware,
                            memory_gib, optimizer_sharding, recompute, capture, stats, workers,
                            network_options) -> Plan:
    """:func:`plan_network_pipelined`'s work (arguments as there; the cyclic garbage collector
    paused, as in :func:`smsg_ms.planner.plan_graph`: the stage solves allocate many small
    acyclic objects)."""
    from .cost.hardware import get_hardware
    from .planner import plan_graph
    from .search.pipeline import NoFeasiblePipeline, divisors, plan_pipeline

    if not isinstance(global_batch, int) or global_batch < 1:
        raise PipelinePlanningError(f"global batch must be a positive integer, got "
                                    f"{global_batch!r}")
    if workers is None:         # $SMSG_MS_WORKERS is read (and refused) before any capture
        from .pipeline_workers import default_workers
        workers = default_workers()
        workers = workers if devices >= PREFETCH_FROM_DEVICES else 1
    elif not isinstance(workers, int) or workers < 1:
        raise PipelinePlanningError(f"workers must be a positive integer, got {workers!r}")
    if stages == "auto":
        p_list = divisors(devices)      # cut to the block count below, once a graph is known
    elif isinstance(stages, int) and stages >= 1 and devices % stages == 0:
        p_list = [stages]
    else:
        raise PipelinePlanningError(f"--pipeline must be 'auto' or a stage count dividing "
                                    f"{devices} devices, got {stages!r}")
    if micro_batches is not None:
        if not isinstance(micro_batches, int) or micro_batches < 1 or global_batch % micro_batches:
            raise PipelinePlanningError(f"micro-batches {micro_batches!r} must be a positive "
                                        f"divisor of the global batch {global_batch}")
        if micro_batches < max(p_list) and stages != "auto":
            raise PipelinePlanningError(f"micro-batches {micro_batches} < stages {stages}: "
                                        "MindSpore requires micro >= stages")
    hw = get_hardware(hardware)
    limit = memory_gib * 2**30 if memory_gib is not None else hw.memory
    costs = StageCosts(spec, hw, capture=capture, **network_options)
    first = costs
    links = links_of(hw)
    bytes_per = bytes_per_element(costs.graph(global_batch // (micro_batches or 1)))
    if stages == "auto":
        blocks = len(block_of_ops(costs.graph(global_batch // (micro_batches or 1)))[0])
        p_list = [p for p in p_list if p <= blocks]
    sharding = (False, True) if optimizer_sharding is None else (bool(optimizer_sharding),)

    def search(stage_costs) -> list:
        found = []
        if 1 in p_list:
            # one stage: the whole batch at once; gradient accumulation (m > 1) only when asked
            # for or when the whole batch does not fit (it never saves time: m slots of b/m)
            tries = [[micro_batches]] if stages == 1 and micro_batches is not None else [[1], None]
            for m_one in tries:
                try:
                    found.append(plan_pipeline(stage_costs, devices, global_batch,
                                               memory_limit=limit, links=links, stages=[1],
                                               micro_batches=m_one, optimizer_sharding=sharding,
                                               recompute=recompute, bytes_per=bytes_per,
                                               compute_floor=stage_costs.compute_floor,
                                               cuts=stage_costs.cuts))
                    break
                except NoFeasiblePipeline:
                    pass
        deep = [p for p in p_list if p > 1]
        if deep:
            m_list = [micro_batches] if micro_batches is not None else None
            try:
                found.append(plan_pipeline(stage_costs, devices, global_batch,
                                           memory_limit=limit, links=links, stages=deep,
                                           micro_batches=m_list, optimizer_sharding=sharding,
                                           recompute=recompute, bytes_per=bytes_per,
                                           compute_floor=stage_costs.compute_floor,
                                           cuts=stage_costs.cuts,
                                           incumbent=min((r.step_seconds for r in found),
                                                         default=math.inf)))
            except NoFeasiblePipeline:
                pass
        return found

    prefetched = {"workers": 1, "worker_solves": 0, "worker_seconds": 0.0}
    if workers > 1:
        from .pipeline_workers import prefetch
        prefetched = prefetch(costs, candidate_pairs(devices, global_batch, p_list,
                                                     micro_batches), workers,
                              cut_args=dict(devices=devices, global_batch=global_batch,
                                            memory_limit=limit, links=links,
                                            recompute=recompute, bytes_per=bytes_per,
                                            shardings=sharding))
    results = search(costs)
    if not results:
        # the fastest stage plans do not fit: plan every stage within the memory limit
        lean = StageCosts(spec, hw, stage_limit=limit, devices=devices, capture=costs.family,
                          **network_options)
        costs, results = lean, search(lean)
    if stats is not None:
        again = costs is not first
        stats.update(stage_solves=first.solves + (costs.solves if again else 0)
                     + prefetched["worker_solves"],
                     stage_solve_seconds=first.solve_seconds
                     + (costs.solve_seconds if again else 0.0),
                     workers=prefetched["workers"], worker_seconds=prefetched["worker_seconds"],
                     captures=costs.family.captures,
                     micro_batch_sizes=sorted(costs.family.graphs))
    if not results:
        raise NoFeasiblePipeline(f"no plan fits in {limit / 2**30:.1f} GiB per device")
    best = min(results, key=lambda r: (r.step_seconds, r.stages))
    d, b = best.devices_per_stage, best.micro_batch_size
    options = dict(network_options, batch=b)
    stage = costs.solution(d, b)   # same problem as plan_graph's: no second solve or build
    plan = plan_graph(costs.graph(b), d, hardware=hw, memory_gib=math.inf, options=options,
                      network=spec, progress=False, choice=stage.choice,
                      write_back="shard",  # propagation with pipeline stages: not checked
                      model=stage.model, built=None if stage.problem is None
                      else (stage.problem, stage.variables))
    plan.devices = devices
    record = best.as_plan_dict()
    record["global_batch"] = global_batch
    record["candidates"] = best.candidates + sum(r.candidates for r in results if r is not best)
    record["optimizer_sharded"] = (optimizer_sharded(costs.solution(d, b))
                                   if best.optimizer_sharding else {})
    if best.stages > 1:
        sol = costs.solution(d, b)
        names = record["stage_of_block"]
        bounds = [i for i, (a, c) in enumerate(zip(list(names.values()), list(names.values())[1:]))
                  if c > a]
        shape, dtype = boundary_slice(sol, bounds[0])
        record["boundary_shape"], record["boundary_dtype"] = shape, dtype
        record["recomputed_on"] = recomputed_on_later_stages(sol, list(names.values()))
    if costs.stage_limit is not None:
        record["stage_plan_memory_limit"] = costs.stage_limit
    plan.pipeline = record
    plan.totals = pipelined_totals(plan.totals, best.step_seconds)
    return plan.seal()


def pipelined_totals(stage_totals: dict, super_step: float) -> dict:
    """Totals of a pipelined plan: ``step_seconds`` is the 1F1B super-step (one training step,
    :func:`smsg_ms.cost.pipeline.super_step_seconds`); the stage plan's own step (one
    micro-batch through the whole network on one stage's devices, gradient sync included) is
    kept as ``micro_batch_step_seconds``; the ratio to pure data parallel is dropped (its
    baseline is per micro-batch). The other rows stay the stage plan's (one micro-batch)."""
    out = {k: v for k, v in stage_totals.items()
           if k not in ("step_seconds", "relative_to_data_parallel", "pipeline_step_seconds")}
    out["step_seconds"] = float(super_step)
    out["micro_batch_step_seconds"] = stage_totals.get("step_seconds")
    return out


def stage_of_decision(plan: Plan) -> dict[str, int]:
    """Stage of every decision of a pipelined plan (by its block; operators outside blocks go to
    the first or last stage like the blocks around them)."""
    record = plan.pipeline or {}
    stage_of = record.get("stage_of_block", {})
    last = max(stage_of.values(), default=0)
    out: dict[str, int] = {}
    seen = False
    for d in plan.decisions:
        bp = block_prefix(d.name)
        name = f"{bp[0]}.{bp[1]}" if bp else None
        if name in stage_of:
            out[d.name], seen = stage_of[name], True
        else:
            out[d.name] = last if seen else 0
    return out


__all__ = ["PipelinePlanningError", "StageCosts", "boundary_slice", "block_of_ops",
           "layer_costs_of", "links_of", "optimizer_sharded", "parameter_slices",
           "bytes_per_element", "pipelined_totals", "plan_network_pipelined", "recomputed_on_later_stages", "solve_stage", "stage_cost_model", "weight_dependent",
           "stage_of_decision"]
