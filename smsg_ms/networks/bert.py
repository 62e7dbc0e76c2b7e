"""Built-in BERT-style encoder (post-norm, multi-head self-attention, GeLU FFN, pooler).

Shapes (elements): ``input_ids (batch, seq)`` int32 → pooled ``(batch, hidden)``. Embeddings:
``word (vocab, hidden)``, ``position (seq, hidden)``, ``token_type (2, hidden)``, each read with
``Gather``. Per layer: ``attention.query/key/value/output (hidden, hidden)`` with bias,
``intermediate (hidden, ffn)``, ``output (ffn, hidden)``, two LayerNorms. Every operator is a
Primitive attribute, so every one can be sharded (``layers.3.attention.query.matmul``).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 128, layers: int = 2, hidden: int = 768, heads: int = 12,
          ffn: int = 3072, vocab: int = 30522, dtype: str = "float32"):
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.common.initializer import initializer

    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    head_dim = hidden // heads
    ms_dtype = ms.float16 if dtype == "float16" else ms.float32

    def param(shape, name, init="normal"):
        return Parameter(initializer(init, shape, ms_dtype), name=name)

    class Dense(nn.Cell):
        """``y = x @ W + b`` on 2-D ``x`` (tokens, d_in); ``W`` (d_in, d_out)."""

        def __init__(self, d_in, d_out):
            super().__init__()
            self.weight = param((d_in, d_out), "weight")
            self.bias = param((d_out,), "bias", "zeros")
            self.matmul = ops.MatMul()
            self.bias_add = ops.BiasAdd()

        def construct(self, x):
            return self.bias_add(self.matmul(x, self.weight), self.bias)

    class LayerNorm(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gamma = param((hidden,), "gamma", "ones")
            self.beta = param((hidden,), "beta", "zeros")
            self.norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-12)

        def construct(self, x):
            return self.norm(x, self.gamma, self.beta)[0]

    class SelfAttention(nn.Cell):
        def __init__(self):
            super().__init__()
            self.query, self.key = Dense(hidden, hidden), Dense(hidden, hidden)
            self.value, self.output = Dense(hidden, hidden), Dense(hidden, hidden)
            self.reshape, self.merge_reshape = ops.Reshape(), ops.Reshape()
            self.transpose, self.merge_transpose = ops.Transpose(), ops.Transpose()
            self.scores = ops.BatchMatMul(transpose_b=True)
            self.context = ops.BatchMatMul()
            self.scale = ops.Mul()
            self.softmax = ops.Softmax(-1)

        def split_heads(self, x):
            return self.transpose(self.reshape(x, (batch, seq, heads, head_dim)), (0, 2, 1, 3))

        def construct(self, x):
            q = self.split_heads(self.query(x))
            k = self.split_heads(self.key(x))
            v = self.split_heads(self.value(x))
            probs = self.softmax(self.scale(self.scores(q, k),
                                            ms.Tensor(1.0 / head_dim ** 0.5, ms_dtype)))
            ctx = self.merge_transpose(self.context(probs, v), (0, 2, 1, 3))
            return self.output(self.merge_reshape(ctx, (batch * seq, hidden)))

    class EncoderLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.attention_norm, self.output_norm = LayerNorm(), LayerNorm()
            self.intermediate, self.output = Dense(hidden, ffn), Dense(ffn, hidden)
            self.gelu = ops.GeLU()
            self.add_attn, self.add_ffn = ops.Add(), ops.Add()

        def construct(self, h):
            h = self.attention_norm(self.add_attn(h, self.attention(h)))
            return self.output_norm(self.add_ffn(h, self.output(self.gelu(self.intermediate(h)))))

    class BertEncoder(nn.Cell):
        def __init__(self):
            super().__init__()
            self.word_embeddings = param((vocab, hidden), "word_embeddings")
            self.position_embeddings = param((seq, hidden), "position_embeddings")
            self.token_type_embeddings = param((2, hidden), "token_type_embeddings")
            self.word_gather, self.position_gather = ops.Gather(), ops.Gather()
            self.token_type_gather = ops.Gather()
            self.add_position, self.add_token_type = ops.Add(), ops.Add()
            self.reshape = ops.Reshape()
            self.embedding_norm = LayerNorm()
            self.layers = nn.CellList([EncoderLayer() for _ in range(layers)])
            self.first_token = ops.StridedSlice()
            self.pooler = Dense(hidden, hidden)
            self.tanh = ops.Tanh()
            self.positions = ms.Tensor(np.tile(np.arange(seq, dtype=np.int32), batch))
            self.token_types = ms.Tensor(np.zeros(batch * seq, np.int32))

        def construct(self, input_ids):
            ids = self.reshape(input_ids, (batch * seq,))
            h = self.word_gather(self.word_embeddings, ids, 0)
            h = self.add_position(h, self.position_gather(self.position_embeddings,
                                                          self.positions, 0))
            h = self.add_token_type(h, self.token_type_gather(self.token_type_embeddings,
                                                              self.token_types, 0))
            h = self.embedding_norm(h)
            for layer in self.layers:
                h = layer(h)
            first = self.first_token(self.reshape(h, (batch, seq, hidden)), (0, 0, 0),
                                     (batch, 1, hidden), (1, 1, 1))
            return self.tanh(self.pooler(self.reshape(first, (batch, hidden))))

    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": BertEncoder(), "inputs": (ids,)}
