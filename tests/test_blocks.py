"""Repeated blocks: identical layers grouped, a layer of another shape left out."""
from __future__ import annotations

from smsg_ms.graph.blocks import block_prefix, find_blocks, group_blocks


def test_block_prefix():
    assert block_prefix("layers.3.attention.wq") == ("layers", 3)
    assert block_prefix("model.layers.12.feed_forward") == ("model.layers", 12)
    assert block_prefix("lm_head") is None


def test_llama_four_layers_form_one_group(captured):
    g = captured("llama", layers=4, batch=2, seq=8, hidden=32, heads=4, ffn=48, vocab=50)
    (group,) = group_blocks(g)
    assert group.prefixes == ["layers.0", "layers.1", "layers.2", "layers.3"]
    # each block holds its layer's 7 MatMuls (wq wk wv wo w1 w3 w2), nothing of another layer
    for block in group.blocks:
        ops = [g.ops[i] for i in block.op_ids]
        assert sum(op.type == "MatMul" for op in ops) == 7
        assert all(op.prim_path.startswith(block.prefix + ".") for op in ops if op.prim_path)
    assert not any(op.prim_path == "lm_head.matmul" for b in group.blocks
                   for op in (g.ops[i] for i in b.op_ids))


def test_layer_of_other_width_is_not_in_the_group(captured):
    g = captured("smsg_ms.networks.probes:uneven_layers", widths=(32, 32, 64, 32))
    assert [grp.prefixes for grp in group_blocks(g)] == [["layers.0", "layers.1", "layers.3"]]
    assert [b.prefix for b in find_blocks(g)] == [f"layers.{i}" for i in range(4)]
    assert len({b.signature for b in find_blocks(g)}) == 2


def test_sorted_json_is_json_dumps_sorted():
    """The pre-built encoder behind block and operator signatures writes what
    ``json.dumps(x, sort_keys=True, default=str)`` writes (so signatures are as before)."""
    import json
    from pathlib import Path

    from smsg_ms.graph.model import sorted_json

    samples = [
        ["MatMul", {"transpose_b": True, "a": [1, 2.5, None]}, "layers.0.x", 0,
         [([8, 4096], "float16", "data")]],
        {"z": {"y": 1e-300, "x": float("inf")}, "é": "ü\n\"", "k": (1, 2)},
        [Path("/tmp/p"), 3.0, -0.0, 2**70, False],
    ]
    for x in samples:
        assert sorted_json(x) == json.dumps(x, sort_keys=True, default=str)
