"""Built-in BERT and the networks written by others (mindformers LLaMA, mindcv ViT/Swin/ResNet).

Counts are derived from the network definitions (see each test's comment).
"""
from __future__ import annotations

from collections import Counter

import pytest

from smsg_ms.graph.blocks import group_blocks
from smsg_ms.networks import BUILTINS, NetworkSpecError, build_network

BERT = dict(layers=3, batch=2, seq=16, hidden=64, heads=4, ffn=128, vocab=100)


def test_bert_operators_and_shapes(captured):
    g = captured("bert", **BERT)
    n, h, f = BERT["layers"], BERT["hidden"], BERT["ffn"]
    counts = Counter(op.type for op in g.ops)
    # per layer query, key, value, output, intermediate, output + pooler
    assert counts["MatMul"] == 6 * n + 1
    assert counts["BatchMatMul"] == 2 * n
    assert counts["Gather"] == 3  # word, position, token type
    assert counts["LayerNorm"] == 2 * n + 1
    assert counts["GeLU"] == n
    paths = g.by_path()
    w = g.tensors[paths["layers.1.intermediate.matmul"][0].inputs[1]]
    assert w.kind == "parameter" and w.shape == (h, f)
    assert paths["layers.0.attention.scores"][0].attrs["transpose_b"] is True
    assert all(op.shardable for op in g.ops)
    assert [grp.prefixes for grp in group_blocks(g)] == [[f"layers.{i}" for i in range(n)]]
    assert "bert" in BUILTINS


def test_missing_package_gives_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_mindcv(name, *args, **kwargs):
        if name == "mindcv" or name.startswith("mindcv."):
            raise ImportError("No module named 'mindcv'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "mindcv", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_mindcv)
    with pytest.raises(NetworkSpecError, match="needs the package 'mindcv'.*install_model"):
        build_network("resnet50")


MF = dict(layers=2, hidden=512, heads=8, kv_heads=4, ffn=1024, vocab=1000, seq=64, batch=1)


@pytest.mark.mindformers
def test_mindformers_llama_forward(captured):
    g = captured("mf-llama", **MF)
    h, kv = MF["hidden"], MF["kv_heads"] * MF["hidden"] // MF["heads"]
    mm = {op.prim_path: op for op in g.ops if op.type == "MatMul"}
    assert len(mm) == 7 * MF["layers"] + 1  # wq wk wv wo w1 w2 w3 per layer + lm_head
    # mindformers Linear keeps weights (out, in) and multiplies with transpose_b
    expect = {"attention.wq": (h, h), "attention.wk": (kv, h), "attention.wv": (kv, h),
              "attention.wo": (h, h), "feed_forward.w1": (MF["ffn"], h),
              "feed_forward.w3": (MF["ffn"], h), "feed_forward.w2": (h, MF["ffn"])}
    for i in range(MF["layers"]):
        for name, shape in expect.items():
            op = mm[f"model.layers.{i}.{name}.matmul"]
            assert g.tensors[op.inputs[1]].shape == shape and op.attrs["transpose_b"] is True
    assert g.tensors[mm["lm_head.matmul"].inputs[1]].shape == (MF["vocab"], h)
    # captured on its training path: seq + 1 tokens in, its own loss (a scalar) out
    assert g.tensors[g.inputs[0]].shape == (MF["batch"], MF["seq"] + 1)
    assert [g.tensors[t].shape for t in g.outputs] in ([()], [(1,)])
    assert any(op.type == "OneHot" for op in g.ops)
    assert [grp.prefixes for grp in group_blocks(g)] == [["model.layers.0", "model.layers.1"]]


@pytest.mark.mindformers
@pytest.mark.slow
def test_llama2_70b_shape_two_layers_training_graph_allocates_no_weights():
    import resource

    from smsg_ms.graph.capture import capture_training_graph

    tc = capture_training_graph("mf-llama", layers=2, hidden=8192, heads=64, kv_heads=8,
                                ffn=28672, vocab=32000, seq=4096, batch=1)
    g = tc.graph
    params = [t for t in g.parameters() if not t.name.startswith(("moments.", "learning_rate",
                                                                  "momentum", "global_step"))]
    weight_bytes = sum(t.nbytes for t in params if t.nbytes)
    # 2 layers of 8192² (wq, wo) + 2·1024·8192 (wk, wv) + 3·8192·28672 (FFN), embedding and head
    per_layer = 2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 8192 * 28672
    assert weight_bytes >= 2 * (2 * per_layer + 2 * 32000 * 8192)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert peak < weight_bytes / 2  # the weights (~4.5 GB fp16) were never allocated
    phases = Counter((op.type, op.phase) for op in g.ops)
    assert phases[("MatMul", "forward")] == 15 and phases[("MatMul", "backward")] == 30


@pytest.mark.mindcv
def test_resnet50_conv_count_and_head(captured):
    g = captured("resnet50", batch=1, image=64)
    counts = Counter(op.type for op in g.ops)
    # stem 1 + bottlenecks (3+4+6+3)·3 + 4 downsample convs
    assert counts["Conv2D"] == 1 + 16 * 3 + 4 == 53
    (fc,) = [op for op in g.ops if op.type == "MatMul"]
    assert g.tensors[fc.outputs[0]].shape == (1, 1000)
    assert 2048 in g.tensors[fc.inputs[1]].shape
    stem = g.by_path()["conv1.conv2d"][0] if "conv1.conv2d" in g.by_path() else \
        [op for op in g.ops if op.type == "Conv2D"][0]
    assert g.tensors[stem.inputs[1]].shape == (64, 3, 7, 7)
    # layerN.0 has the downsample branch, the rest of each stage is identical
    assert sorted(len(grp.blocks) for grp in group_blocks(g)) == [2, 2, 3, 5]


@pytest.mark.mindcv
def test_vit_b16_dense_count_and_blocks(captured):
    g = captured("vit-b16", batch=1)
    mm = [op for op in g.ops if op.type == "MatMul"]
    assert len(mm) == 12 * 4 + 1  # 12 blocks × (qkv, proj, fc1, fc2) + head
    qkv = [op for op in mm if op.prim_path and op.prim_path.endswith("qkv.matmul")]
    assert len(qkv) == 12 and g.tensors[qkv[0].outputs[0]].shape[-1] == 3 * 768
    # attention softmax is a functional call in mindcv: listed, not shardable
    assert any(op.type == "Softmax" and not op.shardable for op in g.ops)
    (grp,) = group_blocks(g)
    assert len(grp.blocks) == 12


@pytest.mark.mindcv
def test_swin_tiny_dense_count(captured):
    g = captured("swin-t", batch=1)
    dense = [op for op in g.ops if op.type == "MatMul" and op.shardable]
    # depths 2+2+6+2 = 12 blocks × (q, k, v, proj, fc1, fc2) + 3 patch merges + classifier
    assert len(dense) == 12 * 6 + 3 + 1
    head = [op for op in dense if op.prim_path == "classifier.matmul"]
    assert g.tensors[head[0].outputs[0]].shape == (1, 1000)


@pytest.mark.mindformers
def test_mindformers_reused_layers_capture_the_same_training_graph():
    # oracle: MindSpore's own compile of the same network with every layer inlined
    from smsg_ms.graph.capture import capture_training_graph

    def ops(reuse):
        g = capture_training_graph("mf-llama", reuse_layers=reuse, **MF).graph
        return sorted((op.type, op.phase, op.prim_path or "", op.call_index,
                       tuple(tuple(g.tensors[t].shape) for t in op.inputs)) for op in g.ops)

    inlined, reused = ops(False), ops(True)
    assert reused == inlined
    paths = {p for _, phase, p, _, _ in reused if phase == "forward"}
    assert {f"model.layers.{i}.attention.wq.matmul" for i in range(MF["layers"])} <= paths
