"""A plan: the strategy of every planned primitive, with provenance and predicted costs.

A plan is plain data (JSON). Its ``content_hash`` covers everything but itself, so two ranks that
computed the same plan log the same hash, and an edited file is detected on load.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import orjson

from .errors import InputError
from .version import __version__

PLAN_FORMAT = 1


class PlanError(ValueError):
    """A plan file cannot be read, was edited, or does not fit the network; or a plan setting
    (its write-back mode) is refused. One-line message."""


class PlanFileError(PlanError, InputError):
    """A file given on the command line that cannot be read or is not what it should be (a plan
    file missing, truncated or edited; an output path in a missing folder): bad input, exit 2."""


_LEAVES = (str, int, float, bool, type(None))


def _plain(x):
    """``dataclasses.asdict``'s conversion of ``x``; immutable leaves are returned as they are."""
    if type(x) in _LEAVES:
        return x
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, dict):
        return type(x)((_plain(k), _plain(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_plain(v) for v in x)
    return copy.deepcopy(x)


_FIELD_NAMES: dict[type, frozenset] = {}


def _fields_of(x) -> dict:
    """A dataclass instance's fields as a dict (no copy of the values): its ``__dict__`` itself
    when that holds exactly the fields (read it, never write it)."""
    names = _FIELD_NAMES.get(type(x))
    if names is None:
        names = _FIELD_NAMES[type(x)] = frozenset(f.name for f in fields(x))
    own = getattr(x, "__dict__", None)
    if own is not None and own.keys() == names:
        return own
    return {f.name: getattr(x, f.name) for f in fields(x)}


def _not_json(obj):
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


#: orjson options of the hashed text: sorted keys; a dataclass is not a plain value (as in ``json``)
_HASH_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def canonical_json(obj) -> bytes:
    """The text :meth:`Plan.compute_hash` hashes: compact JSON with sorted keys, written by
    orjson (floats as their shortest round-trip decimal, e.g. ``0.00001``; non-ASCII as UTF-8).

    Raises:
        TypeError: a value JSON cannot hold (a set, an object, a non-string key).

    NaN and infinities are not refused here (orjson writes them as ``null``); plan files refuse
    them when written (:meth:`Plan.to_json`) and when read (:func:`~smsg_ms.integration.plan_io.load_plan`).
    """
    return orjson.dumps(obj, default=_tuple_or_refuse, option=_HASH_OPTIONS)


def _tuple_or_refuse(obj):
    """orjson's fallback: a tuple subclass (a namedtuple) is a JSON array, as ``json`` writes it."""
    if isinstance(obj, tuple):
        return list(obj)
    return _not_json(obj)


def _drop_defaults(data: dict) -> dict:
    """``data`` (a plan's fields) without the fields newer than the format left at their
    default (``write_back`` ``"shard"``, ``enable_alltoall`` ``False``, ``out_strategies``
    empty, ``built_for`` ``None``), so older plan files keep their hash."""
    if data.get("write_back") == "shard":
        del data["write_back"]
    if not data.get("enable_alltoall", True):
        del data["enable_alltoall"]
    if not data.get("out_strategies", True):
        del data["out_strategies"]
    if data.get("built_for", 0) is None:
        del data["built_for"]
    return data


@dataclass
class OpDecision:
    """What the planner chose for one primitive (all its calls) or one unshardable operator.

    Attributes:
        name: primitive path (``layers.0.attention.wq.matmul``) or operator label.
        op_type: MindSpore primitive name.
        strategy: in_strategy (one cut tuple per tensor input); ``None`` where MindSpore sets the
            layout itself (Reshape, functional calls).
        shardable: ``False`` for functional calls / Reshape (reported, not written back).
        seconds: predicted time of its calls under the chosen strategy (s): their micro-steps
            plus the redistributions into them (an edge between two primitives is charged to
            the later one in graph order; into the loss, to the producer), so the decisions'
            seconds add up to the plan's ``step_seconds``.
        breakdown: seconds by kind (compute, AllReduce, ..., ``redistribution``,
            ``redistribution_into_loss``) and memory bytes.
        collectives: predicted collectives of its calls: ``{kind, group, phase, bytes, tensor}``
            (``bytes`` = the group's whole tensor, before ring volumes).
        runner_up: second-best strategy and its extra cost in seconds, when one exists.
        block: repeated block this primitive belongs to (``layers.*``), if any.
        notes: the cost model's remarks (fallback strategy, unknown operator ...).
        symbolic: key into :attr:`Plan.symbolic` of the chosen strategy's cost as formulas,
            ``None`` where the operator has no einsum description.
    """

    name: str
    op_type: str
    strategy: list[list[int]] | None
    shardable: bool = True
    seconds: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    runner_up: dict[str, Any] | None = None
    block: str | None = None
    notes: list[str] = field(default_factory=list)
    symbolic: str | None = None


_DIGITS = re.compile(r"(\d+)")


def _natural_key(name: str) -> list:
    """``layers.10`` after ``layers.2``: digit runs compared as numbers."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(name)]


def in_chain_order(record: dict, decisions: list[OpDecision]) -> dict:
    """A copy of a pipeline record whose ``stage_of_block`` and ``recompute`` maps list the blocks
    in the order their first operator has in ``decisions`` (graph order); a block no decision
    lies in follows, in natural order (digit runs as numbers). Without virtual stages the
    blocks are ordered by stage first: MindSpore's graph order can open with a later block's
    first operators (a T5-like decoder layer's self-attention runs before the encoder, which
    only its cross-attention reads), while the chain the plan staged never goes back a stage
    (:func:`smsg_ms.planner.stages.data_flow_order`)."""
    first: dict[str, int] = {}
    names = set(record.get("stage_of_block", {})) | set(record.get("recompute", {}))
    for i, d in enumerate(decisions):
        parts = d.name.split(".")
        for k in range(1, len(parts)):
            prefix = ".".join(parts[:k])
            if prefix in names and prefix not in first:
                first[prefix] = i
    stage_of = record.get("stage_of_block", {})
    by_stage = int(record.get("virtual_stages", 1) or 1) <= 1

    def order(name: str):
        stage = int(stage_of.get(name, 0)) if by_stage else 0
        return ((stage, 0, first[name], []) if name in first
                else (stage, 1, 0, _natural_key(name)))
    out = dict(record)
    for key in ("stage_of_block", "recompute"):
        if isinstance(record.get(key), dict):
            out[key] = {n: record[key][n] for n in sorted(record[key], key=order)}
    return out


@dataclass
class Plan:
    """A complete plan for one network, device count and input shapes.

    Attributes:
        network: network name or spec.
        fingerprint: :meth:`OpGraph.fingerprint` of the captured graph.
        devices: device count the plan is for.
        options: network options (batch, seq, layers ...) as planned: ``batch`` is the global
            batch, in a pipelined plan too, whose graph was captured at its micro-batch size
            (``pipeline["micro_batch_size"]``; :meth:`build_options`).
        input_shapes: global shape of each data input.
        hardware: hardware preset name.
        decisions: one per primitive / unshardable operator, in graph order.
        totals: predicted step totals: ``step_seconds``, ``compute_seconds``, seconds per
            collective kind, ``memory_bytes`` per device by kind, ``data_parallel_step_seconds``
            (the pure data-parallel plan under the same model) ...
        dataset_strategy: layout of the data inputs (one cut tuple per input), or ``None`` for
            ``full_batch``.
        pipeline: pipeline settings (stages, micro-batches, stage of each block), ``None`` for one
            stage.
        symbolic: symbolic cost descriptions (:func:`smsg_ms.cost.explain.describe`: einsum,
            letter sizes, cut counts, terms with formula and value), each stored once and keyed
            by the first 12 hex digits of the SHA-256 of its canonical JSON; decisions refer to
            them (identical layers share one).
        write_back: how the strategies reach MindSpore: ``"shard"`` (semi_auto_parallel, every
            other operator takes MindSpore's batch-parallel default) or ``"propagate"``
            (auto_parallel with ``search_mode="sharding_propagation"``: the planned strategies
            are the seeds, operators no ``shard()`` reaches inherit layouts); see
            :mod:`smsg_ms.integration.writeback`. Left out of the JSON when ``"shard"``, so
            older plan files keep their hash.
        enable_alltoall: MindSpore's ``enable_alltoall`` context flag the plan was priced and is
            compiled with (on for networks with expert layers: :mod:`smsg_ms.cost.experts`).
            Left out of the JSON when ``False``, so older plan files keep their hash.
        out_strategies: ``{primitive path: out_strategy}`` of the primitives whose output layout
            the plan sets too: a row-parallel MatMul whose partial sums are reduce-scattered
            along the tokens under sequence parallel (``Primitive.shard(in_strategy,
            out_strategy)``, ``ops_info/matmul_info.cc`` ``CheckOutputStrategy``). Left out of
            the JSON when empty, so older plan files keep their hash.
        built_for: the device count the network was built for in its capture (its graph
            depends on it: :attr:`smsg_ms.graph.model.OpGraph.built_for`); a check or export
            captures it so again. Left out of the JSON when ``None``.
        planner_version: smsg-ms version that made the plan.
        content_hash: SHA-256 of the rest (see :meth:`compute_hash`).
    """

    network: str
    fingerprint: str
    devices: int
    options: dict[str, Any]
    input_shapes: list[list[Any]]
    hardware: str
    decisions: list[OpDecision]
    totals: dict[str, Any] = field(default_factory=dict)
    dataset_strategy: list[list[int]] | None = None
    pipeline: dict[str, Any] | None = None
    symbolic: dict[str, dict[str, Any]] = field(default_factory=dict)
    write_back: str = "shard"
    enable_alltoall: bool = False
    out_strategies: dict[str, list[list[int]]] = field(default_factory=dict)
    built_for: int | None = None
    planner_version: str = __version__
    format: int = PLAN_FORMAT
    content_hash: str = ""

    def symbolic_of(self, decision: OpDecision) -> dict | None:
        """The symbolic cost description of ``decision`` (``None`` without one)."""
        return self.symbolic.get(decision.symbolic) if decision.symbolic else None

    @staticmethod
    def symbolic_key(description: dict) -> str:
        """Key of a description in :attr:`symbolic` (content hash, so merging tables is safe)."""
        text = json.dumps(description, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def strategies(self) -> dict[str, list[list[int]]]:
        """``{primitive path: in_strategy}`` of every shardable decision."""
        return {d.name: d.strategy for d in self.decisions if d.shardable and d.strategy}

    def build_options(self) -> dict[str, Any]:
        """The network options the strategies' graph is built with: :attr:`options`, except a
        pipelined plan's ``batch``, its micro-batch size (``pipeline["micro_batch_size"]``: the
        global batch over the micro-batches). Plan files written before the global batch was
        recorded hold the micro-batch in ``batch``: the same options come back."""
        micro = (self.pipeline or {}).get("micro_batch_size")
        if micro is None or "batch" not in self.options:
            return dict(self.options)
        return {**self.options, "batch": int(micro)}

    def to_dict(self) -> dict:
        """A deep copy as plain dicts and lists: ``dataclasses.asdict(self)``, computed without
        deep-copying immutable leaves (4x faster on an 80-layer plan). ``write_back`` is left
        out when it is the default ``"shard"``, ``enable_alltoall`` when ``False``,
        ``out_strategies`` when empty."""
        return _drop_defaults(_plain(self))

    def compute_hash(self) -> str:
        """SHA-256 of :func:`canonical_json` of :meth:`to_dict` without ``content_hash``.

        The JSON is written from a shallow view (the decisions' fields read in place) instead of
        a deep copy, by orjson (8x faster than ``json`` on an 80-layer plan)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "content_hash"}
        data["decisions"] = [_fields_of(d) for d in self.decisions]
        return hashlib.sha256(canonical_json(_drop_defaults(data))).hexdigest()

    def seal(self) -> "Plan":
        """Set :attr:`content_hash`; returns self."""
        self.content_hash = self.compute_hash()
        return self

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, 1-space indent, trailing newline): byte-identical
        for equal plans."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        """The plan ``data`` describes (a :meth:`to_dict` or a parsed plan file).

        The block maps of the pipeline record (``stage_of_block``, ``recompute``) come back in the
        chain's order, the order the blocks' first operators have in :attr:`decisions`: a plan
        file sorts keys as strings (``layers.10`` before ``layers.2``), and MindSpore's rule that
        stages never decrease along the data flow is checked in this order."""
        data = dict(data)
        data["decisions"] = [OpDecision(**d) for d in data.get("decisions", [])]
        if isinstance(data.get("pipeline"), dict):
            data["pipeline"] = in_chain_order(data["pipeline"], data["decisions"])
        return cls(**data)
