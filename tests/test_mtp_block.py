"""A side block after the chain of layers (DeepSeek-V3's multi-token-prediction
layer, ``model.mtp.layers.0`` after ``model.decoder.layers.i``) is not one more repeated block:
it neither joins the layers' group nor counts as a layer of the pipeline chain (it runs on the
last stage). Before, the 12-B DeepSeek YAML (16 layers, 16 stages) was refused with "pp=16 does
not divide the 17 repeated blocks"."""
from __future__ import annotations

import pytest

from smsg_ms.graph.blocks import group_blocks
from smsg_ms.planner.stages import block_of_ops

SPEC = "smsg_ms.networks.mtp_chain:build"


@pytest.fixture(scope="module")
def graph():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC)


def test_mtp_layer_is_not_a_block_of_the_chain(graph):
    """By construction (smsg_ms/networks/mtp_chain.py): 4 layers ``matmul, relu, add`` then the
    MTP layer ``matmul, mul, matmul, add``: the chain is the 4 layers, and the MTP layer's 4
    operators run with the last layer (block 3)."""
    names, block = block_of_ops(graph)
    assert names == ["layers.0", "layers.1", "layers.2", "layers.3"]
    mtp = [op for op in graph.ops if op.prim_path and op.prim_path.startswith("mtp.")]
    assert [op.type for op in mtp if op.phase == "forward"] == ["MatMul", "Mul", "MatMul", "Add"]
    assert {block[op.id] for op in mtp} == {3}
    groups = group_blocks(graph, min_size=1)
    assert [g.prefixes for g in groups if g.container == "layers"] == [names]
    assert all("layers.0" not in g.prefixes for g in groups if g.container != "layers")


def test_four_stages_for_four_layers(graph):
    """4 stages of one layer each: the score no longer counts 5 blocks (a refusal before)."""
    from smsg_ms.compare.score_configs import score_config

    out = score_config(SPEC, "dp=1,tp=1,pp=4,micro_batch=2,global_batch=8", devices=4)
    assert out["micro_batches"] == 4 and out["step_seconds"] > 0
