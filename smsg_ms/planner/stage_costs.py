"""The ``layer_costs(d, b)`` callable of the outer pipeline search, with its captures, cost
models and stage solutions cached (:class:`StageCosts`)."""
from __future__ import annotations

import time

from ..cost.pipeline import LayerCost
from ..graph.model import OpGraph
from .stages import (StageSolution, block_of_ops, layer_costs_of, solve_stage, stage_cost_model,
                     weight_dependent)


class StageCosts:
    """``layer_costs(d, b)`` for :func:`plan_pipeline`, with captures and solutions cached.

    Returns ``None`` where the network cannot be planned on ``d`` devices with micro-batch ``b``
    (MindSpore's device counts, an operator without a valid strategy). Graphs come from a
    :class:`~smsg_ms.planner.stage_graphs.StageGraphs`: built for the stage's ``d`` devices when
    the network reads the world size (one family per ``d``), else one family for every ``d``;
    by micro-batch size from a :class:`smsg_ms.graph.batch_scale.BatchFamily`: two captures, the
    other batch sizes derived by rescaling the batch axis (exact for batch-linear graphs, else
    captured). ``solves`` counts the operator-level stage solves.
    """

    def __init__(self, spec: str, hardware, *, stage_limit: float | None = None,
                 devices: int | None = None, capture=None, effort=None,
                 replace_strategies: bool = False, build_for_devices: bool = True,
                 **network_options):
        """``devices``: all devices (a stage of ``d < devices`` devices is one of ``p =
        devices / d`` stages: :func:`.stages.stage_cost_model`'s ``pipelined``; default: not
        known, every stage costed as one stage). ``stage_limit`` (bytes per device) with
        ``devices``: solve each stage plan so that every stage of the even cut fits
        (:func:`smsg_ms.planner.stage_memory.solve_stage_within`); default: no limit. ``capture``:
        ``batch -> OpGraph`` (default: :func:`smsg_ms.graph.capture.capture_network` of
        ``spec`` with ``network_options``, built for each stage's devices unless
        ``build_for_devices`` is ``False``), a ``BatchFamily`` or a ``StageGraphs`` to share
        (a given capture or family is not built per stage size). ``effort``: the
        work limit of each stage solve (memory-limited, or too wide to eliminate)
        (:class:`smsg_ms.search.effort.Effort`; default: the search's). ``replace_strategies``:
        the stage plans plan anew the strategies the network's own ``shard()`` sets (default:
        kept)."""
        from .stage_graphs import StageGraphs

        self.spec, self.hardware = spec, hardware
        self.stage_limit, self.devices, self.effort = stage_limit, devices, effort
        self.replace_strategies = replace_strategies
        self.options = {k: v for k, v in network_options.items() if k != "batch"}
        self.graphs = (capture if isinstance(capture, StageGraphs)
                       else StageGraphs(spec, self.options, capture, build_for_devices))
        self.solutions: dict[tuple[int, int], StageSolution] = {}
        self.models: dict[tuple[int, int], object] = {}
        # by (StageGraphs.key(d), b): shared by every d where the graphs do not depend on it
        self.signatures: dict[tuple, list] = {}
        self.op_sigs: dict[tuple, dict[int, tuple]] = {}
        self.structures: dict[tuple, tuple] = {}
        self.solves = 0
        self.solve_seconds = 0.0         # CPU seconds of this process in the stage solves
        # pairs solved in other processes (store_prefetched)
        self.floors: dict[tuple[int, int], float] = {}
        self.layers: dict[tuple[int, int], list | None] = {}
        self.choices: dict[tuple[int, int], list[int]] = {}
        self.cuts: dict[tuple, tuple | None] = {}    # search.pipeline.cut_key -> cut_chain
        self.bounds: dict[tuple[int, int], float] = {}   # lower bounds of inexact choices

    def graph(self, d: int, b: int) -> OpGraph:
        """The graph of a stage of ``d`` devices at micro-batch ``b``."""
        return self.graphs.graph(d, b)

    def _key(self, d: int, b: int) -> tuple:
        self.graph(d, b)            # captured first: the key depends on what it read
        return (self.graphs.key(d), b)

    def model(self, d: int, b: int):
        """The stage plan's cost model on ``d`` devices at micro-batch ``b`` (cached until the
        stage is solved)."""
        if (d, b) not in self.models:
            # a stage of 2+ stages (fewer devices than all): MindSpore's pipelined compile
            # keeps the backward AllReduce of a constant gradient
            pipelined = self.devices is not None and d < self.devices
            self.models[(d, b)] = stage_cost_model(self.graph(d, b), d, self.hardware,
                                                   self.replace_strategies, pipelined)
        return self.models[(d, b)]

    def solution(self, d: int, b: int) -> StageSolution:
        if (d, b) not in self.solutions and (d, b) in self.choices:
            # solved in a worker process: same variables, its choice (no second solve)
            from .variables import group_variables

            model = self.model(d, b)
            variables = group_variables(self.graph(d, b), model, True,
                                         signatures=self.op_signatures(d, b))
            self.solutions[(d, b)] = StageSolution(self.graph(d, b), d, model, variables,
                                                   list(self.choices[(d, b)]),
                                                   bound=self.bounds.get((d, b)))
            self.models.pop((d, b), None)
        if (d, b) not in self.solutions:
            self.solves += 1
            start = time.process_time()
            model = self.model(d, b)
            if self.stage_limit is None:
                self.solutions[(d, b)] = solve_stage(self.graph(d, b), d, self.hardware, model,
                                                     self.op_signatures(d, b), self.effort)
            else:
                from .stage_memory import solve_stage_within
                self.solutions[(d, b)] = solve_stage_within(
                    self.graph(d, b), d, self.hardware, self.devices // d, self.stage_limit,
                    model=model, signatures=self.op_signatures(d, b), effort=self.effort)
            self.models.pop((d, b), None)
            self.solve_seconds += time.process_time() - start
        return self.solutions[(d, b)]

    def store_prefetched(self, d: int, b: int, floor: float, *, evaluated: bool = True,
                         layers: list | None = None, choice: list[int] | None = None,
                         cuts: dict | None = None, bound: float | None = None) -> None:
        """Record what another process computed for the pair ``(d, b)``
        (:func:`smsg_ms.planner.workers.prefetch`): its compute floor (seconds); when
        ``evaluated``, its per-layer costs (``None``: the pair cannot be planned), its stage
        plan's option index per search variable (rebuilt into a :class:`StageSolution` only if
        the outer search picks the pair) and ``cuts``
        (``{search.pipeline.cut_key: cut_chain result}``)."""
        self.floors[(d, b)] = floor
        if not evaluated:
            return
        self.layers[(d, b)] = layers
        if choice is not None:
            self.choices[(d, b)] = choice
            if bound is not None:           # solved at its work limit: the proven bound
                self.bounds[(d, b)] = bound
        self.cuts.update(cuts or {})

    def structure(self, d: int, b: int) -> tuple:
        """``(block_of_ops(graph), weight_dependent(graph))`` of the graph of ``d`` devices at
        micro-batch ``b``: what :func:`layer_costs_of` reads of the graph alone, computed once
        (for every ``d`` where the graph does not depend on it)."""
        key = self._key(d, b)
        if key not in self.structures:
            graph = self.graph(d, b)
            self.structures[key] = (block_of_ops(graph), weight_dependent(graph))
        return self.structures[key]

    def op_signatures(self, d: int, b: int) -> dict[int, tuple]:
        """:func:`smsg_ms.planner.variables.op_signatures` of the graph of ``d`` devices at
        micro-batch ``b`` (computed once, shared by the stage plans of every device count
        where the graph does not depend on it)."""
        from .variables import op_signatures

        key = self._key(d, b)
        if key not in self.op_sigs:
            self.op_sigs[key] = op_signatures(self.graph(d, b))
        return self.op_sigs[key]

    def compute_floor(self, d: int, b: int) -> float:
        """Lower bound (s) on ``Σ (forward_seconds + backward_seconds)`` over the layers of
        ``self(d, b)``, without solving: Σ over operators of the least compute seconds
        (kernels: launches and roofline, ``CostModel.compute_seconds``) plus the operator's
        own forward and backward collectives (``CostModel.collective_seconds``; gradient
        synchronisation excluded) among the strategies the cost model offers it on ``d``
        devices (at 8,192 devices per stage the collectives of the forced tensor parallelism
        are most of a one-stage plan's time, which the compute seconds alone do not see).

        Why it is a bound: :func:`layer_costs_of` adds every operator's compute seconds and
        non-gradient-sync collectives under its chosen strategy, which is one of those offered
        (a search variable's options are strategies common to its operators' option lists,
        ``planner.variables.group_variables``), plus redistribution seconds (≥ 0). Operators with
        equal ``planner.variables.op_signature`` have equal
        option lists, so each signature is costed once. Returns 0 (no bound) where the cost
        model refuses ``d``.
        """
        if (d, b) in self.floors:
            return self.floors[(d, b)]
        graph = self.graph(d, b)
        key = self._key(d, b)
        if key not in self.signatures:
            groups: dict[tuple, list] = {}
            sigs = self.op_signatures(d, b)
            for op in graph.ops:
                groups.setdefault(sigs[op.id], [op, 0])[1] += 1
            self.signatures[key] = [tuple(v) for v in groups.values()]
        try:
            model = self.model(d, b)
            floor = sum(n * min(sum(model.compute_seconds(c))
                               + sum(model.collective_seconds(x) for x in c.collectives
                                     if x.phase != "grad_sync")
                               for c in model.options(op))
                       for op, n in self.signatures[key])
        except ValueError:
            floor = 0.0
        # kept: a pair's model is dropped once it is solved, and the searches ask again
        self.floors[(d, b)] = floor
        return floor

    def __call__(self, d: int, b: int) -> list[LayerCost] | None:
        from .errors import PlanningError
        from ..search import NoFeasiblePlan

        if (d, b) in self.layers:
            return self.layers[(d, b)]
        try:
            pipelined = self.devices is not None and d < self.devices
            return layer_costs_of(self.solution(d, b), self.structure(d, b), pipelined)
        except (PlanningError, NoFeasiblePlan, ValueError):
            return None
