"""Built-in LLaMA-style decoder (pre-norm, RmsNorm, multi-head attention, SwiGLU MLP, LM head).

Shapes (elements): ``input_ids (batch, seq)`` int32 → logits ``(batch·seq, vocab)``. Per layer:
``wq, wk, wv, wo: (hidden, hidden)``, ``w1, w3: (hidden, ffn)``, ``w2: (ffn, hidden)``; the
embedding ``(vocab, hidden)`` and the head ``(hidden, vocab)``. Every operator the planner can
shard is a Primitive attribute, named as in mindformers' ``LlamaForCausalLM``
(``layers.3.attention.wq``), so plans read the same on both.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 512, layers: int = 2, hidden: int = 1024, heads: int = 16,
          ffn: int = 2816, vocab: int = 32000, dtype: str = "float32"):
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.common.initializer import initializer

    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    head_dim = hidden // heads
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
            self.wq, self.wk = Linear(hidden, hidden), Linear(hidden, hidden)
            self.wv, self.wo = Linear(hidden, hidden), Linear(hidden, hidden)
            self.reshape = ops.Reshape()
            self.merge_reshape = ops.Reshape()
            self.transpose = ops.Transpose()
            self.merge_transpose = ops.Transpose()
            self.qk = ops.BatchMatMul(transpose_b=True)
            self.pv = ops.BatchMatMul()
            self.scale = ops.Mul()
            self.softmax = ops.Softmax(-1)

        def split_heads(self, x):
            x = self.reshape(x, (batch, seq, heads, head_dim))
            return self.transpose(x, (0, 2, 1, 3))

        def construct(self, x):
            q = self.split_heads(self.wq(x))
            k = self.split_heads(self.wk(x))
            v = self.split_heads(self.wv(x))
            scores = self.scale(self.qk(q, k), ms.Tensor(1.0 / head_dim ** 0.5, ms_dtype))
            out = self.pv(self.softmax(scores), v)
            out = self.merge_transpose(out, (0, 2, 1, 3))
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
            self.attention, self.feed_forward = Attention(), FeedForward()
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
