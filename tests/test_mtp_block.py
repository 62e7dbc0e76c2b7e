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
DEEPSEEK_12B = "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml"


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


@pytest.fixture(scope="module")
def aux_graph():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC, aux=True)


def test_mtp_runs_last_when_later_layers_ops_follow_it(aux_graph):
    """DeepSeek-V3's pattern (``aux=True``): MindSpore's graph order puts each layer's auxiliary
    loss (``layers.i.aux_mean.mean``) after the MTP layer. By construction the MTP layer's 5
    operators (``matmul, mul, matmul, add, reshape``) still run on the last stage with layer 3
    (mindformers places ``model.mtp`` there), and each auxiliary ReduceMean with its own layer.
    Before, the MTP operators took the block of the next indexed operator (layer 0's ReduceMean):
    block 0."""
    names, block = block_of_ops(aux_graph)
    mtp = [op for op in aux_graph.ops if op.phase == "forward" and op.prim_path
           and op.prim_path.startswith("mtp.")]
    assert [op.type for op in mtp] == ["MatMul", "Mul", "MatMul", "Add", "Reshape"]
    assert {block[op.id] for op in mtp} == {3}
    aux = {op.prim_path: block[op.id] for op in aux_graph.ops
           if op.phase == "forward" and op.prim_path and "aux_mean" in op.prim_path}
    assert aux == {f"layers.{i}.aux_mean.mean": i for i in range(4)}


def test_mtp_reshape_is_no_stage_border(aux_graph):
    """The MTP layer's Reshape is read only by the loss on the last stage: no tensor crosses a
    stage border as a Reshape's output, so every one of the 3 borders between the 4 layers is
    allowed (MindSpore's rule: ``PipelineTransformer::CreateOpInfo`` raises "Reshape op can't be a
    border" only for the producer of a tensor sent between stages,
    ``frontend/parallel/pipeline/pipeline_transformer.cc``). Before: all 3 refused, {0, 1, 2}."""
    from smsg_ms.planner.stages import reshape_borders, weight_dependent

    _, block = block_of_ops(aux_graph)
    assert reshape_borders(aux_graph, block, weight_dependent(aux_graph)) == set()


def test_deepseek_v3_borders_are_not_reshapes():
    """The mindformers 1.9.0 DeepSeek-V3 12B YAML at 3 layers (one dense, two MoE, the MTP
    layer), reduced widths: MindSpore's graph order puts the MoE layers' router auxiliary losses
    after the MTP layer. By mindformers' placement (``gpt_model.py``: the MTP block on the last
    stage) every MTP operator runs with layer 2, so the MTP router's Reshape, read by its
    auxiliary loss, crosses no border and both borders are allowed. Before: the MTP layer took
    layer 1's block (the first auxiliary loss after it) and its Reshape refused border 1; and the
    capture itself failed in MindSpore's Morph pass ("Too many inputs of cnode", the MoE
    ``unpermute_reshape_fn(x, shp)`` wrapped as if it took one input)."""
    from integration_support import mindformers_configs

    from smsg_ms.graph.capture import capture_network
    from smsg_ms.planner.stages import reshape_borders, weight_dependent

    configs = mindformers_configs()
    if configs is None:
        pytest.skip("mindformers 1.9.0 wheel with its configs/ not installed")
    graph = capture_network("smsg_ms.networks.mf_run:build",
                            run_config=str(configs / DEEPSEEK_12B),
                            layers=3, hidden=512, heads=8, kv_heads=8, ffn=1024, vocab=4096,
                            seq=256, batch=2)
    names, block = block_of_ops(graph)
    assert len(names) == 3
    mtp = [op for op in graph.ops if op.prim_path and ".mtp." in f".{op.prim_path}"]
    assert mtp and {block[op.id] for op in mtp} == {2}
    assert reshape_borders(graph, block, weight_dependent(graph)) == set()
