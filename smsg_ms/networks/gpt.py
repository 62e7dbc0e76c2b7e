"""Built-in GPT decoder in Megatron-LM's layout (Shoeybi et al. 2019, §3; Radford et al. 2019).

Pre-norm decoder layers (LayerNorm, multi-head attention with causal softmax scores, LayerNorm,
MLP ``h → 4h → h`` with GeLU), learned position embedding, a final LayerNorm and an output head
tied to the token embedding (the head reads the embedding table with ``transpose_b``: one weight,
MindSpore gives it one layout and one gradient synchronisation, see
:mod:`smsg_ms.cost.shared_parameters`). Linear layers carry biases, as Megatron's.

Shapes (elements): ``input_ids (batch, seq)`` int32 → logits ``(batch·seq, vocab)``. Per layer:
``wq, wk, wv, wo: (hidden, hidden)``, ``w1: (hidden, 4·hidden)``, ``w2: (4·hidden, hidden)``
(``x @ W``, so column-parallel cuts the second axis, row-parallel the first); the embedding
``(vocab, hidden)`` (also the head), the position embedding ``(seq, hidden)``. Primitive names
follow :mod:`smsg_ms.networks.llama` (``layers.3.attention.wq.matmul``) so that the configuration
expansion of :mod:`smsg_ms.compare.configs` recognises the same roles on both; the embedding
(``embedding.gather``) and the head (``head.lm_head``) are cells of their own, which a pipeline's
write-back stages (:func:`smsg_ms.planner.param_only.shared_parameter_cells`).

Raises:
    ValueError: ``hidden`` not a multiple of ``heads``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 512, layers: int = 2, hidden: int = 1024, heads: int = 16,
          vocab: int = 51200, dtype: str = "float32"):
    import mindspore as ms
    from mindspore import nn, ops

    from .decoder import decoder_layer, weight_maker

    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    head_dim = hidden // heads
    ffn = 4 * hidden
    ms_dtype = ms.float16 if dtype == "float16" else ms.float32
    param = weight_maker(ms_dtype)

    class Linear(nn.Cell):
        """``y = x @ W + b`` on 2-D ``x`` (tokens, d_in); ``W`` (d_in, d_out), ``b`` (d_out,)."""

        def __init__(self, d_in, d_out):
            super().__init__()
            self.weight = param((d_in, d_out), "weight")
            self.bias = param((d_out,), "bias", "zeros")
            self.matmul = ops.MatMul()
            self.add = ops.Add()

        def construct(self, x):
            return self.add(self.matmul(x, self.weight), self.bias)

    class LayerNorm(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gamma = param((hidden,), "gamma", "ones")
            self.beta = param((hidden,), "beta", "zeros")
            self.norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-5)

        def construct(self, x):
            return self.norm(x, self.gamma, self.beta)[0]

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
            self.mask_add = ops.Add()
            self.softmax = ops.Softmax(-1)
            # additive causal mask (seq, seq): 0 on and below the diagonal, -10000 above
            mask = np.triu(np.full((seq, seq), -10000.0, np.float32), 1)
            self.mask = ms.Tensor(mask, ms_dtype)

        def split_heads(self, x):
            x = self.reshape(x, (batch, seq, heads, head_dim))
            return self.transpose(x, (0, 2, 1, 3))

        def construct(self, x):
            q = self.split_heads(self.wq(x))
            k = self.split_heads(self.wk(x))
            v = self.split_heads(self.wv(x))
            scores = self.scale(self.qk(q, k), ms.Tensor(1.0 / head_dim ** 0.5, ms_dtype))
            out = self.pv(self.softmax(self.mask_add(scores, self.mask)), v)
            out = self.merge_transpose(out, (0, 2, 1, 3))
            return self.wo(self.merge_reshape(out, (batch * seq, hidden)))

    class FeedForward(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = Linear(hidden, ffn), Linear(ffn, hidden)
            self.gelu = ops.GeLU()

        def construct(self, x):
            return self.w2(self.gelu(self.w1(x)))

    layer_cell = decoder_layer(LayerNorm, Attention, FeedForward)

    class Embedding(nn.Cell):      # its own cell, and the head's: a pipeline can stage them
        def __init__(self):
            super().__init__()
            self.gather = ops.Gather()
            self.add_position = ops.Add()

        def construct(self, table, ids, pos):
            return self.add_position(self.gather(table, ids, 0), pos)

    class Head(nn.Cell):
        def __init__(self):
            super().__init__()
            self.lm_head = ops.MatMul(transpose_b=True)

        def construct(self, h, table):                  # tied: reads the embedding table
            return self.lm_head(h, table)

    class GPT(nn.Cell):
        def __init__(self):
            super().__init__()
            self.embedding_weight = param((vocab, hidden), "embedding_weight")
            self.position_weight = param((seq, hidden), "position_weight")
            self.embedding = Embedding()
            self.reshape = ops.Reshape()
            self.layers = nn.CellList([layer_cell() for _ in range(layers)])
            self.norm_out = LayerNorm()
            self.head = Head()

        def construct(self, input_ids):
            h = self.embedding(self.embedding_weight, input_ids, self.position_weight)
            h = self.reshape(h, (batch * seq, hidden))
            for layer in self.layers:
                h = layer(h)
            return self.head(self.norm_out(h), self.embedding_weight)

    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": GPT(), "inputs": (ids,)}
