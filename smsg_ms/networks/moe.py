"""Built-in mixture-of-experts decoder (Mixtral / DeepSeek style): pre-norm RmsNorm, grouped-query
attention, and an MoE MLP per layer: a router, top-k routing with an expert capacity, routed
SwiGLU experts and optional shared experts; LM head.

Shapes (elements), ``T = batch·seq`` tokens, ``E = experts``, ``k = top_k``, ``f =
expert_ffn``, capacity per expert and sequence ``C = ceil(k·seq·capacity_factor / E)`` (GShard,
Lepikhin et al. 2021, §2.2; mindformers' ``calculate_expert_capacity``): ``input_ids (batch, seq)``
int32 → logits ``(T, vocab)``. The MoE MLP is written as MindSpore's semi-auto parallel expresses
expert parallelism (mindformers' MoE v1, ``mindformers/modules/transformer/moe.py``):

* router: ``MatMul(x (T, h), w_router (h, E))`` → Softmax → ``TopK`` → the k expert indices
  one-hot ``(T·k, E)``; each (token, choice)'s slot in its expert is the exclusive ``CumSum`` of
  the one-hot over the sequence's ``seq·k`` choices; a slot ``≥ C`` one-hots to zeros (the token
  is dropped); the dispatch mask ``(batch, seq, E·C)`` and the combine weights (the mask times the
  router probability) are sums over the k choices;
* dispatch: ``BatchMatMul(maskᵀ, x)`` per sequence → ``(batch, E·C, h)`` → ``(E, batch·C, h)``
  (Reshape, Transpose, Reshape);
* experts: ``BatchMatMul`` with the stacked weights ``w1, w3 (E, h, f)``, ``w2 (E, f, h)``;
  cutting their expert axis ``E`` is expert parallelism, and the move of the cut from the batch
  axis to the expert axis (and back) is the redistribution MindSpore turns into AlltoAll with
  ``enable_alltoall`` (``redistribution_operator_infer.cc``, ``InferPermuteByAxis``);
* combine: the inverse reshapes, then ``BatchMatMul(combine, y)`` → ``(T, h)``, plus the shared
  experts (one dense SwiGLU of width ``shared_experts·f``) when ``shared_experts > 0``.

Every operator the planner can shard is a Primitive attribute (``layers.0.moe.experts.w1``).
"""
from __future__ import annotations

import math

import numpy as np


def capacity(top_k: int, seq: int, experts: int, capacity_factor: float) -> int:
    """Slots per expert and sequence: ``ceil(top_k·seq·capacity_factor / experts)`` (GShard)."""
    return max(1, math.ceil(top_k * seq * capacity_factor / experts))


def build(batch: int = 8, seq: int = 256, layers: int = 2, hidden: int = 512, heads: int = 8,
          kv_heads: int | None = None, ffn: int = 1024, vocab: int = 8000, experts: int = 8,
          top_k: int = 2, expert_ffn: int | None = None, shared_experts: int = 0,
          capacity_factor: float = 1.25, dtype: str = "float32"):
    """The network and its example input ``(batch, seq)`` int32.

    ``ffn`` is the width of each routed expert unless ``expert_ffn`` is given (DeepSeek-V3's
    experts are narrower than its dense MLP).

    Raises:
        ValueError: ``hidden`` not a multiple of ``heads``, ``heads`` not of ``kv_heads``,
            ``top_k`` outside ``1..experts``, a negative ``shared_experts`` or a
            ``capacity_factor`` ≤ 0.
    """
    import mindspore as ms
    from mindspore import nn, ops

    from .decoder import cells, decoder_layer

    kv_heads = heads if kv_heads is None else kv_heads
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"heads {heads} is not a multiple of kv_heads {kv_heads}")
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k {top_k} must be between 1 and experts {experts}")
    if shared_experts < 0 or capacity_factor <= 0:
        raise ValueError("shared_experts must be >= 0 and capacity_factor > 0")
    f = ffn if expert_ffn is None else expert_ffn
    head_dim, tokens = hidden // heads, batch * seq
    cap = capacity(top_k, seq, experts, capacity_factor)
    ms_dtype = ms.float16 if dtype == "float16" else ms.float32
    parts = cells(batch, seq, hidden, heads, kv_heads, vocab, layers, ms_dtype)
    weight, Linear, SwiGLU = parts.weight, parts.Linear, parts.SwiGLU

    class Router(nn.Cell):
        """Top-k routing with capacity → dispatch mask and combine weights ``(batch, seq, E·C)``."""

        def __init__(self):
            super().__init__()
            self.dense = Linear(hidden, experts)
            self.softmax = ops.Softmax(-1)
            self.topk = ops.TopK(sorted=True)
            self.expert_onehot, self.slot_onehot = ops.OneHot(), ops.OneHot()
            self.cumsum = ops.CumSum(exclusive=True)
            self.mask_pos, self.slot_sum = ops.Mul(), ops.ReduceSum(keep_dims=False)
            self.outer, self.weigh = ops.Mul(), ops.Mul()
            self.dispatch_sum, self.combine_sum = ops.ReduceSum(False), ops.ReduceSum(False)
            self.cast = ops.Cast()
            self.flat_reshape, self.group_reshape, self.pos_reshape = (ops.Reshape(),
                                                                       ops.Reshape(), ops.Reshape())
            self.mask_reshape, self.slot_reshape, self.prob_reshape = (ops.Reshape(),
                                                                       ops.Reshape(), ops.Reshape())
            self.dispatch_reshape, self.combine_reshape = ops.Reshape(), ops.Reshape()
            self.on = ms.Tensor(1.0, ms_dtype)
            self.off = ms.Tensor(0.0, ms_dtype)

        def construct(self, x):
            probs = self.softmax(self.dense(x))                                  # (T, E)
            top_p, top_i = self.topk(probs, top_k)                               # (T, k)
            chosen = self.flat_reshape(top_i, (tokens * top_k,))
            mask = self.expert_onehot(chosen, experts, self.on, self.off)        # (T·k, E)
            grouped = self.group_reshape(mask, (batch, seq * top_k, experts))
            before = self.mask_pos(self.cumsum(grouped, 1), grouped)             # earlier choices
            slot = self.cast(self.pos_reshape(self.slot_sum(before, -1), (tokens * top_k,)),
                             ms.int32)
            slots = self.slot_onehot(slot, cap, self.on, self.off)               # (T·k, C)
            routed = self.outer(self.mask_reshape(mask, (tokens * top_k, experts, 1)),
                                self.slot_reshape(slots, (tokens * top_k, 1, cap)))
            weights = self.weigh(routed, self.prob_reshape(top_p, (tokens * top_k, 1, 1)))
            dispatch = self.dispatch_sum(
                self.dispatch_reshape(routed, (batch, seq, top_k, experts * cap)), 2)
            combine = self.combine_sum(
                self.combine_reshape(weights, (batch, seq, top_k, experts * cap)), 2)
            return dispatch, combine

    class Experts(nn.Cell):
        """``E`` SwiGLU experts as batched weights: ``(E, n, h)`` → ``(E, n, h)``."""

        def __init__(self):
            super().__init__()
            self.w1 = weight((experts, hidden, f), "w1")
            self.w3 = weight((experts, hidden, f), "w3")
            self.w2 = weight((experts, f, hidden), "w2")
            self.gate, self.up, self.down = ops.BatchMatMul(), ops.BatchMatMul(), ops.BatchMatMul()
            self.silu, self.mul = ops.auto_generate.SiLU(), ops.Mul()

        def construct(self, x):
            act = self.mul(self.silu(self.gate(x, self.w1)), self.up(x, self.w3))
            return self.down(act, self.w2)

    class MoE(nn.Cell):
        def __init__(self):
            super().__init__()
            self.router = Router()
            self.experts = Experts()
            self.dispatch = ops.BatchMatMul(transpose_a=True)
            self.combine = ops.BatchMatMul()
            self.tokens_reshape, self.out_reshape = ops.Reshape(), ops.Reshape()
            self.split_reshape, self.in_reshape = ops.Reshape(), ops.Reshape()
            self.back_reshape, self.merge_reshape = ops.Reshape(), ops.Reshape()
            self.to_experts, self.from_experts = ops.Transpose(), ops.Transpose()
            self.shared = SwiGLU(shared_experts * f) if shared_experts else None
            self.add_shared = ops.Add()

        def construct(self, x):
            dispatch, combine = self.router(x)
            xs = self.tokens_reshape(x, (batch, seq, hidden))
            slots = self.dispatch(dispatch, xs)                                  # (B, E·C, h)
            slots = self.split_reshape(slots, (batch, experts, cap, hidden))
            slots = self.to_experts(slots, (1, 0, 2, 3))                          # (E, B, C, h)
            y = self.experts(self.in_reshape(slots, (experts, batch * cap, hidden)))
            y = self.from_experts(self.back_reshape(y, (experts, batch, cap, hidden)),
                                  (1, 0, 2, 3))                                  # (B, E, C, h)
            y = self.merge_reshape(y, (batch, experts * cap, hidden))
            out = self.out_reshape(self.combine(combine, y), (tokens, hidden))
            if self.shared is not None:
                out = self.add_shared(out, self.shared(x))
            return out

    # MindSpore names a graph's tensors after the variables of construct, and plans name the
    # tensors: the two methods below stay as this network first wrote them
    class Attention(parts.Attention):
        def split_heads(self, x, n):
            return self.transpose(self.reshape(x, (batch, seq, n, head_dim)), (0, 2, 1, 3))

    class MoEDecoder(parts.Decoder):
        def construct(self, input_ids):
            h = self.gather(self.embedding_weight, self.reshape(input_ids, (tokens,)), 0)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm_out(h))

    layer_cell = decoder_layer(parts.RMSNorm, Attention, MoE, "moe")

    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": MoEDecoder(layer_cell), "inputs": (ids,)}
