"""A hybrid-parallel configuration (``dp=2,tp=4,pp=2,micro_batch=1,global_batch=64``) and its
expansion into per-primitive strategies in the Megatron-LM layout.

The layout (Shoeybi et al. 2019, "Megatron-LM", §3, Fig. 3; the same strategies mindformers
1.9.0 writes from ``TransformerOpParallelConfig(data_parallel=dp, model_parallel=tp)`` in
``mindformers/models/llama/llama_transformer.py``, ``llama_layer.py`` and
``mindformers/modules/layers.py``, ``transformer/transformer.py``), for ``y = x @ W`` with the
weight ``W (d_in, d_out)`` (the transposed weight ``(d_out, d_in)`` of ``transpose_b`` swaps the
weight's cuts):

=================  ======================================  ==================================
role               recognised as                           strategy
=================  ======================================  ==================================
``qkv``            MatMul whose output (after an optional  column-parallel ``((dp,1),(1,tp))``
                   bias Add) a Reshape splits into 4-D
                   heads
``attn_out``       MatMul reading a Reshape that merges    row-parallel ``((dp,tp),(tp,1))``
                   4-D heads
``ffn_in``         MatMul whose output feeds the MLP's     column-parallel ``((dp,1),(1,tp))``
                   activation (GeLU, SiLU, FastGeLU,
                   ReLU) or its gate Mul
``ffn_out``        MatMul reading that activation / Mul    row-parallel ``((dp,tp),(tp,1))``
``head``           MatMul whose output leaves the graph    vocab-parallel ``((dp,1),(1,tp))``
                   or whose weight is the embedding table
``embedding``      Gather of a parameter table             vocab-parallel ``((tp,1),(dp,1))``
                                                           (mindformers' ``LlamaEmbedding``)
``attention``      BatchMatMul of two 4-D activations      ``((dp,tp,1,1),(dp,tp,1,1))``
``softmax``        Softmax of a 4-D tensor                 ``((dp,tp,1,1),)``
``bias``           Add of a 1-D parameter after one of     the MatMul's output cut:
                   the MatMuls above                       ``((dp,tp),(tp,))`` after a column
                                                           MatMul, ``((dp,1),(1,))`` after a
                                                           row one
=================  ======================================  ==================================

MindSpore runs mindformers' embedding strategy (table cut on the vocabulary, indices on the
batch) in ``gather_info.cc``'s batch-and-axis mode, which smsg's Gather cost function does not
offer (its row split keeps the indices whole); the embedding then falls back to
``((tp,1),(1,1))`` and, when that is not offered either, to the cost model's choice
(:attr:`ShapeScorer.score`'s ``fallback`` lists such primitives).

The elementwise operators around them follow mindformers too (:func:`layout_roles`); the rest
(Reshapes, which MindSpore lays out itself, and anything unrecognised) is left to the cost model
given the pinned ones (the exact search with the pinned variables fixed:
:class:`smsg_ms.compare.score_configs.ShapeScorer`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..graph.model import OpGraph
from ..words import count

#: Keys a configuration takes, in the order :meth:`Config.text` writes them.
KEYS = ("dp", "tp", "pp", "micro_batch", "global_batch", "recompute", "optimizer_shard")
_REQUIRED = ("dp", "tp", "pp", "micro_batch", "global_batch")
_FLAGS = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}
_ACTIVATIONS = {"GeLU", "FastGeLU", "SiLU", "ReLU", "Mul"}
_COLUMN, _ROW = ("qkv", "ffn_in", "head"), ("attn_out", "ffn_out")


class ConfigError(ValueError):
    """A configuration that does not parse or cannot run (the message is one line)."""


class ConfigTextError(ConfigError, InputError):
    """A configuration wrong on its own, whatever the network: a bad key or value, a required
    key missing, ``dp·tp·pp`` not the device count, a global batch or micro-batch count that
    does not fit ``micro_batch·dp`` and ``pp`` (bad input: exit 2 for ``--config``)."""


@dataclass(frozen=True)
class Config:
    """A hybrid configuration in Megatron-LM's terms (Narayanan et al. SC'21, §3).

    Attributes:
        dp, tp, pp: data-, tensor- (model-) and pipeline-parallel degrees.
        micro_batch: samples per micro-batch per data-parallel replica (Megatron's
            ``--micro-batch-size``); the micro-batch the stage graph holds is ``micro_batch·dp``.
        global_batch: samples per training step.
        recompute: every decoder layer recomputes its forward in the backward pass
            (mindformers ``recompute=True``).
        optimizer_shard: MindSpore ``enable_parallel_optimizer``.
        sequence_parallel: Megatron sequence parallel (mindformers ``use_seq_parallel``): the
            norms and residual Adds cut on the tokens ``tp``-way inside the tensor-parallel
            group, the row-parallel MatMuls reduce-scatter onto the tokens (out_strategy)
            where the cost model offers it (Korthikanti et al., "Reducing Activation
            Recomputation in Large Transformer Models", 2022, §4.2.2). Not one of
            :data:`KEYS` (the text form stays Megatron's seven keys).
    """

    dp: int
    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    recompute: bool = False
    optimizer_shard: bool = False
    sequence_parallel: bool = False

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per step: ``global_batch / (micro_batch · dp)`` (call after
        :meth:`validate`)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def text(self) -> str:
        return ",".join(f"{k}={str(getattr(self, k)).lower()}" for k in KEYS)

    def validate(self, *, devices: int | None = None, heads: int | None = None,
                 layers: int | None = None, vocab: int | None = None) -> None:
        """Refuse what Megatron / MindSpore cannot run.

        Raises:
            ConfigTextError: ``dp·tp·pp ≠ devices``; the global batch not a multiple of
                ``micro_batch·dp``; fewer micro-batches than stages (MindSpore's pipeline needs
                ``micro_batch_num ≥ stages``).
            ConfigError: ``tp`` not dividing ``heads`` or ``vocab``; ``pp`` not dividing
                ``layers`` (equal layers per stage).
        """
        if devices is not None and self.devices != devices:
            raise ConfigTextError(f"dp·tp·pp = {self.dp}·{self.tp}·{self.pp} = {self.devices} is "
                                  f"not the device count {devices}")
        if heads is not None and heads % self.tp:
            raise ConfigError(f"tp={self.tp} does not divide the {heads} attention heads")
        if vocab is not None and vocab % self.tp:
            raise ConfigError(f"tp={self.tp} does not divide the vocabulary {vocab}")
        if layers is not None and layers % self.pp:
            raise ConfigError(f"pp={self.pp} does not divide the {count(layers, 'layer')} (equal layers "
                              "per stage)")
        if self.global_batch % (self.micro_batch * self.dp):
            raise ConfigTextError(f"global_batch={self.global_batch} is not a multiple of "
                                  f"micro_batch·dp = {self.micro_batch}·{self.dp}")
        if self.micro_batches < self.pp:
            raise ConfigTextError(f"{self.micro_batches} micro-batches for pp={self.pp} stages "
                                  "(MindSpore needs at least one per stage)")


def positive_int(key: str, value: str) -> int:
    """``value`` as a positive integer. Raises: ConfigTextError naming ``key`` otherwise."""
    if not value.isdigit() or int(value) < 1:
        raise ConfigTextError(f"{key} wants a positive integer, got '{value}'")
    return int(value)


def _flag(key: str, value: str) -> bool:
    if value.lower() not in _FLAGS:
        raise ConfigTextError(f"{key} wants true or false, got '{value}'")
    return _FLAGS[value.lower()]


def config_from_values(values: dict) -> Config:
    """``{key: text}`` (a parsed ``--config`` or a CSV row's columns) → :class:`Config`; keys
    other than :data:`KEYS` are ignored, empty optional values take the default.

    Raises:
        ConfigTextError: a required key missing, a value not a positive integer / flag.
    """
    given = {k: str(values.get(k, "") or "").strip() for k in _REQUIRED}
    out = {k: positive_int(k, text) for k, text in given.items() if text}
    missing = [k for k in _REQUIRED if k not in out]
    if missing:
        raise ConfigTextError(f"configuration lacks {', '.join(missing)}")
    for k in ("recompute", "optimizer_shard"):
        text = str(values.get(k, "") or "").strip()
        if text:
            out[k] = _flag(k, text)
    return Config(**out)


def parse_config(text: str) -> Config:
    """Parse ``dp=D,tp=T,pp=P,micro_batch=B,global_batch=G[,recompute=..][,optimizer_shard=..]``.

    Raises:
        ConfigTextError: an item not ``key=value``, an unknown or repeated key, a bad value.
    """
    values: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigTextError(f"configuration item '{item}' is not key=value")
        if key not in KEYS:
            raise ConfigTextError(f"unknown configuration key '{key}' (keys: {', '.join(KEYS)})")
        if key in values:
            raise ConfigTextError(f"configuration key '{key}' given twice")
        values[key] = value.strip()
    return config_from_values(values)


def _single_consumer(graph: OpGraph, name: str):
    users = graph.tensors[name].consumers
    return graph.ops[users[0]] if len(users) == 1 else None


def _bias_after(graph: OpGraph, op):
    """The bias Add right after ``op`` (an Add of ``op``'s output and a 1-D parameter), or None."""
    nxt = _single_consumer(graph, op.outputs[0])
    if nxt is not None and nxt.type == "Add" and any(
            graph.tensors[n].kind == "parameter" and len(graph.tensors[n].shape) == 1
            for n in nxt.inputs):
        return nxt
    return None


def _token_reshape(graph: OpGraph, op) -> bool:
    """A Cast, or a Reshape between token layouts (2-D ↔ 3-D, not into or out of 4-D heads):
    mindformers' Linear reshapes ``(batch, seq, h)`` to ``(batch·seq, h)`` around its MatMul."""
    if op.type == "Cast":
        return True
    return op.type == "Reshape" and all(
        len(graph.tensors[n].shape) <= 3 for n in (op.inputs[0], op.outputs[0]))


def _readers(graph: OpGraph, name: str) -> list:
    """The operators reading ``name``, looking through token reshapes and Casts."""
    out = []
    for i in graph.tensors[name].consumers:
        op = graph.ops[i]
        out.extend(_readers(graph, op.outputs[0]) if _token_reshape(graph, op) else [op])
    return out


def _source(graph: OpGraph, name: str):
    """The operator producing ``name``, looking through token reshapes and Casts (None for an
    input or a parameter)."""
    src = graph.tensors[name].producer
    while src is not None and _token_reshape(graph, graph.ops[src]):
        src = graph.tensors[graph.ops[src].inputs[0]].producer
    return graph.ops[src] if src is not None else None


def matmul_roles(graph: OpGraph) -> dict[int, str]:
    """``{operator id: role}`` of the operators the Megatron layout fixes (module table); a
    MatMul that matches no pattern gets no role."""
    tables = {op.inputs[0] for op in graph.ops
              if op.type == "Gather" and graph.tensors[op.inputs[0]].kind == "parameter"}
    roles: dict[int, str] = {}
    for op in graph.ops:
        shapes = [graph.tensors[n].shape for n in op.inputs]
        if op.type == "Gather" and op.inputs[0] in tables:
            roles[op.id] = "embedding"
        elif op.type == "BatchMatMul" and len(shapes) >= 2 and all(
                len(s) == 4 for s in shapes[:2]) and all(
                graph.tensors[n].kind == "activation" for n in op.inputs[:2]):
            roles[op.id] = "attention"
        elif op.type == "Softmax" and len(shapes[0]) == 4:
            roles[op.id] = "softmax"
        elif op.type == "MatMul" and graph.tensors[op.inputs[1]].kind == "parameter":
            role = _matmul_role(graph, op, tables)
            if role:
                roles[op.id] = role
                bias = _bias_after(graph, op)
                if bias is not None:
                    roles[bias.id] = "bias_column" if role in _COLUMN else "bias_row"
    return roles


def _matmul_role(graph: OpGraph, op, tables: set) -> str | None:
    out = op.outputs[0]
    vocab = {graph.tensors[t].shape[0] for t in tables}
    if (op.inputs[1] in tables or not graph.tensors[out].consumers
            or graph.tensors[out].shape[-1] in vocab):
        return "head"
    src_op = _source(graph, op.inputs[0])
    if src_op is not None and src_op.type == "Reshape" and len(
            graph.tensors[src_op.inputs[0]].shape) == 4:
        return "attn_out"
    bias = _bias_after(graph, op)
    after = bias.outputs[0] if bias is not None else out
    readers = _readers(graph, after)
    if readers and all(r.type == "Reshape" and len(graph.tensors[r.outputs[0]].shape) == 4
                       for r in readers):
        return "qkv"
    if readers and all(r.type in _ACTIVATIONS for r in readers):
        return "ffn_in"
    if src_op is not None and src_op.type in _ACTIVATIONS:
        # after the output patterns: a decomposed norm ends in a Mul too (mindformers' RmsNorm)
        return "ffn_out"
    return None


#: Roles whose strategy uses fewer than ``dp·tp`` devices or that the layout only prefers: when
#: the cost model does not offer it, the primitive is left to the model (``fallback``).
PREFERRED = frozenset({"bias_column", "bias_row", "embedding", "norm", "residual", "ffn_act",
                       "heads_elementwise", "split_heads", "merge_heads", "position"})


def layout_roles(graph: OpGraph) -> dict[int, str]:
    """:func:`matmul_roles` plus the elementwise operators around them, as mindformers'
    ``LlamaDecodeLayer`` / ``LlamaAttention`` / ``LlamaFeedForward`` shard them: norms and
    residual Adds on the batch only (``(dp,1)``), the MLP's activation and gate Mul
    column-cut ``(dp,tp)``, elementwise operators on the attention's 4-D tensors and the transpose
    merging the heads ``(dp,tp,1,1)``, the transpose splitting them ``(dp,1,tp,1)``, the position
    embedding Add ``((dp,1,1),(1,1))``."""
    roles = matmul_roles(graph)
    column = {i for i, r in roles.items() if r in ("ffn_in", "bias_column", "ffn_act")}
    for op in graph.ops:
        if op.id in roles:
            continue
        kinds = [graph.tensors[n].kind for n in op.inputs]
        shapes = [graph.tensors[n].shape for n in op.inputs]
        producers = [graph.tensors[n].producer for n in op.inputs]
        if op.type in ("LayerNorm", "RmsNorm"):
            roles[op.id] = "norm"
        elif op.type == "Transpose" and len(shapes[0]) == 4:
            src = graph.ops[producers[0]] if producers[0] is not None else None
            roles[op.id] = "split_heads" if src is not None and src.type == "Reshape" \
                else "merge_heads"
        elif op.type in ("Mul", "Add") and any(
                len(sh) == 4 and sh[1] > 1 and k == "activation" for sh, k in zip(shapes, kinds)):
            roles[op.id] = "heads_elementwise"
        elif op.type in _ACTIVATIONS and any(p in column for p in producers if p is not None):
            roles[op.id] = "ffn_act"
            column.add(op.id)
        elif op.type == "Add" and kinds == ["activation", "activation"] and shapes[0] == shapes[1]:
            roles[op.id] = "residual"
        elif op.type == "Add" and kinds == ["activation", "parameter"]:
            roles[op.id] = "position"
    return roles


def _batch_only(shape, dp: int) -> tuple:
    return (dp,) + (1,) * (len(shape) - 1) if shape else ()


def _tokens_cut(shape, dp: int, tp: int) -> tuple:
    """Sequence parallel's cut of an activation: ``(batch, tokens, ...)`` as ``(dp, tp, 1..)``,
    the flattened ``(batch·tokens, hidden)`` as ``(dp·tp, 1)``; the batch alone where ``tp``
    does not divide the token axis."""
    if len(shape) >= 3 and shape[1] % tp == 0:
        return (dp, tp) + (1,) * (len(shape) - 2)
    if len(shape) == 2 and shape[0] % (dp * tp) == 0:
        return (dp * tp, 1)
    return _batch_only(shape, dp)


def sequence_parallel_out(dp: int, tp: int) -> tuple:
    """The option key's tail of a row-parallel MatMul that reduce-scatters its partial sums onto
    the tokens (sequence parallel): ``(("out", (dp·tp, 1)),)`` (:func:`smsg_ms.planner.
    variables.option_key`)."""
    return (("out", (dp * tp, 1)),)


def role_strategy(graph: OpGraph, op, role: str, dp: int, tp: int,
                  sequence_parallel: bool = False) -> tuple:
    """The Megatron strategy (MindSpore ``in_strategy``) of ``op`` in ``role`` (module table,
    :func:`layout_roles`); with ``sequence_parallel``, the norms' and residual Adds'
    activations cut on the tokens too (:func:`_tokens_cut`)."""
    shapes = [graph.tensors[n].shape for n in op.inputs]
    kinds = [graph.tensors[n].kind for n in op.inputs]
    if sequence_parallel and tp > 1 and role in ("norm", "residual"):
        return tuple(_tokens_cut(s, dp, tp) if k == "activation" else (1,) * len(s)
                     for s, k in zip(shapes, kinds))
    if role == "norm":
        return tuple(_batch_only(s, dp) if k == "activation" else (1,) * len(s)
                     for s, k in zip(shapes, kinds))
    if role in ("residual", "position"):
        return tuple(_batch_only(s, dp) if k == "activation" else (1,) * len(s)
                     for s, k in zip(shapes, kinds))
    if role == "ffn_act":
        return tuple((dp, tp) for _ in op.inputs)
    if role == "split_heads":
        return ((dp, 1, tp, 1),)
    if role == "merge_heads":
        return ((dp, tp, 1, 1),)
    if role == "heads_elementwise":     # a mask (batch, 1, s, s) is cut on the batch alone
        return tuple((dp, tp if s[1] > 1 else 1, 1, 1)
                     if len(s) == 4 and k == "activation" and s[0] > 1 else (1,) * len(s)
                     for s, k in zip(shapes, kinds))
    if role == "embedding":
        ids = graph.tensors[op.inputs[1]].shape
        return ((tp, 1), (dp,) + (1,) * (len(ids) - 1))
    if role == "embedding_replicated_ids":
        return ((tp, 1), (1,) * len(graph.tensors[op.inputs[1]].shape))
    if role == "attention":
        return ((dp, tp, 1, 1), (dp, tp, 1, 1))
    if role == "softmax":
        return ((dp, tp, 1, 1),)
    if role == "bias_column":
        return ((dp, tp), (tp,))
    if role == "bias_row":
        return ((dp, 1), (1,))
    transpose_b = bool(op.attrs.get("transpose_b"))
    if role in _COLUMN:      # weight's output axis cut: (1, tp), transposed (tp, 1)
        return ((dp, 1), (tp, 1) if transpose_b else (1, tp))
    return ((dp, tp), (1, tp) if transpose_b else (tp, 1))     # row: weight's input axis


def expand(graph: OpGraph, dp: int, tp: int, sequence_parallel: bool = False
           ) -> dict[int, tuple[str, tuple]]:
    """``{operator id: (role, in_strategy)}`` of the operators the Megatron layout fixes for
    data-parallel ``dp`` and tensor-parallel ``tp`` on the stage's ``dp·tp`` devices."""
    return {i: (role, role_strategy(graph, graph.ops[i], role, dp, tp, sequence_parallel))
            for i, role in sorted(layout_roles(graph).items())}


__all__ = ["Config", "ConfigError", "ConfigTextError", "KEYS", "PREFERRED", "layout_roles", "config_from_values", "expand", "matmul_roles",
           "parse_config", "positive_int", "role_strategy", "sequence_parallel_out"]
