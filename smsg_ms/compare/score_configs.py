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
  gradient accumulation (``m·t + g``).

Graphs hold global shapes, so the device count needs no new capture; the micro-batch does, and
is derived from two captures per shape by :class:`smsg_ms.graph.batch_scale.BatchFamily`.
"""
from __future__ import annotations

import csv
import inspect
import math
from dataclasses import dataclass, field

from .configs import (PREFERRED, Config, ConfigError, config_from_values, expand,
                      positive_int, role_strategy)

#: CSV columns a configuration row needs; ``recompute``, ``optimizer_shard`` and the shape
#: columns :data:`SHAPE_COLUMNS` are optional, any other column is passed through.
CSV_COLUMNS = ("devices", "global_batch", "micro_batch", "tp", "dp", "pp")
SHAPE_COLUMNS = ("layers", "hidden", "heads", "seq", "vocab", "ffn")


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
    graph: object
    model: object
    problem: object
    variables: list
    index: dict


@dataclass
class ShapeScorer:
    """Scores configurations of one network shape (``spec`` with ``options``, ``batch``
    excluded); captures, cost models and search problems are cached per (micro-batch, stage
    devices)."""

    spec: str
    hardware: str = "ascend910b"
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        from ..graph.batch_scale import BatchFamily
        from ..networks import check_options

        check_options(self.spec, dict(self.options, batch=1))
        self.family = BatchFamily(self._capture)
        self.stages: dict[tuple[int, int], _Stage] = {}
        self.choices: dict[tuple[int, int, int], tuple] = {}
        self.limits = {k: _network_default(self.spec, k, self.options)
                       for k in ("heads", "layers", "vocab")}

    def _capture(self, batch: int):
        from ..graph.capture import capture_network

        return capture_network(self.spec, batch=batch, **self.options)

    def stage(self, batch: int, devices: int) -> _Stage:
        key = (batch, devices)
        if key not in self.stages:
            from ..cost.hardware import get_hardware
            from ..cost.model import CostModel
            from ..planner import build_problem
            from ..planner.variables import variable_index

            graph = self.family(batch)
            # every strategy, those leaving devices idle too: the layout replicates norms and
            # residual Adds over the tp group (mindformers' (dp, 1)), and the tied embedding's
            # vocabulary cut keeps its indices whole, both under dp·tp devices
            model = CostModel(graph, devices, get_hardware(self.hardware),
                              fully_use_devices=False)
            problem, variables = build_problem(graph, model)
            self.stages[key] = _Stage(graph, model, problem, variables, variable_index(variables))
        return self.stages[key]

    def choice(self, config: Config) -> tuple[_Stage, list[int], int, list[str]]:
        """The stage plan of ``config``: ``(stage, option per variable, pinned count, names of
        the primitives whose layout strategy the cost model does not offer)``.

        Raises:
            ConfigError: the configuration is invalid (:meth:`Config.validate`), or the cost
                model offers no option for a strategy of the layout (a dimension the cut does
                not divide).
            smsg_ms.devices.DeviceCountError: ``dp·tp`` is a device count MindSpore refuses.
        """
        from ..devices import check_device_count
        from .score import fill_choice

        config.validate(**self.limits)
        check_device_count(config.dp * config.tp)
        stage = self.stage(config.micro_batch * config.dp, config.dp * config.tp)
        key = (config.micro_batch * config.dp, config.dp, config.tp)
        if key in self.choices:      # the stage plan depends on the micro-batch, dp and tp only
            return (stage, *self.choices[key])
        choice: list[int | None] = [None] * len(stage.variables)
        fallback = []
        for op_id, (role, strategy) in expand(stage.graph, config.dp, config.tp).items():
            vi, _ = stage.index[op_id]
            # an out_strategy option's key ends in ("out", ...): never a configuration's layout
            keys = [k if any(s and s[0] == "out" for s in k) else
                    tuple(tuple(int(x) for x in s) for s in k) for k in stage.variables[vi].keys]
            wanted = [strategy]
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
        choice = self._complete(stage, choice)
        if not math.isfinite(stage.problem.total(choice)):
            more = f" and {len(fallback) - 3} more" if len(fallback) > 3 else ""
            raise ConfigError("no strategy of the cost model completes the layout (left to the "
                              f"model: {', '.join(fallback[:3]) or 'none'}{more})")
        self.choices[key] = (choice, pinned, fallback)
        return stage, choice, pinned, fallback

    def _complete(self, stage: _Stage, choice: list) -> list[int]:
        """The cost model's best options for the variables the layout leaves open, the pinned
        ones fixed: the exact search (:func:`smsg_ms.search.solve`) over the open variables
        alone, each one's cost plus its edges to pinned neighbours at their option, the edges
        between open variables kept. Greedy completion in graph order
        (:func:`smsg_ms.compare.score.fill_choice`) chose, on mindformers' decomposed RmsNorm,
        cuts of the hidden axis that the next MatMul had to gather."""
        from ..search import Edge, NoFeasiblePlan, SearchProblem, Variable, solve
        from .score import fill_choice

        problem = stage.problem
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

        stage, choice, pinned, fallback = self.choice(config)
        m, p = config.micro_batches, config.pp
        out = {"micro_batches": m, "devices_per_stage": config.dp * config.tp, "pinned": pinned,
               "filled": len(choice) - pinned, "fallback": fallback,
               "plan": None}
        if plan and p == 1:
            from ..planner import plan_graph
            out["plan"] = plan_graph(stage.graph, config.dp * config.tp, hardware=self.hardware,
                                     choice=choice, model=stage.model, exhaustive=True,
                                     built=(stage.problem, stage.variables), network=self.spec,
                                     options=dict(self.options,
                                                  batch=config.micro_batch * config.dp))
        if p == 1 and m == 1 and not config.recompute and not config.optimizer_shard:
            out["step_seconds"] = float(stage.problem.total(choice))
            out["memory_bytes"] = float(stage.problem.memory(choice))
            return out
        sol = StageSolution(stage.graph, config.dp * config.tp, stage.model, stage.variables,
                            choice, stage.problem)
        layers = layer_costs_of(sol)
        if len(layers) % p:
            raise ConfigError(f"pp={p} does not divide the {len(layers)} repeated blocks")
        per, links, bytes_per = len(layers) // p, links_of(self.hardware), bytes_per_element(
            stage.graph)
        costs = [stage_cost(layers, s * per, (s + 1) * per, s, p,
                            recompute=[config.recompute] * per, sharding=config.optimizer_shard,
                            links=links, bytes_per=bytes_per, micro_batches=m)
                 for s in range(p)]
        out["step_seconds"] = float(super_step_seconds(costs, m))
        out["memory_bytes"] = max(c.memory_bytes for c in costs)
        return out


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


def score_rows(spec: str, rows, *, hardware="ascend910b", progress=None, **network_options):
    """Score CSV rows (dicts with :data:`CSV_COLUMNS`, optional ``recompute``,
    ``optimizer_shard`` and :data:`SHAPE_COLUMNS` overriding ``network_options``): yields each row
    with ``step_seconds`` (seconds, empty on error) and ``error`` (one line, empty when scored)
    added, in order. One :class:`ShapeScorer` per distinct shape; a shape that fails to build
    gives its error to every row of that shape."""
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
                try:
                    scorers[key] = ShapeScorer(spec, hardware, shape)
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


def score_csv(spec: str, src, dst, *, hardware="ascend910b", **network_options) -> tuple[int, int]:
    """Read configuration rows from the open text file ``src`` (CSV with a header), write them to
    ``dst`` with ``step_seconds`` and ``error`` columns added. Returns ``(rows, errors)``.

    Raises:
        ConfigError: the header lacks a column of :data:`CSV_COLUMNS`.
    """
    reader = csv.DictReader(src)
    header = list(reader.fieldnames or [])
    lacking = [c for c in CSV_COLUMNS if c not in header]
    if lacking:
        raise ConfigError(f"configuration CSV lacks the column(s) {', '.join(lacking)} (needs "
                          f"{','.join(CSV_COLUMNS)})")
    fields = header + [c for c in ("step_seconds", "error") if c not in header]
    writer = csv.DictWriter(dst, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    rows = errors = 0
    for out in score_rows(spec, reader, hardware=hardware, **network_options):
        writer.writerow({k: out.get(k, "") for k in fields})
        rows += 1
        errors += bool(out["error"])
    return rows, errors


__all__ = ["CSV_COLUMNS", "SHAPE_COLUMNS", "ShapeScorer", "score_config", "score_csv",
           "score_rows"]
