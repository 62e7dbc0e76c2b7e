"""The LLaMA-2-70B shape (built-in ``llama``: hidden 8192, 64 heads, FFN 28672, vocab 32000,
sequence 4096, 80 layers, fp16, batch 1) planned for 64 devices of the default preset (Ascend
910B, 64 GiB). Capture ≈15 s (one compile of the forward graph, no weights), plan ≈3 s."""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

SHAPE = dict(hidden=8192, heads=64, ffn=28672, vocab=32000, seq=4096, dtype="float16",
             layers=80, batch=1)
GIB = 2 ** 30


@pytest.fixture(scope="module")
def plan70b(captured):
    from smsg_ms.planner import plan_graph

    return plan_graph(captured("llama", **SHAPE), 64, progress=False)


def test_fits_the_preset_memory_and_holds_at_least_an_even_share_of_the_weights(plan70b):
    h, f, v, layers = SHAPE["hidden"], SHAPE["ffn"], SHAPE["vocab"], SHAPE["layers"]
    # per layer: wq, wk, wv, wo (h×h) and w1, w3, w2 (h×f); embedding and LM head (v×h);
    # norms (h each) are negligible but counted as a lower bound only
    weights = layers * (4 * h * h + 3 * h * f) + 2 * v * h
    fp16 = 2
    assert plan70b.totals["memory_bytes"] <= 64 * GIB
    assert plan70b.totals["parameter_bytes"] >= weights * fp16 / 64
    assert plan70b.devices == 64


def _entry_primitives(graph, layer: int) -> set[str]:
    """Primitives of ``layer`` that read a tensor made outside it (the block's input)."""
    prefix = f"layers.{layer}."
    inside = {op.id for op in graph.ops if (op.prim_path or "").startswith(prefix)}
    out = set()
    for op in graph.ops:
        if op.id in inside:
            producers = {graph.tensors[t].producer for t in op.inputs}
            if any(p is not None and p not in inside for p in producers):
                out.add(op.prim_path[len(prefix):])
    return out


def test_every_layer_gets_the_same_strategies(plan70b, captured):
    per_layer = defaultdict(dict)
    for d in plan70b.decisions:
        m = re.match(r"layers\.(\d+)\.(.+)$", d.name)
        if m:
            per_layer[int(m.group(1))][m.group(2)] = d.strategy
    assert sorted(per_layer) == list(range(SHAPE["layers"]))
    second = per_layer[1]
    assert any(s for s in second.values())
    for i in range(2, SHAPE["layers"]):
        assert per_layer[i] == second, f"layer {i} differs from layer 1"
    # layer 0 reads the embedding's output, not a layer's: only its entry primitives may differ
    entry = _entry_primitives(captured("llama", **SHAPE), 0)
    differ = {k for k in second if per_layer[0].get(k) != second[k]}
    assert differ <= entry, differ - entry


def test_no_pure_data_parallel_at_this_size(plan70b):
    # 70B fp16 weights (≈157 GB) cannot be replicated in 64 GiB: some weight must be cut
    assert plan70b.totals["data_parallel_memory_bytes"] > 64 * GIB
    assert plan70b.totals["memory_bytes"] < plan70b.totals["data_parallel_memory_bytes"]
