"""Framework-free operator graph: what the cost model and the search see of a network.

Nothing here imports MindSpore. A graph is built by :mod:`smsg_ms.graph.capture` from MindSpore's
MindIR and round-trips through JSON (:meth:`OpGraph.to_json` / :meth:`OpGraph.from_json`), which
is how the dry-run child process hands it to the parent (never pickle).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

import orjson


def _sorted_json_encoder():
    """``json.dumps(x, sort_keys=True, default=str)`` as one pre-built encoder: the C encoder
    when this Python has it (no per-call encoder construction, 3x faster on small items), else
    an equivalent :class:`json.JSONEncoder`. Same text either way."""
    from json import encoder as _enc

    if _enc.c_make_encoder is not None:
        make = _enc.c_make_encoder(None, str, _enc.encode_basestring_ascii, None, ": ", ", ",
                                   True, False, True)
        return lambda obj: "".join(make(obj, 0))
    return json.JSONEncoder(sort_keys=True, default=str).encode


#: ``json.dumps(obj, sort_keys=True, default=str)``, byte for byte (no circular-reference check:
#: for plain trees of lists, dicts and scalars only).
sorted_json = _sorted_json_encoder()

#: Bytes per element of the MindSpore dtypes that appear in graphs.
DTYPE_BYTES = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
    "int16": 2, "int32": 4, "int64": 8, "bool": 1, "complex64": 8, "complex128": 16,
}

#: A dimension is an int, or a str naming a symbolic (dynamic) axis such as ``"batch"``.
Dim = int | str


@dataclass
class TensorInfo:
    """One tensor of the graph (an edge that may fan out).

    Attributes:
        name: unique name in the graph.
        shape: global shape, elements per dimension (``str`` for a symbolic dimension).
        dtype: MindSpore dtype name, e.g. ``"float32"``.
        kind: ``"input"`` (data input of the network), ``"parameter"`` (weight), ``"constant"``,
            or ``"activation"`` (produced by an operator).
        producer: id of the producing operator, ``None`` for inputs/parameters/constants.
        consumers: ids of the operators that read it, in graph order.
        requires_grad: for parameters, whether it is trained.
        parallel_optimizer: for parameters, MindSpore's ``Parameter.parallel_optimizer``: whether
            ``enable_parallel_optimizer`` may shard it (``False`` for mindformers' embedding).
            Left out of the JSON form when ``True`` (graphs written before it existed load
            with ``True``, MindSpore's default).
        dynamic: axes declared dynamic (``Cell.set_inputs`` with ``None`` or a
            ``mindspore.Symbol``): ``[axis, divisor]`` pairs, the divisor MindSpore guarantees
            (1 for ``None``; :mod:`smsg_ms.networks.dynamic_inputs`). ``shape`` keeps the example's
            size for the cost. Left out of the JSON form when empty.
        foreign_reads: for parameters, forward reads by functional operators whose cell (scope)
            is not the cell owning the parameter (its name's prefix): the parameter reached them
            as a call argument (``nn.GRU``'s recurrence). Left out of the JSON form when 0.
        value: for constants, a fingerprint of the value (16 hex digits,
            :func:`smsg_ms.graph.mindir.value_fingerprint`): equal for constants of equal value,
            shape and dtype; ``""`` when unknown. Left out of the JSON form when empty and of
            :meth:`OpGraph.fingerprint`.
        zeros_like: for constants, a folded ``ops.zeros_like(y)`` of an activation: MindSpore
            lays its ``ZerosLike`` out by the batch default and redistributes it like any
            operator output during its parallel pass, and folds it into this zero constant only
            after (``ZeroLikeFillZero``, optimizer pass ``opt_b``). Left out of the JSON form
            when ``False``.
    """

    name: str
    shape: tuple[Dim, ...]
    dtype: str
    kind: str = "activation"
    producer: int | None = None
    consumers: list[int] = field(default_factory=list)
    requires_grad: bool = True
    parallel_optimizer: bool = True
    dynamic: list = field(default_factory=list)
    foreign_reads: int = 0
    value: str = ""
    zeros_like: bool = False

    @property
    def numel(self) -> int | None:
        """Number of elements, ``None`` if a dimension is symbolic."""
        n = 1
        for d in self.shape:
            if not isinstance(d, int):
                return None
            n *= d
        return n

    @property
    def nbytes(self) -> int | None:
        """Size in bytes, ``None`` if a dimension is symbolic."""
        n = self.numel
        return None if n is None else n * DTYPE_BYTES.get(self.dtype, 4)


def _op_dict(op: OpNode) -> dict:
    out = asdict(op)
    if not out["depend_inputs"]:
        del out["depend_inputs"]
    return out


def _tensor_dict(t: TensorInfo) -> dict:
    out = dict(asdict(t), shape=list(t.shape))
    if out["parallel_optimizer"]:
        del out["parallel_optimizer"]      # the default: JSON as before the field existed
    if not out["dynamic"]:
        del out["dynamic"]
    if not out["foreign_reads"]:
        del out["foreign_reads"]
    if not out["value"]:
        del out["value"]
    if not out["zeros_like"]:
        del out["zeros_like"]
    return out


@dataclass
class OpNode:
    """One operator call.

    Attributes:
        id: position in topological order (0-based, dense).
        type: MindSpore primitive name, e.g. ``"MatMul"``.
        inputs: tensor names of the data inputs, in argument order (constants included).
        outputs: tensor names of the outputs.
        attrs: primitive attributes that matter to cost and validity (``transpose_a``, ``axis``,
            ``keep_dims``, ...), JSON values only. Constant inputs are also recorded here as
            ``"input{i}"``.
        prim_path: attribute path of the Python ``Primitive`` (``layers.3.attention.wq.matmul``);
            ``None`` for functional calls, which cannot be sharded individually.
        call_index: index of this call among the calls of the same primitive instance.
        scope: MindSpore's full scoped name of the node (for messages).
        phase: ``"forward"``, ``"backward"`` (scope ``Gradients/...``) or ``"optimizer"``; only
            training graphs (:func:`smsg_ms.graph.capture.capture_training_graph`) have the latter
            two, and their operators carry no primitive path.
        depend_inputs: positions in ``inputs`` that reach the operator through a ``Depend``
            (``ops.depend``; the capture looks through it, MindSpore's ``MergeComm`` does not:
            :func:`smsg_ms.planner.merge_comm.gather_source`). Left out of the JSON form when
            empty and of :meth:`OpGraph.fingerprint`.
    """

    id: int
    type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    prim_path: str | None = None
    call_index: int = 0
    scope: str = ""
    phase: str = "forward"
    depend_inputs: list[int] = field(default_factory=list)

    @property
    def shardable(self) -> bool:
        """True when a strategy can be written back with ``Primitive.shard``."""
        return self.prim_path is not None

    @property
    def label(self) -> str:
        """Human name: the primitive path (with call index if > 0) or type and scope."""
        if self.prim_path:
            return self.prim_path + (f"#{self.call_index}" if self.call_index else "")
        return f"{self.type}@{self.scope or self.id}"


@dataclass
class OpGraph:
    """Operators in topological order and the tensors between them.

    Attributes:
        ops: operators, ``ops[i].id == i``.
        tensors: tensor name → :class:`TensorInfo`.
        inputs: names of the network's data inputs, in call order.
        outputs: names of the network's outputs.
        name: network name (class name or built-in name).
        warnings: messages about parts the capture could not represent (control flow, ...).
        built_for: the device count the network was built for when its construction read the
            world size (``capture_network``'s ``world``, :mod:`smsg_ms.networks.world`);
            ``None`` when it did not (its graph is the same for every device count).
    """

    ops: list[OpNode]
    tensors: dict[str, TensorInfo]
    inputs: list[str]
    outputs: list[str]
    name: str = "network"
    warnings: list[str] = field(default_factory=list)
    built_for: int | None = None

    # ---- queries -------------------------------------------------------------------------
    def op(self, op_id: int) -> OpNode:
        return self.ops[op_id]

    def parameters(self) -> list[TensorInfo]:
        """Weights, in order of first use."""
        return [t for t in self.tensors.values() if t.kind == "parameter"]

    def unread_parameters(self) -> list[str]:
        """Names of the weights in the compiled graph that no captured operator reads, sorted: a
        weight used only where the capture could not follow (a loop or branch on a tensor
        value), so a plan would set no layout and no gradient sync for it."""
        return sorted(t.name for t in self.parameters() if not t.consumers)

    def control_flow(self) -> list[str]:
        """The capture's warnings about tensor-valued control flow (a ``Switch``/``While`` left in
        the compiled graph), each naming the primitive, the cell and, where the capture found
        it, the source line."""
        return [w for w in self.warnings if w.startswith("control flow: ")]

    def producer_of(self, tensor: str) -> OpNode | None:
        p = self.tensors[tensor].producer
        return None if p is None else self.ops[p]

    def consumers_of(self, tensor: str) -> list[OpNode]:
        return [self.ops[i] for i in self.tensors[tensor].consumers]

    def by_path(self) -> dict[str, list[OpNode]]:
        """Primitive path → its calls (call order), for shardable operators only."""
        out: dict[str, list[OpNode]] = {}
        for op in self.ops:
            if op.prim_path:
                out.setdefault(op.prim_path, []).append(op)
        return out

    def iter_edges(self) -> Iterator[tuple[int, int, str, int]]:
        """``(producer id, consumer id, tensor name, consumer input index)`` for activations."""
        for op in self.ops:
            for idx, name in enumerate(op.inputs):
                t = self.tensors[name]
                if t.producer is not None:
                    yield t.producer, op.id, name, idx

    def to_networkx(self):
        """``networkx.MultiDiGraph`` of operators, edges keyed by tensor name."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for op in self.ops:
            g.add_node(op.id, op=op)
        for src, dst, name, idx in self.iter_edges():
            g.add_edge(src, dst, key=f"{name}:{idx}", tensor=name, index=idx)
        return g

    # ---- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "warnings": self.warnings,
            "tensors": [_tensor_dict(t) for t in self.tensors.values()],
            "ops": [_op_dict(o) for o in self.ops],
            **({"built_for": self.built_for} if self.built_for is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "OpGraph":
        tensors = {}
        for t in data["tensors"]:
            t = dict(t, shape=tuple(t["shape"]))
            tensors[t["name"]] = TensorInfo(**t)
        ops = [OpNode(**o) for o in data["ops"]]
        return cls(ops=ops, tensors=tensors, inputs=list(data["inputs"]),
                   outputs=list(data["outputs"]), name=data.get("name", "network"),
                   warnings=list(data.get("warnings", [])), built_for=data.get("built_for"))

    @classmethod
    def from_json(cls, text: str) -> "OpGraph":
        return cls.from_dict(json.loads(text))

    def fingerprint(self) -> str:
        """SHA-256 of the structure (types, attrs, paths, shapes, dtypes), names excluded: of the
        compact sorted-key JSON (orjson; values JSON cannot hold written as ``str``) of one
        ``[type, attrs, prim_path, call_index, [(shape, dtype, kind) per input and output]]``
        per operator.

        Two captures of the same network with the same input shapes give the same fingerprint.
        A tensor's declared dynamic axes (:attr:`TensorInfo.dynamic`) join its triple where
        there are some.
        """
        tensors = self.tensors
        items = [[op.type, op.attrs, op.prim_path, op.call_index,
                  [(tensors[n].shape, tensors[n].dtype, tensors[n].kind)
                   + ((tensors[n].dynamic,) if tensors[n].dynamic else ())
                   for n in op.inputs + op.outputs]] for op in self.ops]
        text = orjson.dumps(items, default=str,
                            option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
        return hashlib.sha256(text).hexdigest()


#: Primitive types of the collectives MindSpore inserts (as in ``integration/collectives.py``).
COLLECTIVE_OPS = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AllToAll",
                  "NeighborExchangeV2", "NeighborExchange", "Send", "Receive", "Broadcast",
                  "AlltoAllV", "MicroStepAllGather", "MiniStepAllGather")


def collectives_in_graph(graph: OpGraph) -> list[dict]:
    """Collective operators of a (training) graph, sub-graph calls already inlined.

    Dicts with ``type``, ``pass``, ``grad_sync``, ``group`` (``[]``: not resolved here),
    ``group_size`` (from a ``"<size>-<hash>"`` group name, else 0), ``in_shape``, ``out_shape``,
    ``dtype``, ``scope``, ``attrs`` — the keys of ``dryrun.collectives.collectives_from_model``.
    """
    out = []
    for op in graph.ops:
        if op.type not in COLLECTIVE_OPS:
            continue
        name = str(op.attrs.get("group", ""))
        head = name.split("-", 1)[0]
        src = graph.tensors[op.inputs[0]] if op.inputs else graph.tensors[op.outputs[0]]
        dst = graph.tensors[op.outputs[0]]
        out.append({"type": "AlltoAll" if op.type == "AllToAll" else op.type,
                    "pass": "backward" if op.phase == "backward" else "forward",
                    "grad_sync": "Mirror" in op.scope, "group": [],
                    "group_size": int(head) if head.isdigit() else 0,
                    "in_shape": list(src.shape), "out_shape": list(dst.shape),
                    "dtype": dst.dtype, "scope": op.scope,
                    "attrs": {k: v for k, v in op.attrs.items() if k in ("op", "fusion")}})
    return out
