"""Built-in LLaMA-style decoder (pre-norm, RmsNorm, multi-head or grouped-query attention, SwiGLU
MLP, LM head).

Shapes (elements): ``input_ids (batch, seq)`` int32 → logits ``(batch·seq, vocab)``. Per layer:
``wq, wo: (hidden, hidden)``, ``wk, wv: (hidden, kv_heads·head_dim)`` (``head_dim = hidden /
heads``; ``kv_heads`` defaults to ``heads``), ``w1, w3: (hidden, ffn)``, ``w2: (ffn, hidden)``; the
embedding ``(vocab, hidden)`` and the head ``(hidden, vocab)``. Grouped-query attention (Ainslie
et al. 2023, "GQA", as in LLaMA-2-70B and LLaMA-3) shares each key/value head among
``heads / kv_heads`` query heads: the queries are regrouped to ``(batch, kv_heads, group·seq,
head_dim)`` so the two BatchMatMuls read the ``kv_heads`` keys and values as they are (no
copy). Every operator the planner can shard is a Primitive attribute, named as in mindformers'
``LlamaForCausalLM`` (``layers.3.attention.wq``), so plans read the same on both.
"""
from __future__ import annotations

import numpy as np

#: ``attention`` option → FlashAttentionScore ``sparse_mode`` (``None``: BatchMatMul attention)
ATTENTIONS = {"plain": None, "flash": 0, "flash-causal": 2}


def build(batch: int = 8, seq: int = 512, layers: int = 2, hidden: int = 1024, heads: int = 16,
          ffn: int = 2816, vocab: int = 32000, dtype: str = "float32", kv_heads: int | None = None,
          attention: str = "plain"):
    """The network and its inputs (``{"net", "inputs"}``).

    ``attention``: ``plain`` (two BatchMatMuls and a Softmax, no mask), ``flash``
    (``FlashAttentionScore``, layout BSH, ``sparse_mode`` 0, no mask) or ``flash-causal``
    (``FlashAttentionScore`` BSH, ``sparse_mode`` 2: left-up causal, no attn_mask).

    Raises:
        ValueError: ``hidden`` not a multiple of ``heads``, ``heads`` not of ``kv_heads``, an
            unknown ``attention``.
    """
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.common.initializer import initializer

    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    kv_heads = heads if kv_heads is None else kv_heads
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"heads {heads} is not a multiple of kv_heads {kv_heads}")
    if attention not in ATTENTIONS:
        raise ValueError(f"attention {attention!r} is not one of {', '.join(ATTENTIONS)}")
    head_dim = hidden // heads
    group = heads // kv_heads
    ms_dtype = ms.float16 if dtype == "float16" else ms.float32

    def weight(shape, name):
        return Parameter(initializer("normal", shape, ms_dtype), name=name)

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
            self.weight = Parameter(initializer("ones", (hidden,), ms_dtype), name="weight")
            self.norm = ops.RmsNorm(1e-6)

        def construct(self, x):
            return self.norm(x, self.weight)[0]

    class Attention(nn.Cell):
        def __init__(self):
            super().__init__()
            self.wq, self.wo = Linear(hidden, hidden), Linear(hidden, hidden)
            self.wk = Linear(hidden, kv_heads * head_dim)
            self.wv = Linear(hidden, kv_heads * head_dim)
            self.reshape = ops.Reshape()
            self.merge_reshape = ops.Reshape()
            self.transpose = ops.Transpose()
            self.merge_transpose = ops.Transpose()
            self.qk = ops.BatchMatMul(transpose_b=True)
            self.pv = ops.BatchMatMul()
            self.scale = ops.Mul()
            self.softmax = ops.Softmax(-1)
            if group > 1:  # only with GQA: the multi-head graph stays as it was
                self.group_reshape = ops.Reshape()
                self.ungroup_reshape = ops.Reshape()

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

    class FlashAttention(nn.Cell):
        """The same projections around one ``FlashAttentionScore`` (BSH: queries ``(batch,
        seq, hidden)``, keys and values ``(batch, seq, kv_heads·head_dim)``)."""

        def __init__(self):
            super().__init__()
            self.wq, self.wo = Linear(hidden, hidden), Linear(hidden, hidden)
            self.wk = Linear(hidden, kv_heads * head_dim)
            self.wv = Linear(hidden, kv_heads * head_dim)
            self.reshape = ops.Reshape()
            self.merge_reshape = ops.Reshape()
            self.flash = ops.auto_generate.FlashAttentionScore(
                heads, scale_value=1.0 / head_dim ** 0.5, input_layout="BSH",
                sparse_mode=ATTENTIONS[attention])

        def construct(self, x):
            q = self.reshape(self.wq(x), (batch, seq, hidden))
            k = self.reshape(self.wk(x), (batch, seq, kv_heads * head_dim))
            v = self.reshape(self.wv(x), (batch, seq, kv_heads * head_dim))
            out = self.flash(q, k, v, None, None, None, None)[3]
            return self.wo(self.merge_reshape(out, (batch * seq, hidden)))

    class FeedForward(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w1, self.w3, self.w2 = Linear(hidden, ffn), Linear(hidden, ffn), Linear(ffn, hidden)
            self.silu = ops.auto_generate.SiLU()
            self.mul = ops.Mul()

        def construct(self, x):
            return self.w2(self.mul(self.silu(self.w1(x)), self.w3(x)))

    class DecoderLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()
            self.attention = Attention() if ATTENTIONS[attention] is None else FlashAttention()
            self.feed_forward = FeedForward()
            self.add_attn, self.add_ffn = ops.Add(), ops.Add()

        def construct(self, h):
            h = self.add_attn(h, self.attention(self.attention_norm(h)))
            return self.add_ffn(h, self.feed_forward(self.ffn_norm(h)))

    class LlamaDecoder(nn.Cell):
        def __init__(self):
            super().__init__()
            self.embedding_weight = weight((vocab, hidden), "embedding_weight")
            self.gather = ops.Gather()
            self.reshape = ops.Reshape()
            self.layers = nn.CellList([DecoderLayer() for _ in range(layers)])
            self.norm_out = RMSNorm()
            self.lm_head = Linear(hidden, vocab)

        def construct(self, input_ids):
            ids = self.reshape(input_ids, (batch * seq,))
            h = self.gather(self.embedding_weight, ids, 0)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm_out(h))

    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": LlamaDecoder(), "inputs": (ids,)}
