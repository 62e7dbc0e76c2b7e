"""Collectives and FLOPs inside sub-graphs: mindformers LLaMA calls its layers as sub-graphs of the
compiled MindIR; the counted figures must include them (derived by hand below)."""
from __future__ import annotations

import pytest

from smsg_ms.compare import measures
from smsg_ms.dryrun.runner import run_child

pytest.importorskip("mindformers")

DEVICES = 8
MF = {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 256, "seq": 16, "batch": 8}
FP16, FP32 = 2, 4


@pytest.fixture(scope="module")
def dp():
    return run_child({"job": "planner_compile", "spec": "mf-llama", "options": MF,
                      "planner": "data_parallel", "strategies": {}}, devices=DEVICES)


def test_data_parallel_gradient_sync_is_every_weight(dp):
    h, f, v, n = MF["hidden"], MF["ffn"], MF["vocab"], MF["layers"]
    matrices = v * h + n * (4 * h * h + 3 * h * f) + v * h  # embedding, wq wk wv wo w1 w3 w2, head
    norms = n * 2 * h + h  # two RMSNorm weights per layer and the final one, kept in float32
    weights = FP16 * matrices + FP32 * norms
    m = measures.summarize(dp)
    assert m["memory"]["parameter"] == weights
    # one ring AllReduce per weight over all 8 devices: 2(g-1)/g of the weights' bytes
    assert m["collective_bytes"]["grad_sync"] == {
        "AllReduce": pytest.approx(2 * (DEVICES - 1) / DEVICES * weights)}


def test_data_parallel_flops_include_the_layers(dp):
    h, f, v, heads = MF["hidden"], MF["ffn"], MF["vocab"], MF["heads"]
    t = MF["batch"] // DEVICES * MF["seq"]  # tokens per device
    s, d = MF["seq"], h // heads
    per_layer = 2 * t * h * (4 * h + 3 * f) + 2 * 2 * (MF["batch"] // DEVICES) * heads * s * s * d
    forward = MF["layers"] * per_layer + 2 * t * h * v  # layers, lm_head
    fl = measures.flops(dp["compute_ops"])
    assert fl["forward"] == forward
    # backward: a gradient for both inputs of every product (the embedding output needs one too)
    assert fl["backward"] == 2 * forward
