"""Known answers of the outer pipeline search, derived here from memory formulas.

Layer costs of a LLaMA-style decoder come from closed forms written in this file (Megatron-style
tensor parallelism inside a stage, at most 8-way; the rest of the stage's devices data-parallel):

* parameters per decoder layer: ``wq, wo: h²``, ``wk, wv: h·kv·hd``, ``w1, w2, w3: h·f``,
  two norms ``h``; embedding and LM head ``V·h`` each;
* bytes per parameter element (mixed-precision Adam): fp16 weight 2, fp16 gradient 2, fp32 master
  + two moments 12 (16 B/param in all; Rajbhandari et al. 2020, ZeRO);
* stored activations per layer, one micro-batch of ``b`` samples on one device (Korthikanti et al.
  2022, "Reducing activation recomputation in large transformer models", eq. 2 with tensor
  parallelism ``t``): ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` bytes; layer input ``2·s·b·h``.
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.pipeline import LayerCost, Links, ParamSlice
from smsg_ms.search.pipeline import NoFeasiblePipeline, plan_pipeline

GiB = 2**30
PEAK = 300e12          # FLOP/s per device
LINKS = Links(bandwidth=100e9, latency=10e-6)


def llama_costs(layers, hidden, heads, kv_heads, ffn, vocab, seq, max_tp=8, overhead=0.0):
    """``overhead``: fixed seconds per layer per forward micro-step (kernel launches), twice
    that backward."""
    hd = hidden // heads

    def layer_params(t, r):
        cut = [(hidden * hidden, hidden), (hidden * kv_heads * hd, hidden),
               (hidden * kv_heads * hd, hidden), (hidden * hidden, hidden // t),
               (hidden * ffn, hidden), (hidden * ffn, hidden), (ffn * hidden, ffn // t)]
        ps = tuple(ParamSlice(e // t, first, r) for e, first in cut)
        return ps + (ParamSlice(hidden, hidden, t * r), ParamSlice(hidden, hidden, t * r))

    def costs(d, b):
        t = min(d, max_tp)
        r = d // t
        if b % r:
            return None
        bl = b // r                                     # samples per device
        tokens = bl * seq
        n_layer = 2 * hidden * hidden + 2 * hidden * kv_heads * hd + 3 * hidden * ffn
        fwd = (2 * n_layer * tokens + 4 * bl * seq * seq * hidden) / t / PEAK
        tp_comm = 0.0 if t == 1 else 2 * (2 * (t - 1) / t * 2 * tokens * hidden / 100e9 + 10e-6)
        act = seq * bl * hidden * (10 + 24 / t + 5 * heads * seq / (hidden * t))
        x = 2 * tokens * hidden
        block = LayerCost(fwd + tp_comm + overhead, 2 * fwd + tp_comm + 2 * overhead, act, x, x, layer_params(t, r))
        emb = LayerCost(x / 100e9 + overhead, x / 100e9 + 2 * overhead, x, 4 * tokens, x,
                        (ParamSlice(vocab * hidden // t, vocab // t, r),), "embedding")
        logits = 4 * tokens * vocab / t
        head = LayerCost(2 * hidden * vocab * tokens / t / PEAK + overhead,
                         4 * hidden * vocab * tokens / t / PEAK + 2 * overhead, x + logits, x, logits,
                         (ParamSlice(hidden * vocab // t, hidden, r),
                          ParamSlice(hidden, hidden, t * r)), "head")
        return [emb] + [LayerCost(block.forward_seconds, block.backward_seconds, act, x, x,
                                  block.params, f"layers.{i}") for i in range(layers)] + [head]
    return costs


LLAMA2_70B = dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096)


def _llama2_70b_params() -> int:
    h, kv, hd, f, v = 8192, 8, 128, 28672, 32000
    per_layer = 2 * h * h + 2 * h * kv * hd + 3 * h * f + 2 * h
    return 80 * per_layer + 2 * v * h + h


def test_70b_needs_pipeline_or_optimizer_sharding():
    params = _llama2_70b_params()
    assert 68e9 < params < 70e9
    # p = 1, no optimizer sharding: every device holds 16 B per parameter over at most 8-way
    # operator parallelism: 69e9 x 16 / 8 = 138 GB > 64 GiB, whatever the batch or recompute
    assert params * 16 / 8 > 64 * GiB
    costs = llama_costs(**LLAMA2_70B)
    with pytest.raises(NoFeasiblePipeline):
        plan_pipeline(costs, 64, 64, memory_limit=64 * GiB, links=LINKS, stages=[1],
                      optimizer_sharding=[False])


def test_70b_chosen_plan_fits_by_the_formulas():
    costs = llama_costs(**LLAMA2_70B)
    plan = plan_pipeline(costs, 64, 64, memory_limit=64 * GiB, links=LINKS)
    assert plan.stages > 1 or plan.optimizer_sharding
    # recheck every stage with the closed forms above (not the cost module)
    p, d = plan.stages, plan.devices_per_stage
    t = min(d, 8)
    r = d // t
    b = plan.micro_batch_size // r
    h, a, s, f, v = 8192, 64, 4096, 28672, 32000
    layer_elems = 2 * h * h + 2 * h * 1024 + 3 * h * f
    act = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    x = 2 * s * b * h
    names = plan.layer_names
    for stage in range(p):
        idx = [i for i, st in enumerate(plan.stage_of_layer) if st == stage]
        sharded_elems = sum(layer_elems / t for i in idx if names[i].startswith("layers."))
        sharded_elems += sum(v * h / t for i in idx if names[i] in ("embedding", "head"))
        # every weight here has a first axis that divides r (<= 8): with optimizer sharding
        # MindSpore keeps 1/r of the fp16 weight and of the optimizer state, the whole gradient
        opt_div = r if plan.optimizer_sharding else 1
        weights = sharded_elems * (2 / opt_div + 2 + 12 / opt_div)
        in_flight = p - stage
        stored = sum(x if plan.recompute[i] else act for i in idx
                     if names[i].startswith("layers."))
        # the embedding and head terms are small (< 2 GiB here): bound them generously
        small = 2 * x + 4 * s * b * v / t
        assert weights + in_flight * (stored + small) + act < 64 * GiB
    assert plan.micro_batches >= plan.stages
    assert plan.bubble == pytest.approx((p - 1) / (plan.micro_batches + p - 1))


def test_small_model_large_batch_keeps_one_stage():
    """8 layers of hidden 512 (~25M parameters) on 64 devices, batch 4096, pure data parallel.

    Derivation. Let W = Σ (forward + backward) work seconds of all layers for the whole batch at
    p = 1, c0 the fixed overhead per layer per forward micro-step (2 c0 backward), L' = 10 layers
    (embedding, 8 blocks, head). Work is linear in the samples of a device, so a p-stage plan with m
    micro-batches has Σ_s t_s ≥ p W / m + 3 c0 L', hence t_max ≥ W/m + 3 c0 L'/p and
    step ≥ (m + p − 1) t_max ≥ W + 3 c0 L' (m + p − 1)/p ≥ W + 4.5 c0 L' for m ≥ p ≥ 2.
    p = 1, m = 1 costs W + 3 c0 L' + g1 (g1: AllReduce of every gradient over 64 devices). So
    p = 1 is optimal when g1 < 1.5 c0 L', checked below from the closed forms.
    """
    shape = dict(layers=8, hidden=512, heads=8, kv_heads=8, ffn=1408, vocab=32000, seq=512)
    c0, n, batch = 3e-4, 64, 4096
    costs = llama_costs(**shape, max_tp=1, overhead=c0)
    h, f, v = 512, 1408, 32000
    tensors = 8 * [h * h] * 4 + 8 * [h * f] * 3 + 8 * [h] * 2 + [v * h, h * v, h]
    g1 = sum(2 * (n - 1) / n * 2 * e / 100e9 + 10e-6 for e in tensors)   # ring AllReduce, fp16
    assert g1 < 1.5 * c0 * 10
    plan = plan_pipeline(costs, n, batch, memory_limit=64 * GiB, links=LINKS)
    assert plan.stages == 1 and plan.bubble == 0.0
    assert not any(plan.recompute)
