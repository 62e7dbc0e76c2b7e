"""``score`` honours sequence parallel (mindformers ``use_seq_parallel``; before, a YAML's
``use_seq_parallel: True`` was priced as off)."""
from __future__ import annotations

import pytest

from smsg_ms.compare.configs import Config, expand


@pytest.fixture(scope="module")
def scorer():
    from smsg_ms.compare.score_configs import ShapeScorer

    return ShapeScorer("llama", "ascend910b", dict(layers=2, hidden=128, heads=4, ffn=256,
                                                   vocab=512, seq=64))


def _pinned(scorer, config, roles):
    stage, priced = scorer.choice(config)
    out = {}
    for op_id, (role, _) in expand(stage.graph, config.dp, config.tp,
                                   config.sequence_parallel).items():
        if role in roles:
            vi, _ = stage.index[op_id]
            out[stage.graph.ops[op_id].prim_path] = stage.variables[vi].keys[
                priced.full_choice[vi]]
    return out


def test_sequence_parallel_cuts_the_tokens_and_reduce_scatters(scorer):
    """dp 2, tp 4, 2 samples per replica: the stage holds (4·64, 128) token rows. By hand
    (Megatron-SP, Korthikanti et al. 2022 §4.2.2): without sequence parallel the norms and
    residual Adds are cut on the batch alone, (2, 1); with it on the tokens too, 2·4 = 8 ways,
    and the row-parallel MatMuls (wo, w2) keep their in_strategy ((2, 4), (4, 1)) and
    reduce-scatter onto those 8 parts (out_strategy (8, 1)). The norms' activations are then
    stored in a quarter: less memory per device."""
    base = Config(dp=2, tp=4, pp=1, micro_batch=2, global_batch=4)
    sp = Config(dp=2, tp=4, pp=1, micro_batch=2, global_batch=4, sequence_parallel=True)
    roles = ("norm", "residual", "attn_out", "ffn_out")
    off, on = _pinned(scorer, base, roles), _pinned(scorer, sp, roles)
    assert off["layers.0.attention_norm.norm"] == ((2, 1), (1,))
    assert on["layers.0.attention_norm.norm"] == ((8, 1), (1,))
    assert on["layers.1.add_ffn"] == ((8, 1), (8, 1))
    assert off["layers.0.attention.wo.matmul"] == ((2, 4), (4, 1))
    for name in ("layers.0.attention.wo.matmul", "layers.1.feed_forward.w2.matmul"):
        assert on[name] == ((2, 4), (4, 1), ("out", (8, 1)))
    assert scorer.score(sp)["memory_bytes"] < scorer.score(base)["memory_bytes"]
