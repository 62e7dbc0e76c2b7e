"""Any shape from the command line: width flags, ``--shape`` presets, grouped-query attention.

Oracles: a NumPy grouped-query attention written from the definition (Ainslie et al. 2023: query
head ``h`` reads key/value head ``h // (heads / kv_heads)``), the published widths (weight shapes
derived by hand), and MindSpore's parallel compiler (``smsg-ms check``) for a GQA plan.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from test_cli import one_line_error, smsg


def reference_gqa(x, wq, wk, wv, wo, batch, seq, heads, kv_heads):
    """Grouped-query attention in NumPy: ``x (batch·seq, hidden)`` → ``(batch·seq, hidden)``."""
    hidden = x.shape[1]
    hd = hidden // heads
    q = (x @ wq).reshape(batch, seq, heads, hd).transpose(0, 2, 1, 3)
    k = (x @ wk).reshape(batch, seq, kv_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ wv).reshape(batch, seq, kv_heads, hd).transpose(0, 2, 1, 3)
    k = np.repeat(k, heads // kv_heads, axis=1)  # head h reads kv head h // group
    v = np.repeat(v, heads // kv_heads, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
    return out @ wo


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_builtin_llama_attention_is_grouped_query_attention(kv_heads):
    import mindspore as ms

    from smsg_ms.networks import build_network

    ms.set_context(mode=ms.PYNATIVE_MODE)
    batch, seq, hidden, heads = 2, 5, 32, 4
    built = build_network("llama", batch=batch, seq=seq, layers=1, hidden=hidden, heads=heads,
                          kv_heads=kv_heads, ffn=16, vocab=11)
    attention = built.net.layers[0].attention
    rng = np.random.default_rng(kv_heads)
    weights = {}
    for name in ("wq", "wk", "wv", "wo"):
        param = getattr(attention, name).weight
        value = rng.standard_normal(param.shape).astype(np.float32) / 4
        param.set_data(ms.Tensor(value))
        weights[name] = value
    assert weights["wk"].shape == (hidden, kv_heads * hidden // heads)
    x = rng.standard_normal((batch * seq, hidden)).astype(np.float32)
    got = attention(ms.Tensor(x)).asnumpy()
    want = reference_gqa(x, weights["wq"], weights["wk"], weights["wv"], weights["wo"], batch,
                         seq, heads, kv_heads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_preset_widths_and_overrides_reach_the_network(tmp_path):
    """``--shape llama3-8b`` (Llama 3 paper, Table 3: hidden 4096, 32 heads, 8 KV heads, FFN
    14336) with the length, depth and vocabulary overridden: weight shapes derived by hand."""
    proc = smsg(["graph", "llama", "--shape", "llama3-8b", "--layers", "1", "--seq", "16",
                 "--batch", "1", "--vocab", "1000", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    shapes = {p["name"]: p["shape"] for p in summary["parameter_tensors"]}
    assert shapes["layers.0.attention.wq.weight"] == [4096, 4096]
    assert shapes["layers.0.attention.wk.weight"] == [4096, 8 * 4096 // 32]
    assert shapes["layers.0.feed_forward.w1.weight"] == [4096, 14336]
    assert shapes["embedding_weight"] == [1000, 4096]
    assert summary["options"] == {"batch": 1, "dtype": "float16", "ffn": 14336, "heads": 32,
                                  "hidden": 4096, "kv_heads": 8, "layers": 1, "seq": 16,
                                  "vocab": 1000}


@pytest.mark.parametrize("args, fragments", [
    (["--shape", "mixtral-8x7b"], ["mixtral-8x7b", "not its architecture", "moe"]),
    (["--shape", "deepseek-v3"], ["deepseek-v3", "not its architecture", "moe"]),
    (["--shape", "gpt3-175b"], ["gpt3-175b", "LayerNorm", "use bert"]),
    (["--shape", "llama4"], ["unknown --shape 'llama4'", "llama2-70b"]),
    (["--experts", "8", "--top-k", "2"], ["--experts/--top-k", "has no experts", "'moe'"]),
])
def test_what_a_builtin_cannot_express_is_refused_in_one_line(tmp_path, args, fragments):
    proc = smsg(["plan", "llama", *args], tmp_path)
    one_line_error(proc, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_width_flags_a_network_lacks_are_refused(tmp_path):
    """The refusal names command-line flags, not the builder's parameters: the built-in mlp
    (``networks/mlp.py``: batch, d_in, hidden, d_out, dtype) has two flags, --batch and
    --hidden; d_in is no flag (it was listed before)."""
    proc = smsg(["plan", "mlp", "--heads", "4", "--kv-heads", "2"], tmp_path)
    one_line_error(proc, "network 'mlp' takes no --heads, --kv-heads",
                   "(its flags: --batch, --hidden)")
    assert "d_in" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_gqa_plan_from_flags_is_named_by_them_and_passes_mindsporess_check(tmp_path):
    args = ["plan", "llama", "--shape", "llama3-8b", "--layers", "2", "--seq", "128", "--hidden",
            "512", "--heads", "8", "--kv-heads", "2", "--ffn", "1024", "--vocab", "1000",
            "--batch", "8", "--devices", "8"]
    proc = smsg(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = ("llama-batch8-ffn1024-heads8-hidden512-kv_heads2-layers2-seq128-shapellama3-8b-"
            "vocab1000-8dev.plan.json")
    assert [p.name for p in tmp_path.iterdir()] == [name]
    check = smsg(["check", name], tmp_path)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    assert "check: passed (0 rejected, 0 mismatches)" in check.stdout
