"""Price hybrid configurations (``dp, tp, pp, micro_batch, global_batch``) with smsg's model:
one at a time (``smsg_ms.score(..., config=...)``, ``smsg-ms score --config``) or a CSV of many
(``smsg-ms score --configs FILE.csv``) in one process.

A configuration is expanded into the Megatron layout (:mod:`smsg_ms.compare.configs`) on the
graph of one micro-batch (``micro_batch·dp`` samples, global shapes) on one stage's ``dp·tp``
devices, the primitives the layout does not fix take the cost model's best options given the
pinned ones (the exact search with the pinned variables fixed, :meth:`ShapeScorer.choice`), and
the assignment is priced:

* ``pp = 1``, one micro-batch, no recompute, no optimizer sharding: the single-stage step of
  :func:`smsg_ms.planner.plan_graph` with that ``choice`` (the search problem's total: compute,
  collectives, redistributions, gradient synchronisation);
* otherwise the 1F1B super-step ``max_s ((m + p − 1)·t_s + g_s)`` of
  :mod:`smsg_ms.cost.pipeline` (Narayanan et al. SC'21, §2.2) over ``p = pp`` stages of equal
  layer counts, from the per-layer costs of that stage plan
  (:func:`smsg_ms.planner.stages.layer_costs_of`); ``pp = 1`` with ``m > 1`` micro-batches is
  gradient accumulation (``m·t + g``). The transfers between stages are placed on the
  machine's levels for stages of ``dp·tp`` consecutive ranks (``Links.for_stage``), and
  ``recompute`` re-runs the decoder blocks' forward only (:func:`_decoder_recompute`).

Graphs hold global shapes, so the device count needs no new capture; the micro-batch does, and
is derived from two captures per shape by :class:`smsg_ms.graph.batch_scale.BatchFamily`.
"""
from __future__ import annotations

import csv
import inspect
import math
from dataclasses import dataclass, field, replace

from ..words import count
from .configs import (PREFERRED, Config, ConfigError, config_from_values, expand,
                      positive_int, role_strategy, sequence_parallel_out)

from .configs_csv import CSV_COLUMNS, SHAPE_COLUMNS, passed_through, read_config_rows


def _network_default(spec: str, key: str, options: dict):
    """``options[key]``, else the default of the network function's ``key`` parameter, else
    None (the value :meth:`Config.validate` then does not check)."""
    from ..networks import resolve_spec

    if options.get(key) is not None:
        return int(options[key])
    _, func = resolve_spec(spec)
    param = inspect.signature(func).parameters.get(key)
    if param is None or param.default in (inspect.Parameter.empty, None):
        return None
    return int(param.default)


@dataclass
class _Stage:
    """One (micro-batch, stage devices): the graph, its cost model, its variables (every
    option) and the whole search problem, built on first use (:meth:`ShapeScorer.full`)."""
    graph: object
    model: object
    variables: list
    index: dict
    problem: object = None


@dataclass
class _Priced:
    """A configuration's stage plan priced on the problem cut to what it needs: ``problem``
    and ``variables`` (:func:`smsg_ms.planner.problem.restrict_options`), ``choice`` indexing
    them; ``full_choice`` indexes the stage's variables."""
    problem: object
    variables: list
    choice: list
    full_choice: list
    pinned: int
    fallback: list


@dataclass
class ShapeScorer:
    """Scores configurations of one network shape (``spec`` with ``options``, ``batch``
    excluded); captures, cost models and search problems are cached per (micro-batch, stage
    devices)."""

    spec: str
    hardware: str = "ascend910b"
    options: dict = field(default_factory=dict)
    #: blocks of the network priced when the capture (``options["layers"]``, at least 4) is
    #: shallower: the chain is the captured first block (with the embedding), its second block
    #: repeated ``depth − 2`` times, and its last block (with the head and loss). Exact when the
    #: middle blocks are identical (the same shapes under the same layout: a Megatron
    #: configuration pins them); :meth:`score` checks the captured middle blocks agree.
    depth: int | None = None
    #: price on the whole search problem (every pair of options of every edge, as the search
    #: builds it) instead of the options a configuration needs: the reference the fast path is
    #: tested (tests/test_score_fast.py) and benchmarked (scripts/bench_score_configs.py) against
    full_problem: bool = False
    #: price the transfers between stages cut over the tensor-parallel group (each rank sends
    #: ``1/tp``, the receivers AllGather: :attr:`smsg_ms.cost.pipeline.Links.send_split`), as
    #: Megatron-LM and Megatron-DeepSpeed send them; off: as MindSpore sends them
    partitioned_sends: bool = False
    #: price the gradients as DeepSpeed's bf16 optimizer keeps them: accumulated and AllReduced
    #: in fp32 (:attr:`smsg_ms.cost.pipeline.Links.main_grad_bytes` = 4) beside an fp32 master
    #: weight (12 optimizer bytes per element, :data:`~smsg_ms.cost.pipeline.MIXED_PRECISION_ADAM`);
    #: off: as MindSpore keeps them (the parameter's dtype, two fp32 moments)
    fp32_main_grads: bool = False
    #: price the Send and Receive at each stage border as one overlapped pair
    #: (:attr:`smsg_ms.cost.pipeline.Links.paired_transfers`), as Megatron-LM's 1F1B batches
    #: them; off: as MindSpore chains them
    paired_transfers: bool = False

    def __post_init__(self):
        from ..graph.batch_scale import BatchFamily
        from ..networks import check_options

        check_options(self.spec, dict(self.options, batch=1))
        self.family = BatchFamily(self._capture)
        self.stages: dict[tuple[int, int], _Stage] = {}
        self.choices: dict[tuple[int, int, int], _Priced] = {}
        self.limits = {k: _network_default(self.spec, k, self.options)
                       for k in ("heads", "layers", "vocab")}
        if self.depth is not None:
            captured = self.limits["layers"]
            if captured is None or captured < 4 or self.depth < captured:
                raise ConfigError(f"depth {self.depth} needs a capture of 4 to {self.depth} "
                                  f"layers, got {captured}")
            self.limits["layers"] = self.depth

    def _capture(self, batch: int):
        from ..graph.capture import capture_network

        return capture_network(self.spec, batch=batch, **self.options)

    def stage(self, batch: int, devices: int) -> _Stage:
        key = (batch, devices)
        if key not in self.stages:
            from ..cost.hardware import get_hardware
            from ..cost.model import CostModel
            from ..planner.variables import group_variables, variable_index

            graph = self.family(batch)
            # every strategy, those leaving devices idle too: the layout replicates norms and
            # residual Adds over the tp group (mindformers' (dp, 1)), and the tied embedding's
            # vocabulary cut keeps its indices whole, both under dp·tp devices
            model = CostModel(graph, devices, get_hardware(self.hardware),
                              fully_use_devices=False)
            variables = group_variables(graph, model, reuse=True)
            self.stages[key] = _Stage(graph, model, variables, variable_index(variables))
        return self.stages[key]

    @staticmethod
    def full(stage: _Stage):
        """The whole search problem of ``stage`` (every option pair priced), built once."""
        from ..planner import build_problem

        if stage.problem is None:
            stage.problem, _ = build_problem(stage.graph, stage.model,
                                             variables=stage.variables)
        return stage.problem

    def choice(self, config: Config) -> tuple[_Stage, _Priced]:
        """The stage plan of ``config`` priced: ``(stage, priced)``; ``priced.pinned`` counts
        the variables the layout pins, ``priced.fallback`` names the primitives whose layout
        strategy the cost model does not offer.

        Unless :attr:`full_problem`, the problem is cut to the pinned options and every option
        of the open variables (:func:`~smsg_ms.planner.problem.restrict_options`), solved for
        the open ones, then cut to the chosen option of every variable: each redistribution and
        operator cost is priced only where the configuration needs it, by the search's own
        :func:`~smsg_ms.planner.build_problem`, so each entry equals the whole problem's.

        Raises:
            ConfigError: the configuration is invalid (:meth:`Config.validate`), or the cost
                model offers no option for a strategy of the layout (a dimension the cut does
                not divide).
            smsg_ms.devices.DeviceCountError: ``dp·tp`` is a device count MindSpore refuses.
        """
        from ..devices import check_device_count
        from ..planner import build_problem
        from ..planner.problem import restrict_options

        config.validate(**self.limits)
        check_device_count(config.dp * config.tp)
        stage = self.stage(config.micro_batch * config.dp, config.dp * config.tp)
        sp = config.sequence_parallel and config.tp > 1
        key = (config.micro_batch * config.dp, config.dp, config.tp, sp)
        if key in self.choices:      # the stage plan depends on the micro-batch, dp, tp, sp only
            return stage, self.choices[key]
        choice: list[int | None] = [None] * len(stage.variables)
        fallback = []
        for op_id, (role, strategy) in expand(stage.graph, config.dp, config.tp, sp).items():
            vi, _ = stage.index[op_id]
            try:
                # an out_strategy option's key ends in ("out", ...): never a configuration's
                # layout
                keys = [k if any(s and s[0] == "out" for s in k) else
                        tuple(tuple(int(x) for x in s) for s in k)
                        for k in stage.variables[vi].keys]
            except TypeError:
                # one operator left to MindSpore's default (keyed by its layouts: calls of
                # several ranks), which the layout cannot pin (mindformers' MoE router)
                fallback.append(stage.variables[vi].name)
                continue
            wanted = [strategy]
            if sp and role in ("attn_out", "ffn_out"):   # reduce-scatter onto the tokens first
                wanted.insert(0, tuple(strategy) + sequence_parallel_out(config.dp, config.tp))
            if sp and role in ("norm", "residual"):      # the token axis may not divide
                wanted.append(role_strategy(stage.graph, stage.graph.ops[op_id], role,
                                            config.dp, config.tp))
            if role == "embedding":
                wanted.append(role_strategy(stage.graph, stage.graph.ops[op_id],
                                            "embedding_replicated_ids", config.dp, config.tp))
            hit = next((keys.index(w) for w in wanted if w in keys), None)
            if hit is not None:
                choice[vi] = hit
            elif role in PREFERRED:
                fallback.append(stage.variables[vi].name)
            else:
                raise ConfigError(f"{stage.variables[vi].name} ({role}) cannot take {strategy}: "
                                  "a dimension is not divisible by its cut")
        pinned = sum(c is not None for c in choice)

        def cut(keep: dict):
            return build_problem(stage.graph, stage.model,
                                 variables=restrict_options(stage.variables, keep))

        if self.full_problem:
            problem, variables = self.full(stage), stage.variables
            full_choice = self._complete(problem, choice)
            priced = _Priced(problem, variables, full_choice, full_choice, pinned, fallback)
        else:
            keep = {vi: [c] for vi, c in enumerate(choice) if c is not None}
            problem, _ = cut(keep)
            picked = self._complete(problem, [None if c is None else 0 for c in choice])
            full_choice = [c if c is not None else picked[vi] for vi, c in enumerate(choice)]
            problem, variables = cut({vi: [c] for vi, c in enumerate(full_choice)})
            priced = _Priced(problem, variables, [0] * len(full_choice), full_choice, pinned,
                             fallback)
        if not math.isfinite(priced.problem.total(priced.choice)):
            more = f" and {len(fallback) - 3} more" if len(fallback) > 3 else ""
            raise ConfigError("no strategy of the cost model completes the layout (left to the "
                              f"model: {', '.join(fallback[:3]) or 'none'}{more})")
        self.choices[key] = priced
        return stage, priced

    @staticmethod
    def _complete(problem, choice: list) -> list[int]:
        """The cost model's best options for the variables the layout leaves open (``None`` in
        ``choice``, option indices of ``problem``), the pinned ones fixed: the exact search
        (:func:`smsg_ms.search.solve`) over the open variables alone, each one's cost plus its
        edges to pinned neighbours at their option, the edges between open variables kept.
        Greedy completion in graph order (:func:`smsg_ms.compare.score.fill_choice`) chose, on
        mindformers' decomposed RmsNorm, cuts of the hidden axis that the next MatMul had to
        gather."""
        from ..search import Edge, NoFeasiblePlan, SearchProblem, Variable, solve
        from .score import fill_choice

        open_vars = [vi for vi, c in enumerate(choice) if c is None]
        if not open_vars:
            return list(choice)
        where = {vi: k for k, vi in enumerate(open_vars)}
        costs = {vi: problem.variables[vi].cost.copy() for vi in open_vars}
        edges = []
        for e in problem.edges:
            u_open, v_open = e.u in where, e.v in where
            if u_open and v_open:
                edges.append(Edge(where[e.u], where[e.v], e.cost))
            elif u_open:
                costs[e.u] = costs[e.u] + e.cost[:, choice[e.v]]
            elif v_open:
                costs[e.v] = costs[e.v] + e.cost[choice[e.u], :]
        reduced = SearchProblem([Variable(problem.variables[vi].name,
                                          problem.variables[vi].op_ids,
                                          problem.variables[vi].keys, costs[vi],
                                          problem.variables[vi].memory) for vi in open_vars],
                                edges)
        try:
            picked = solve(reduced, progress=False).choice
        except NoFeasiblePlan:
            return fill_choice(problem, choice)
        out = list(choice)
        for k, vi in enumerate(open_vars):
            out[vi] = int(picked[k])
        return out

    def _chain(self, layers: list) -> list:
        """``layers`` (of the capture) stretched to :attr:`depth` blocks (see there).

        Raises:
            ConfigError: the captured middle blocks differ in cost (not identical blocks).
        """
        if self.depth is None or self.depth == len(layers):
            return layers
        middle = layers[1:-1]
        if any(replace(x, name="") != replace(middle[0], name="") for x in middle[1:]):
            raise ConfigError("the captured middle blocks differ in cost; capture every layer "
                              "(no depth)")
        return [layers[0]] + [middle[0]] * (self.depth - 2) + [layers[-1]]

    def score(self, config: Config, *, plan: bool = False) -> dict:
        """Predicted step of ``config``: ``{"step_seconds", "memory_bytes" (largest stage, per
        device), "micro_batches", "devices_per_stage", "pinned", "filled", "plan"}``; ``plan``
        is the single-stage :class:`~smsg_ms.plan.Plan` when asked for and ``pp = 1``.

        Raises:
            ConfigError, smsg_ms.devices.DeviceCountError: as :meth:`choice`.
        """
        from ..cost.pipeline import stage_cost, super_step_seconds
        from ..planner.stages import (StageSolution, bytes_per_element, layer_costs_of,
                                      links_of)

        stage, priced = self.choice(config)
        m, p = config.micro_batches, config.pp
        out = {"micro_batches": m, "devices_per_stage": config.dp * config.tp,
               "pinned": priced.pinned, "filled": len(priced.choice) - priced.pinned,
               "fallback": priced.fallback, "plan": None}
        if plan and p == 1 and self.depth is None:
            from ..planner import plan_graph
            out["plan"] = plan_graph(stage.graph, config.dp * config.tp, hardware=self.hardware,
                                     choice=priced.full_choice, model=stage.model,
                                     exhaustive=True, built=(self.full(stage), stage.variables),
                                     network=self.spec,
                                     options=dict(self.options,
                                                  batch=config.micro_batch * config.dp))
        if (p == 1 and m == 1 and not config.recompute and not config.optimizer_shard
                and self.depth is None):
            out["step_seconds"] = float(priced.problem.total(priced.choice))
            out["memory_bytes"] = float(priced.problem.memory(priced.choice))
            return out
        sol = StageSolution(stage.graph, config.dp * config.tp, stage.model, priced.variables,
                            priced.choice, priced.problem)
        layers = self._chain(layer_costs_of(sol))
        if len(layers) % p:
            raise ConfigError(f"pp={p} does not divide the {count(len(layers), 'repeated block')}")
        # stages of dp·tp consecutive ranks: a Send pairs rank r with r + dp·tp (Links)
        per, bytes_per = len(layers) // p, bytes_per_element(stage.graph)
        links = links_of(self.hardware).for_stage(config.dp * config.tp)
        if self.partitioned_sends:
            links = replace(links, send_split=config.tp)
        if self.paired_transfers:
            links = replace(links, paired_transfers=True)
        if self.fp32_main_grads:
            from ..cost.pipeline import MIXED_PRECISION_ADAM
            links = replace(links, main_grad_bytes=4.0)
            bytes_per = dict(bytes_per, optimizer=MIXED_PRECISION_ADAM["optimizer"])
        layers, recompute = _decoder_recompute(layers, config.recompute)
        costs = [stage_cost(layers, s * per, (s + 1) * per, s, p,
                            recompute=recompute[s * per:(s + 1) * per],
                            sharding=config.optimizer_shard,
                            links=links, bytes_per=bytes_per, micro_batches=m)
                 for s in range(p)]
        out["step_seconds"] = float(super_step_seconds(costs, m))
        out["memory_bytes"] = max(c.memory_bytes for c in costs)
        return out


def _decoder_recompute(layers: list, on: bool) -> tuple[list, list]:
    """The chain and its per-element recompute settings when every decoder block recomputes its
    forward (``on``) and nothing else does: the first element (embedding + block) and the last
    (block + head and loss) re-spend only their block's forward, taken from the chain's second
    element (identical blocks: :meth:`ShapeScorer._chain`), and keep the embedding's and the
    head's activations. mindformers recomputes the decoder layers it calls ``recompute()`` on,
    not the head; Megatron-DeepSpeed's ``GPTModelPipe`` checkpoints only runs of
    ``ParallelTransformerLayerPipe`` (DeepSpeed ``PipelineModule._is_checkpointable``).
    Expressed as :data:`~smsg_ms.cost.pipeline.SELECTIVE` on the two end elements (the block as
    their selective part). A chain of fewer than 3 elements has no plain block to take the
    block's forward from: every element is recomputed whole."""
    from ..cost.pipeline import SELECTIVE

    if not on or len(layers) < 3:
        return layers, [bool(on)] * len(layers)
    block = layers[1]
    part = dict(selective_seconds=block.forward_seconds,
                selective_bytes=max(0.0, block.activation_bytes - block.input_bytes))
    ends = (0, len(layers) - 1)
    chain = [replace(x, **part) if k in ends else x for k, x in enumerate(layers)]
    return chain, [SELECTIVE if k in ends else True for k in range(len(layers))]


def score_config(spec: str, config, *, devices: int | None = None, hardware="ascend910b",
                 plan: bool = False, **network_options) -> dict:
    """Price one configuration (``Config`` or its ``dp=..,tp=..`` text) of ``spec``; see
    :meth:`ShapeScorer.score`. ``devices``, when given, must equal ``dp·tp·pp``.

    Raises:
        ConfigError, smsg_ms.devices.DeviceCountError, smsg_ms.networks.NetworkSpecError,
        smsg_ms.graph.capture.CaptureError.
    """
    from .configs import parse_config

    if isinstance(config, str):
        config = parse_config(config)
    if devices is not None:
        config.validate(devices=devices)
    return ShapeScorer(spec, hardware, dict(network_options)).score(config, plan=plan)


def _row_shape(row: dict, base: dict) -> dict:
    shape = dict(base)
    for k in SHAPE_COLUMNS:
        text = str(row.get(k, "") or "").strip()
        if text:
            shape[k] = positive_int(k, text)
    return shape


def score_rows(spec: str, rows, *, hardware="ascend910b", progress=None,
               capture_layers: int | None = None, full_problem: bool = False,
               partitioned_sends: bool = False, fp32_main_grads: bool = False,
               paired_transfers: bool = False, **network_options):
    """Score CSV rows (dicts with :data:`CSV_COLUMNS`, optional ``recompute``,
    ``optimizer_shard`` and :data:`SHAPE_COLUMNS` overriding ``network_options``): yields each row
    with ``step_seconds`` (seconds, empty on error) and ``error`` (one line, empty when scored)
    added, in order. One :class:`ShapeScorer` per distinct shape; a shape that fails to build
    gives its error to every row of that shape. ``capture_layers`` (at least 4): a shape deeper
    than that is captured at that depth and its middle block repeated to the row's ``layers``
    (:attr:`ShapeScorer.depth`; the capture's cost grows with the depth). ``full_problem``:
    :attr:`ShapeScorer.full_problem` (the reference pricing); ``partitioned_sends``:
    :attr:`ShapeScorer.partitioned_sends`; ``fp32_main_grads``:
    :attr:`ShapeScorer.fp32_main_grads`; ``paired_transfers``:
    :attr:`ShapeScorer.paired_transfers`."""
    from ..devices import DeviceCountError
    from ..graph.capture import CaptureError
    from ..networks import NetworkSpecError

    scorers: dict[tuple, ShapeScorer | str] = {}
    for n, row in enumerate(rows):
        out = dict(row)
        out["step_seconds"], out["error"] = "", ""
        try:
            missing = [c for c in CSV_COLUMNS if not str(row.get(c, "") or "").strip()]
            if missing:
                raise ConfigError(f"row lacks {', '.join(missing)}")
            config = config_from_values(row)
            config.validate(devices=positive_int("devices", str(row["devices"]).strip()))
            shape = _row_shape(row, network_options)
            key = tuple(sorted(shape.items()))
            if key not in scorers:
                depth = shape.get("layers")
                shallow = capture_layers is not None and depth is not None and (
                    depth > capture_layers)
                try:
                    scorers[key] = (ShapeScorer(spec, hardware, dict(shape, layers=capture_layers),
                                                depth=depth, full_problem=full_problem,
                                                partitioned_sends=partitioned_sends,
                                                fp32_main_grads=fp32_main_grads,
                                                paired_transfers=paired_transfers)
                                    if shallow else ShapeScorer(
                                        spec, hardware, shape, full_problem=full_problem,
                                        partitioned_sends=partitioned_sends,
                                        fp32_main_grads=fp32_main_grads,
                                        paired_transfers=paired_transfers))
                except (NetworkSpecError, CaptureError) as exc:
                    scorers[key] = str(exc).splitlines()[0]
            scorer = scorers[key]
            if isinstance(scorer, str):
                raise ConfigError(scorer)
            try:
                out["step_seconds"] = f"{scorer.score(config)['step_seconds']:.6g}"
            except (NetworkSpecError, CaptureError) as exc:
                raise ConfigError(str(exc).splitlines()[0]) from exc
        except (ConfigError, DeviceCountError) as exc:
            out["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if progress is not None:
            progress(n + 1)
        yield out


def score_csv(spec: str, src, dst, *, hardware="ascend910b", note=None,
              **network_options) -> tuple[int, int]:
    """Read configuration rows from the open text file ``src`` (CSV with a header), write them to
    ``dst`` with ``step_seconds`` and ``error`` columns added. Returns ``(rows, errors)``.

    The whole file is read first (:func:`~.configs_csv.read_config_rows`): a file it refuses
    writes nothing.

    Raises:
        smsg_ms.compare.configs_csv.ConfigFileError: see
            :func:`~.configs_csv.read_config_rows` (a misspelt or missing column, a row of
            another cell count, text that is not UTF-8).

    ``note``: called with one line naming the columns no configuration reads (copied through
    as they are: a measured time, a label), where there are any.
    """
    header, rows_in = read_config_rows(src)
    extra = passed_through(header)
    if extra and note is not None:
        note(f"columns copied through, not read: {', '.join(extra)}")
    fields = header + [c for c in ("step_seconds", "error") if c not in header]
    writer = csv.DictWriter(dst, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    rows = errors = 0
    for out in score_rows(spec, rows_in, hardware=hardware, **network_options):
        writer.writerow({k: out.get(k, "") for k in fields})
        rows += 1
        errors += bool(out["error"])
    return rows, errors


__all__ = ["CSV_COLUMNS", "SHAPE_COLUMNS", "ShapeScorer", "score_config", "score_csv",
           "score_rows"]
