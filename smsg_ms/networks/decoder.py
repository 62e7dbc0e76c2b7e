"""Cells the built-in decoders share (:mod:`~smsg_ms.networks.llama`, :mod:`~smsg_ms.networks.moe`,
:mod:`~smsg_ms.networks.gpt`), made by :func:`cells` for one network's sizes (MindSpore is imported
on call, as in every network module).

Shapes (elements), ``T = batch·seq`` tokens, ``h = hidden``, ``d = hidden / heads``:

* ``Linear(d_in, d_out)``: ``x (T, d_in)`` → ``x @ W``, ``W (d_in, d_out)``;
* ``RMSNorm()``: ``(T, h)`` → ``(T, h)``, weight ``(h,)`` (epsilon 1e-6);
* ``Attention()``: grouped-query attention (Ainslie et al. 2023) ``(T, h)`` → ``(T, h)``;
  ``wq, wo (h, h)``, ``wk, wv (h, kv_heads·d)``; the queries regrouped to ``(batch, kv_heads,
  group·seq, d)`` when ``group = heads / kv_heads > 1``;
* ``SwiGLU(width)``: ``w2(silu(w1 x) · w3 x)``, ``w1, w3 (h, width)``, ``w2 (width, h)``;
* ``Decoder(layer)``: ``input_ids (batch, seq)`` int32 → Gather of the embedding ``(vocab, h)``
  → ``layers`` cells of class ``layer`` → RMSNorm → head ``(h, vocab)`` → logits ``(T, vocab)``.

Attribute names follow mindformers' ``LlamaForCausalLM`` (``layers.3.attention.wq``); they are the
primitive paths of plans. MindSpore also names a graph's tensors after the variables and
expressions of ``construct`` (plans record them), so a network that wrote a method otherwise
overrides it (:mod:`~smsg_ms.networks.moe`) and its graphs and plans stay as they were.
"""
from __future__ import annotations

from types import SimpleNamespace


def weight_maker(ms_dtype):
    """``weight(shape, name, init="normal")``: a ``Parameter`` of MindSpore dtype ``ms_dtype``."""
    from mindspore import Parameter
    from mindspore.common.initializer import initializer

    def weight(shape, name, init="normal"):
        return Parameter(initializer(init, shape, ms_dtype), name=name)

    return weight


def decoder_layer(norm, attention, mlp, mlp_name: str = "feed_forward"):
    """The pre-norm layer class ``DecoderLayer``: ``h + attention(attention_norm(h))``, then
    ``h + mlp(ffn_norm(h))``, on ``(T, h)``. ``norm``, ``attention``, ``mlp``: cell classes built
    without arguments; the MLP is the attribute ``mlp_name``."""
    from mindspore import nn, ops

    class DecoderLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = norm(), norm()
            self.attention = attention()
            setattr(self, mlp_name, mlp())
            self.add_attn, self.add_ffn = ops.Add(), ops.Add()

        def construct(self, h):
            h = self.add_attn(h, self.attention(self.attention_norm(h)))
            return self.add_ffn(h, getattr(self, mlp_name)(self.ffn_norm(h)))

    return DecoderLayer


def cells(batch: int, seq: int, hidden: int, heads: int, kv_heads: int, vocab: int, layers: int,
          ms_dtype) -> SimpleNamespace:
    """``weight``, ``Linear``, ``RMSNorm``, ``projections``, ``Attention``, ``SwiGLU`` and
    ``Decoder`` for these sizes (see the module's docstring); ``projections(cell)`` gives a cell
    the four attention projections and its input and output Reshapes. The caller checks that
    ``heads`` divides ``hidden`` and ``kv_heads`` divides ``heads``."""
    import mindspore as ms
    from mindspore import nn, ops

    head_dim, group = hidden // heads, heads // kv_heads
    weight = weight_maker(ms_dtype)

    class Linear(nn.Cell):
        """``y = x @ W`` on 2-D ``x`` (tokens, d_in); ``W`` (d_in, d_out)."""

        def __init__(self, d_in, d_out):
            super().__init__()
            self.weight = weight((d_in, d_out), "weight")
            self.matmul = ops.MatMul()

        def construct(self, x):
            return self.matmul(x, self.weight)

    class RMSNorm(nn.Cell):
        def __init__(self):
            super().__init__()
            self.weight = weight((hidden,), "weight", "ones")
            self.norm = ops.RmsNorm(1e-6)

        def construct(self, x):
            return self.norm(x, self.weight)[0]

    def projections(cell):
        cell.wq, cell.wo = Linear(hidden, hidden), Linear(hidden, hidden)
        cell.wk = Linear(hidden, kv_heads * head_dim)
        cell.wv = Linear(hidden, kv_heads * head_dim)
        cell.reshape, cell.merge_reshape = ops.Reshape(), ops.Reshape()

    class Attention(nn.Cell):
        def __init__(self):
            super().__init__()
            projections(self)
            self.transpose, self.merge_transpose = ops.Transpose(), ops.Transpose()
            self.qk, self.pv = ops.BatchMatMul(transpose_b=True), ops.BatchMatMul()
            self.scale, self.softmax = ops.Mul(), ops.Softmax(-1)
            if group > 1:  # only with GQA: the multi-head graph stays as it was
                self.group_reshape, self.ungroup_reshape = ops.Reshape(), ops.Reshape()

        def split_heads(self, x, n):
            # queries, keys and values share this reshape and transpose, as in the multi-head
            # graph: one primitive, one strategy (its head cut divides kv_heads too), and
            # a chain of layers the search eliminates quickly (with a transpose of their own,
            # keys and values widened the frontier and a 64-device plan fell back to the
            # integer program: 30x slower)
            x = self.reshape(x, (batch, seq, n, head_dim))
            return self.transpose(x, (0, 2, 1, 3))

        def construct(self, x):
            q = self.split_heads(self.wq(x), heads)
            k = self.split_heads(self.wk(x), kv_heads)
            v = self.split_heads(self.wv(x), kv_heads)
            if group > 1:  # query heads kv·g+i (i < g) share key/value head kv
                q = self.group_reshape(q, (batch, kv_heads, group * seq, head_dim))
            scores = self.scale(self.qk(q, k), ms.Tensor(1.0 / head_dim ** 0.5, ms_dtype))
            out = self.pv(self.softmax(scores), v)
            if group > 1:
                out = self.ungroup_reshape(out, (batch, heads, seq, head_dim))
            out = self.merge_transpose(out, (0, 2, 1, 3))
            return self.wo(self.merge_reshape(out, (batch * seq, hidden)))

    class SwiGLU(nn.Cell):
        """Dense SwiGLU MLP ``w2(silu(w1 x) · w3 x)``."""

        def __init__(self, width):
            super().__init__()
            self.w1, self.w3 = Linear(hidden, width), Linear(hidden, width)
            self.w2 = Linear(width, hidden)
            self.silu, self.mul = ops.auto_generate.SiLU(), ops.Mul()

        def construct(self, x):
            return self.w2(self.mul(self.silu(self.w1(x)), self.w3(x)))

    class Decoder(nn.Cell):
        def __init__(self, layer):
            super().__init__()
            self.embedding_weight = weight((vocab, hidden), "embedding_weight")
            self.gather = ops.Gather()
            self.reshape = ops.Reshape()
            self.layers = nn.CellList([layer() for _ in range(layers)])
            self.norm_out = RMSNorm()
            self.lm_head = Linear(hidden, vocab)

        def construct(self, input_ids):
            ids = self.reshape(input_ids, (batch * seq,))
            h = self.gather(self.embedding_weight, ids, 0)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm_out(h))

    return SimpleNamespace(weight=weight, Linear=Linear, RMSNorm=RMSNorm, projections=projections,
                           Attention=Attention, SwiGLU=SwiGLU, Decoder=Decoder)
