"""Pipelined plans: the operator-level planner inside the outer pipeline search.

:func:`plan_network_pipelined` runs the outer search (:func:`smsg_ms.search.pipeline.plan_pipeline`)
over stage plans (:class:`~smsg_ms.planner.stage_costs.StageCosts`) and returns the stage plan
(strategies for ``devices / p`` devices, network options with ``batch`` = the global batch, the
graph captured at the micro-batch size: :meth:`~smsg_ms.plan.Plan.build_options`) with
``Plan.pipeline`` filled from one :class:`PipelineRecord`. ``p = 1`` is the plain operator-level
plan of the global batch, or of one micro-batch with gradient accumulation (``GradAccumulation``)
when asked for or when the whole batch does not fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..devices import check_device_count
from ..graph.blocks import block_prefix
from ..plan import Plan
from ..words import count
from ..search.effort import DEFAULT_SECONDS
from .errors import PipelinePlanningError, PipelineSettingsError
from .options import VIRTUAL_STAGES, PlanningOptions
from .single_stage import collector_paused
from .stage_costs import StageCosts
from .stages import (block_of_ops, crossing_slices, bytes_per_element, links_of, optimizer_sharded,
                     unsharded_across_stages,
                     recomputed_on_later_stages, recomputed_reads, reshape_borders,
                     weight_dependent)


#: ``plan_network_pipelined`` prefetches stage plans on several processes from this many
#: devices on (below, the search takes about a second at most and forking would cost more)
PREFETCH_FROM_DEVICES = 64


def candidate_pairs(devices: int, global_batch: int, p_list, micro_batches: int | None
                    ) -> list[tuple[int, int]]:
    """``(devices per stage, micro-batch size)`` of every ``(p, m)`` the outer search may
    evaluate: ``p`` in ``p_list``, ``m`` dividing the global batch (or ``micro_batches``),
    ``m >= p`` except for one stage (gradient accumulation, any ``m``)."""
    from ..search.pipeline import divisors

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
                           optimizer_sharding: bool | str | None = None, recompute: bool = True,
                           virtual_stages: int | None = 1, capture=None, stats: dict | None = None, workers: int | None = None,
                           time_limit: float = DEFAULT_SECONDS, replace_strategies: bool = False,
                           build_for_devices: bool = True, **network_options) -> Plan:
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
        optimizer_sharding: force MindSpore's ``enable_parallel_optimizer`` on (``True``) or off,
            or one ``optimizer_level`` (default: off and the three levels searched).
            recompute: allow ``Cell.recompute()`` of blocks (searched) or never.
        virtual_stages: virtual stages of an interleaved pipeline (default 1: plain 1F1B;
            ``None``: searched over :data:`~smsg_ms.planner.options.VIRTUAL_STAGES`).
        capture: ``batch -> OpGraph`` replacing the capture of ``spec`` (a cache; benchmarks;
            not built per stage size).
        stats: when a dict, filled with ``stage_solves`` (operator-level stage solves, in
            every process), ``stage_solve_seconds`` (their CPU seconds, cost model included,
            this process), ``workers`` (processes that solved stage plans),
            ``worker_seconds`` (CPU seconds of the other processes), ``captures`` (calls of
            the capture), ``micro_batch_sizes`` (graphs used) and ``stage_sizes_built_for``
            (the devices per stage the network was captured built for, ``[]`` where it does
            not read the world size).
        workers: processes evaluating the stage plans of the candidate (devices per stage,
            micro-batch size) pairs ahead of the search (:mod:`smsg_ms.planner.workers`; same
            plan byte for byte). Default: :func:`~smsg_ms.planner.workers.default_workers`
            from :data:`PREFETCH_FROM_DEVICES` devices on, one process below (where the
            search is fast and may prune pairs that a prefetch would solve anyway).
        time_limit: seconds of search work (:attr:`PlanningOptions.time_limit`), shared by the
            stage solves made under the memory limit (one share per candidate pair); a share
            that stops a solve keeps that solve's best plan.
        replace_strategies: plan anew the primitives whose strategy the network's own
            ``shard()`` sets, in every stage (default: kept,
            :attr:`PlanningOptions.replace_strategies`).
        build_for_devices: capture the network built for each stage's ``devices / p`` devices
            (default), as MindSpore's compile with ``p`` stages on ``devices`` builds it
            (mindformers' ``data_parallel``): once per stage size where the network reads the
            world size (:class:`~smsg_ms.planner.stage_graphs.StageGraphs`), the chosen one
            recorded as the plan's ``built_for``; a network that does not read it is captured
            as before. ``False``: built for the capture's one device.
        network_options: other network options (``seq``, ``layers`` ...).

    Returns:
        The stage plan: strategies for ``devices / p`` devices, ``devices`` = all devices,
        ``options["batch"]`` = the global batch (its graph built at ``pipeline["micro_batch_size"]``,
        :meth:`~smsg_ms.plan.Plan.build_options`), ``pipeline`` = the outer search's record (plus
        ``global_batch``, ``boundary_shape``, ``boundary_dtype`` (``None`` for ``p = 1``),
        ``boundary_extra`` (the side tensors crossing the stage boundary beside it, ``[{"shape",
        "dtype"}]``, only when there are some: :func:`~smsg_ms.planner.stages.crossing_slices`) and
        ``optimizer_sharded``: ``{parameter: shard count}`` of the parameters MindSpore shards
        when optimizer sharding is on (:func:`~smsg_ms.planner.stages.optimizer_sharded`),
        ``{}`` otherwise; ``shared_parameters``: the parameters read on more than one stage,
        only when there are some: :func:`shared_across_stages`: one :class:`PipelineRecord`);
        ``totals`` as :func:`pipelined_totals` (``step_seconds`` = the super-step).

    Raises:
        smsg_ms.devices.DeviceCountError: a device count MindSpore refuses.
        PipelinePlanningError: bad ``stages`` / ``micro_batches`` / ``global_batch``, no blocks.
        smsg_ms.search.pipeline.NoFeasiblePipeline: nothing fits in memory.
    """
    settings = PlanningOptions(hardware=hardware, memory_gib=memory_gib, stages=stages,
                               micro_batches=micro_batches,
                               optimizer_sharding=optimizer_sharding, recompute=recompute,
                               virtual_stages=virtual_stages, workers=workers, time_limit=time_limit,
                               replace_strategies=replace_strategies)
    return plan_pipelined_with(spec, devices, global_batch, settings, capture=capture,
                               stats=stats, network_options=network_options,
                               build_for_devices=build_for_devices)


def plan_pipelined_with(spec: str, devices: int, global_batch: int, settings: PlanningOptions,
                        *, capture=None, stats: dict | None = None,
                        network_options: dict | None = None, unpruned: bool = False,
                        build_for_devices: bool = True) -> Plan:
    """:func:`plan_network_pipelined` with its settings as one :class:`PlanningOptions` (the
    cyclic garbage collector paused, as in :func:`smsg_ms.planner.plan_graph`: the stage
    solves allocate many small acyclic objects).

    ``unpruned``: evaluate every configuration of the search space (no lower-bound pruning of
    ``(stages, micro-batches)`` pairs, no incumbent between the one-stage and the pipelined
    search), so the record's ``runner_up`` is the exact second-best configuration
    (:mod:`smsg_ms.planner.pipeline_runner_up`). Same chosen configuration (the pruning is
    exact); the record's ``candidates`` count, hence the content hash, may differ.
    ``build_for_devices``: as :func:`plan_network_pipelined`."""
    check_device_count(devices)
    with collector_paused():
        return _plan(spec, devices, global_batch, settings, capture=capture, stats=stats,
                     network_options=dict(network_options or {}), unpruned=unpruned,
                     build_for_devices=build_for_devices)


def _stage_counts(devices: int, global_batch: int, settings: PlanningOptions) -> list[int]:
    """The stage counts to search, after checking the stage and micro-batch settings.

    Raises:
        PipelineSettingsError: stages not dividing the devices (each stage runs on
            ``devices / stages`` of them), micro-batches not dividing the global batch or fewer
            than the stages (MindSpore's ``micro_batch_num >= stages``); each names the values
            that work."""
    from ..search.pipeline import divisors

    stages, micro_batches = settings.stages, settings.micro_batches
    if stages == "auto":
        p_list = divisors(devices)      # cut to the block count below, once a graph is known
    elif isinstance(stages, int) and stages >= 1 and devices % stages == 0:
        p_list = [stages]
    else:
        raise PipelineSettingsError(f"--pipeline must be 'auto' or a stage count dividing "
                                    f"{devices} devices, got {stages!r}: give "
                                    f"{_listed(divisors(devices), stages)} (each stage runs on "
                                    "devices / stages of them)")
    if micro_batches is not None:
        if not isinstance(micro_batches, int) or micro_batches < 1 or global_batch % micro_batches:
            raise PipelineSettingsError(f"micro-batches {micro_batches!r} must be a positive "
                                        f"divisor of the global batch {global_batch}: give "
                                        f"{_listed(divisors(global_batch), micro_batches)}")
        if micro_batches < max(p_list) and stages != "auto":
            raise PipelineSettingsError(f"micro-batches {micro_batches} < stages {stages}: "
                                        "MindSpore requires micro >= stages (give "
                                        f"--micro-batches {stages} or more)")
    return p_list


def _listed(values: list[int], near) -> str:
    """``1, 2, 4 or 8``; of more than six values, those just below and above ``near`` (a
    number, else the first two)."""
    if len(values) > 6:
        if isinstance(near, int) and not isinstance(near, bool):
            below, above = [v for v in values if v < near], [v for v in values if v > near]
            values = below[-1:] + above[:1]
        else:
            values = values[:2]
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} or {text[-1]}"


def _worker_count(devices: int, settings: PlanningOptions) -> int:
    """Processes for the stage plans: :attr:`PlanningOptions.workers`, or the default from
    :data:`PREFETCH_FROM_DEVICES` devices on (``$SMSG_MS_WORKERS`` is read, and refused, before
    any capture)."""
    workers = settings.workers
    if workers is None:
        from .workers import default_workers
        workers = default_workers()     # read (and refused) whatever the device count
        return workers if devices >= PREFETCH_FROM_DEVICES else 1
    if not isinstance(workers, int) or workers < 1:
        raise PipelinePlanningError(f"workers must be a positive integer, got {workers!r}")
    return workers


def _one_stage_first(floor, devices: int, global_batch: int, p_list, deep, micro_batches,
                     virtual) -> bool:
    """True when the one-stage search goes first: its lowest pair bound (the whole batch's
    compute floor, or any micro-batch count when they are fixed) is at most the pipelined
    pairs' lowest bound ``step_slots(p, m, v) / p · floor(n / p, B / m)``
    (:func:`smsg_ms.search.pipeline.plan_pipeline`'s bound); ``floor``: ``(d, b) → seconds``."""
    from ..search.pipeline import divisors, step_slots

    if 1 not in p_list or not deep:
        return True
    m_all = [micro_batches] if micro_batches is not None else divisors(global_batch)
    v = max(int(x) for x in virtual) if virtual else 1
    low_deep = min((step_slots(p, m, v) / p * floor(devices // p, global_batch // m)
                    for p in deep for m in m_all if m >= p and global_batch % m == 0),
                   default=math.inf)
    return floor(devices, global_batch) <= low_deep


def _borders(graph) -> tuple[list[str], set[int]]:
    """``(block names in order, indices of the blocks no stage may end after)``
    (:func:`.stages.reshape_borders`)."""
    names, block = block_of_ops(graph)
    return names, reshape_borders(graph, block, weight_dependent(graph))


def _plan(spec: str, devices: int, global_batch: int, settings: PlanningOptions, *, capture,
          stats, network_options: dict, unpruned: bool = False,
          build_for_devices: bool = True) -> Plan:
    from ..cost.hardware import get_hardware
    from ..search.effort import Effort
    from ..search.pipeline import NoFeasiblePipeline, plan_pipeline
    from .single_stage import plan_graph_with

    # every setting is checked before the first capture
    if not isinstance(global_batch, int) or global_batch < 1:
        raise PipelinePlanningError(f"global batch must be a positive integer, got "
                                    f"{global_batch!r}")
    workers = _worker_count(devices, settings)
    p_list = _stage_counts(devices, global_batch, settings)
    stages, micro_batches = settings.stages, settings.micro_batches
    hw = get_hardware(settings.hardware)
    limit = settings.memory_limit(hw)
    recompute = settings.recompute
    costs = StageCosts(spec, hw, capture=capture, replace_strategies=settings.replace_strategies,
                       build_for_devices=build_for_devices, devices=devices, **network_options)
    first = costs
    links = links_of(hw)
    # the first stage count's graph (auto: one stage, always a candidate); the blocks and the
    # element size do not depend on the devices a stage is built for
    d0, b0 = devices // p_list[0], global_batch // (micro_batches or 1)
    bytes_per = bytes_per_element(costs.graph(d0, b0))
    if stages == "auto":
        names, refused = _borders(costs.graph(d0, b0))
        p_list = [p for p in p_list if p <= len(names) and p - 1 <= len(names) - 1 - len(refused)]
    elif int(stages) > 1:
        names, refused = _borders(costs.graph(d0, b0))
        blocks = len(names)
        if int(stages) > blocks:
            raise PipelinePlanningError(
                f"{stages} pipeline stages need at least {stages} repeated blocks; network "
                f"'{spec}' has {blocks}: use at most {count(blocks, 'stage')} (or --pipeline auto)")
        if int(stages) - 1 > blocks - 1 - len(refused):
            raise PipelinePlanningError(
                f"{stages} pipeline stages need {count(int(stages) - 1, 'stage border')} between "
                f"blocks; network '{spec}' has {blocks - 1 - len(refused)}: after "
                f"{', '.join(names[i] for i in sorted(refused))} the tensor sent to the next "
                "block is a Reshape's output, which MindSpore refuses as a stage border "
                "(\"Reshape op can't be a border\"); use fewer stages")
    # the time limit is shared by the stage solves, one per candidate pair
    costs.effort = Effort(settings.time_limit / max(1, len(candidate_pairs(
        devices, global_batch, p_list, micro_batches))))
    sharding = ((False, True, "level2", "level3") if settings.optimizer_sharding is None
                else (settings.optimizer_sharding,))
    virtual = (VIRTUAL_STAGES if settings.virtual_stages is None
               else (int(settings.virtual_stages),))

    reasons: list[str] = []     # why each search found nothing (the last one is reported)

    deep = [p for p in p_list if p > 1]

    def search(stage_costs) -> list:
        """Both searches, in :func:`_one_stage_first`'s order, the first one's step the
        second's incumbent. Same plan in either order: a pair is skipped only when its bound
        (a lower bound on its step) is strictly above a step already found, so it can neither
        beat nor tie the best."""
        found, one_reasons, deep_reasons = [], [], []
        floor = None if unpruned else stage_costs.compute_floor

        def run_deep(incumbent):
            if not deep:
                return
            m_list = [micro_batches] if micro_batches is not None else None
            try:
                found.append(plan_pipeline(stage_costs, devices, global_batch,
                                           memory_limit=limit, links=links, stages=deep,
                                           micro_batches=m_list, optimizer_sharding=sharding,
                                           virtual_stages=virtual,
                                           recompute=recompute, bytes_per=bytes_per,
                                           compute_floor=floor,
                                           cuts=stage_costs.cuts, incumbent=incumbent))
            except NoFeasiblePipeline as exc:
                deep_reasons.append(str(exc))

        def run_one(incumbent):
            if 1 not in p_list or (floor is not None and incumbent < math.inf and
                                   floor(devices, global_batch) > incumbent):
                return
            # one stage: the whole batch at once; gradient accumulation (m > 1) only when asked
            # for or when the whole batch does not fit (it never saves time: m slots of b/m)
            tries = [[micro_batches]] if stages == 1 and micro_batches is not None else [[1], None]
            for m_one in tries:
                try:
                    found.insert(0, plan_pipeline(stage_costs, devices, global_batch,
                                                  memory_limit=limit, links=links, stages=[1],
                                                  micro_batches=m_one, optimizer_sharding=sharding,
                                                  recompute=recompute, bytes_per=bytes_per,
                                                  compute_floor=floor,
                                                  cuts=stage_costs.cuts, incumbent=incumbent))
                    break
                except NoFeasiblePipeline as exc:
                    one_reasons.append(str(exc))

        first, second = (run_one, run_deep) if one_first else (run_deep, run_one)
        first(math.inf)
        second(math.inf if unpruned else min((r.step_seconds for r in found),
                                             default=math.inf))
        reasons.extend(one_reasons + deep_reasons)
        return found

    prefetched = {"workers": 1, "worker_solves": 0, "worker_seconds": 0.0}
    if workers > 1:
        from .workers import prefetch
        prefetched = prefetch(costs, candidate_pairs(devices, global_batch, p_list,
                                                     micro_batches), workers,
                              cut_args=dict(devices=devices, global_batch=global_batch,
                                            memory_limit=limit, links=links,
                                            recompute=recompute, bytes_per=bytes_per,
                                            shardings=sharding, one_stage_first=None))
    # best first: the search whose lowest pair bound is smaller runs first and its step is
    # the other's incumbent; ties: one stage first, as before. After the prefetch: the floors
    # it reads were priced by the processes that solved their pairs, in parallel
    one_first = _one_stage_first(costs.compute_floor, devices, global_batch, p_list, deep,
                                 micro_batches, virtual)
    results = search(costs)
    if not results:
        # the fastest stage plans do not fit: plan every stage within the memory limit
        # the time limit is shared by the memory-limited stage solves, one per candidate pair
        pairs = max(1, len(candidate_pairs(devices, global_batch, p_list, micro_batches)))
        lean = StageCosts(spec, hw, stage_limit=limit, devices=devices, capture=costs.graphs,
                          effort=Effort(settings.time_limit / pairs),
                          replace_strategies=settings.replace_strategies, **network_options)
        costs, results = lean, search(lean)
    if stats is not None:
        again = costs is not first
        stats.update(stage_solves=first.solves + (costs.solves if again else 0)
                     + prefetched["worker_solves"],
                     stage_solve_seconds=first.solve_seconds
                     + (costs.solve_seconds if again else 0.0),
                     workers=prefetched["workers"], worker_seconds=prefetched["worker_seconds"],
                     captures=costs.graphs.captures,
                     micro_batch_sizes=costs.graphs.micro_batch_sizes,
                     stage_sizes_built_for=costs.graphs.built_for_sizes)
    if not results:
        why = f" ({reasons[-1]})" if reasons else ""
        raise NoFeasiblePipeline(f"no plan fits in {limit / 2**30:.3g} GiB per device, even with "
                                 f"every stage planned within it{why}; raise --memory, add "
                                 "devices or lower the batch")
    best = min(results, key=lambda r: (r.step_seconds, r.stages))
    d, b = best.devices_per_stage, best.micro_batch_size
    stage = costs.solution(d, b)   # same problem as plan_graph's: no second solve or build
    plan = plan_graph_with(costs.graph(d, b), d,
                           # propagation with pipeline stages: not checked
                           PlanningOptions(hardware=hw, memory_gib=math.inf, progress=False,
                                           write_back="shard",
                                           replace_strategies=settings.replace_strategies),
                           network=spec, network_options=dict(network_options, batch=b),
                           choice=stage.choice, model=stage.model,
                           built=None if stage.problem is None
                           else (stage.problem, stage.variables), bound=stage.bound)
    plan.devices = devices
    plan.pipeline = PipelineRecord.of(best, results, stage, global_batch,
                                      costs.stage_limit).as_plan_dict()
    if best.stages > 1:
        from .param_only import parameter_only
        once = set(parameter_only(costs.graph(d, b), list(plan.pipeline["stage_of_block"])))
        hit = sorted({c["tensor"] for dec in plan.decisions for c in dec.collectives
                      if c.get("phase") == "forward" and c.get("tensor") in once})
        if hit:     # forward redistributions of these run once per step, not per micro-batch
            plan.pipeline["once_per_step"] = hit
        again = recomputed_reads(stage, list(plan.pipeline["stage_of_block"].values()))
        gathered = {c["tensor"] for dec in plan.decisions for c in dec.collectives
                    if c.get("phase") == "forward" and c.get("tensor") in again}
        if gathered:    # redistributed again on each later stage that computes and reads them
            plan.pipeline["recomputed_reads"] = {t: again[t] for t in sorted(gathered)}
        from .param_only import first_stage_cells
        first = first_stage_cells(costs.graph(d, b), list(plan.pipeline["stage_of_block"]))
        if first:   # staged on stage 0 so that MindSpore merges the micro-batch copies there
            plan.pipeline["first_stage_cells"] = first
        from .param_only import shared_parameter_cells
        tied = shared_parameter_cells(
            costs.graph(d, b), list(plan.pipeline["stage_of_block"]),
            {p["name"] for p in shared_across_stages(
                stage, list(plan.pipeline["stage_of_block"].values()), cells_only=False)},
            best.stages)
        if tied:    # unstaged, MindSpore rejects a parameter read on several stages
            plan.pipeline["shared_parameter_cells"] = tied
        if int(plan.pipeline.get("virtual_stages", 1)) == 1:
            from .root_reads import dropped_gradients
            from .stages import block_of_ops
            graph = costs.graph(d, b)
            stage_of = list(plan.pipeline["stage_of_block"].values())
            stage_of_op = {i: stage_of[k] for i, k in block_of_ops(graph)[1].items()}
            back = {c["tensor"] for dec in plan.decisions for c in dec.collectives
                    if c.get("phase") == "backward" and c.get("tensor")}
            dead = dropped_gradients(graph, stage_of_op, best.stages, back,
                                     list(plan.pipeline["stage_of_block"]))
            if dead:    # a parameter read on the root of a stage that does not own it
                plan.pipeline["gradient_dropped"] = dead
        told = graph_stages(plan, costs.graph(d, b), stage.variables)
        if told:    # stages the decisions' names do not tell
            plan.pipeline["decision_stages"] = told
        # backward AllReduces of equal constant gradients on one stage: one (MindSpore's CSE)
        from .constant_gradients import merge_constant_gradients
        merge_constant_gradients(costs.graph(d, b), stage.model, stage.variables, stage.choice,
                                 plan.decisions, stage_of_decision(plan))
    plan.totals = pipelined_totals(plan.totals, best.step_seconds)
    plan.options = dict(plan.options, batch=int(global_batch))   # the micro-batch: the record's
    return plan.seal()


@dataclass(frozen=True)
class PipelineRecord:
    """Everything a pipelined plan records of its pipeline, in one place: the outer search's
    result (stages, micro-batches, stage and recompute per block, optimizer sharding, predicted
    per-stage seconds and bytes: :meth:`smsg_ms.search.pipeline.PipelinePlan.as_plan_dict`) and
    what the stage plan adds (global batch, candidates evaluated, the parameters optimizer
    sharding shards, the tensors sent between stages, the decisions recomputed on later stages,
    the per-stage memory limit the stage plan was solved under). :meth:`as_plan_dict` is
    :attr:`smsg_ms.plan.Plan.pipeline` (the plan file's ``pipeline`` object)."""

    search: dict
    global_batch: int
    candidates: int
    optimizer_sharded: dict
    boundary_shape: list | None = None
    boundary_dtype: str | None = None
    boundary_extra: list | None = None
    recomputed_on: dict | None = None
    stage_plan_memory_limit: float | None = None
    split_blocks: dict | None = None
    shared_parameters: list | None = None

    @classmethod
    def of(cls, best, results: list, stage, global_batch: int,
           stage_limit: float | None) -> "PipelineRecord":
        """The record of ``best`` (a :class:`~smsg_ms.search.pipeline.PipelinePlan`, one of
        ``results``) whose stage plan is ``stage`` (a
        :class:`~smsg_ms.planner.stages.StageSolution`)."""
        search = best.as_plan_dict()
        search["chosen"] = best.configuration()
        others = [r.configuration() for r in results if r is not best]
        if best.runner_up is not None:
            others.append(best.runner_up)
        if others:
            runner = min(others, key=lambda c: c["step_seconds"])
            search["runner_up"] = dict(runner, difference_seconds=runner["step_seconds"]
                                       - best.step_seconds)
        extra = {}
        if best.stages > 1:
            names = search["stage_of_block"]
            stage_of = list(names.values())
            bounds = [i for i, (a, c) in enumerate(zip(stage_of, stage_of[1:])) if c > a]
            (shape, dtype), *side = crossing_slices(stage, bounds[0])
            extra = dict(boundary_shape=shape, boundary_dtype=dtype,
                         boundary_extra=[{"shape": sh, "dtype": dt} for sh, dt in side] or None,
                         recomputed_on=recomputed_on_later_stages(stage, stage_of),
                         split_blocks=split_blocks_of(stage.graph) or None,
                         shared_parameters=shared_across_stages(stage, stage_of) or None)
        # a parameter read on two stages stays whole (stages.UNSHARDED_WHY)
        whole = unsharded_across_stages(extra.get("shared_parameters"), best.optimizer_sharding)
        return cls(search, global_batch,
                   best.candidates + sum(r.candidates for r in results if r is not best),
                   optimizer_sharded(stage, frozenset(whole)) if best.optimizer_sharding
                   else {},
                   stage_plan_memory_limit=stage_limit, **extra)

    def as_plan_dict(self) -> dict:
        """The plan file's ``pipeline`` object (keys of a one-stage plan's record, or of a
        plan solved without a stage memory limit, are left out as before)."""
        out = dict(self.search)
        out.update(global_batch=self.global_batch, candidates=self.candidates,
                   optimizer_sharded=self.optimizer_sharded)
        if self.boundary_shape is not None:
            out.update(boundary_shape=self.boundary_shape, boundary_dtype=self.boundary_dtype,
                       recomputed_on=self.recomputed_on)
        if self.boundary_extra:
            out["boundary_extra"] = self.boundary_extra
        if self.stage_plan_memory_limit is not None:
            out["stage_plan_memory_limit"] = self.stage_plan_memory_limit
        if self.split_blocks:
            out["split_blocks"] = self.split_blocks
        if self.shared_parameters:
            out["shared_parameters"] = self.shared_parameters
        return out


def shared_across_stages(stage, stage_of: list[int], cells_only: bool = True) -> list[dict]:
    """The record's ``shared_parameters``: ``[{"name", "shape" (per-device slice), "dtype",
    "stages" (sorted, at least two)}]`` of the parameters of the stage plan ``stage`` read on
    more than one stage when block ``i`` runs on stage ``stage_of[i]``
    (:func:`~smsg_ms.planner.stages.shared_parameters`, ``cells_only`` passed on: by default
    readers on the network's root do not count), in graph order."""
    from .stages import shared_parameters

    out = []
    for name, (blocks, shape, dtype, _) in shared_parameters(stage, cells_only=cells_only).items():
        stages = sorted({int(stage_of[i]) for i in blocks})
        if len(stages) > 1:
            out.append({"name": name, "shape": shape, "dtype": dtype, "stages": stages})
    return out


def split_blocks_of(graph) -> dict[str, dict[str, str]]:
    """The record's ``split_blocks`` of ``graph`` (:func:`.border_tails.split_record`)."""
    from .border_tails import split_record, tails
    from .stages import chain_blocks, reshape_borders, weight_dependent

    names, block = chain_blocks(graph)
    sent = weight_dependent(graph)
    return split_record(names, tails(graph, names, block, sent,
                                     reshape_borders(graph, block, sent)))


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


def graph_stages(plan: Plan, graph, variables) -> dict[str, int]:
    """The record's ``decision_stages``: ``{decision name: stage}`` of the decisions whose stage
    :func:`stage_of_decision` cannot tell from their names, by :func:`.stages.block_of_ops` of
    the stage plan's ``graph`` (``variables``: its search variables): the functional calls
    that open a block (:func:`.stages.block_heads`) or read a later block's parameters, and
    the operators run with a later block's inputs (:func:`.stages.not_before_inputs`). A
    decision whose operators lie on several stages keeps its name's stage. ``{}`` where the
    names tell every stage."""
    stage_of = list(plan.pipeline["stage_of_block"].values())
    _, block = block_of_ops(graph)
    by_name = stage_of_decision(plan)
    out = {}
    for var in variables:
        stages = {int(stage_of[block[op.id]]) for op in var.ops}
        if len(stages) == 1 and var.name in by_name and by_name[var.name] not in stages:
            out[var.name] = stages.pop()
    return out


def stage_of_decision(plan: Plan) -> dict[str, int]:
    """Stage of every decision of a pipelined plan (decisions are in graph order): by its block;
    an operator outside blocks takes the stage of the block before it (functional calls inside a
    block, such as ConvNeXt's layer scale ``gamma * x``, and the operators after the last
    block), the first stage before any block: the rule of :func:`.stages.block_of_ops`, but
    where the record's ``decision_stages`` (:func:`graph_stages`) says otherwise."""
    record = plan.pipeline or {}
    stage_of = record.get("stage_of_block", {})
    units = {cell: stage_of[runs_with] for cells in record.get("split_blocks", {}).values()
             for cell, runs_with in cells.items()}
    out: dict[str, int] = {}
    current = 0
    for d in plan.decisions:
        bp = block_prefix(d.name)
        name = f"{bp[0]}.{bp[1]}" if bp else None
        if name in stage_of:
            current = stage_of[name]
            unit = next((u for u in units if d.name.startswith(u + ".")), None)
            if unit is not None:        # a block's cell that runs with another block
                current = units[unit]
        out[d.name] = current
    out.update(record.get("decision_stages", {}))
    return out


__all__ = ["PREFETCH_FROM_DEVICES", "PipelineRecord", "candidate_pairs", "graph_stages",
           "plan_network_pipelined",
           "plan_pipelined_with", "pipelined_totals", "stage_of_decision"]
