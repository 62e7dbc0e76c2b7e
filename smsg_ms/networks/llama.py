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
    from mindspore import nn, ops

    from .decoder import cells, decoder_layer

    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    kv_heads = heads if kv_heads is None else kv_heads
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"heads {heads} is not a multiple of kv_heads {kv_heads}")
    if attention not in ATTENTIONS:
        raise ValueError(f"attention {attention!r} is not one of {', '.join(ATTENTIONS)}")
    head_dim = hidden // heads
    ms_dtype = ms.float16 if dtype == "float16" else ms.float32
    parts = cells(batch, seq, hidden, heads, kv_heads, vocab, layers, ms_dtype)

    class FlashAttention(nn.Cell):
        """The same projections around one ``FlashAttentionScore`` (BSH: queries ``(batch,
        seq, hidden)``, keys and values ``(batch, seq, kv_heads·head_dim)``)."""

        def __init__(self):
            super().__init__()
            parts.projections(self)
            self.flash = ops.auto_generate.FlashAttentionScore(
                heads, scale_value=1.0 / head_dim ** 0.5, input_layout="BSH",
                sparse_mode=ATTENTIONS[attention])

        def construct(self, x):
            q = self.reshape(self.wq(x), (batch, seq, hidden))
            k = self.reshape(self.wk(x), (batch, seq, kv_heads * head_dim))
            v = self.reshape(self.wv(x), (batch, seq, kv_heads * head_dim))
            out = self.flash(q, k, v, None, None, None, None)[3]
            return self.wo(self.merge_reshape(out, (batch * seq, hidden)))

    class FeedForward(parts.SwiGLU):
        """The SwiGLU MLP of width ``ffn``."""

        def __init__(self):
            super().__init__(ffn)

    attention_cell = parts.Attention if ATTENTIONS[attention] is None else FlashAttention
    layer_cell = decoder_layer(parts.RMSNorm, attention_cell, FeedForward)

    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": parts.Decoder(layer_cell), "inputs": (ids,)}
