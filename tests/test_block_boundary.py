"""Which operators belong to which repeated block, and so which tensor crosses a stage boundary,
when the blocks call a primitive their model holds (mindformers GLM2: its blocks' casts are
captured as ``transformer.cast``, outside every block; the pipelined plan then sent an
attention-score tensor ``[1, 4, 64, 64]`` float16 where MindSpore sends the block's output
``[1, 64, 256]`` float32).
"""
from __future__ import annotations

import pytest

from smsg_ms.planner.stages import block_of_ops, weight_dependent

SPEC = "smsg_ms.networks.outer_cast:build"


@pytest.fixture(scope="module")
def graph():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC)


def crossing(graph, block):
    """Weight-dependent tensors an operator of block 0 passes to a later block."""
    sent = weight_dependent(graph)
    return [(op.type, graph.tensors[n].shape, graph.tensors[n].dtype)
            for op in graph.ops if block[op.id] == 0 for n in op.outputs
            if n in sent and any(block[c] > 0 for c in graph.tensors[n].consumers)]


def test_block_output_crosses_when_the_blocks_casts_carry_the_models_path(graph):
    """The captured casts inside the blocks are named by the model's path ``cast`` (GLM2's
    capture does so; this small network's capture leaves them unnamed, so the test names
    them as GLM2's are). By hand: layer 0 is ``cast, matmul, cast, relu, add``; only the add's
    output ``(8, 32)`` float32 (the block's returned value) is read by layer 1, so it alone
    crosses; the float16 matmul output, read by layer 0's second cast, does not."""
    ops = graph.ops
    casts = [op for op in ops if op.type == "Cast"]
    first_mm = next(i for i, op in enumerate(ops) if op.prim_path == "layers.0.mm")
    last_add = max(i for i, op in enumerate(ops) if op.prim_path == "layers.1.add")
    inside = [op for op in casts if first_mm - 1 <= ops.index(op) < last_add]
    assert len(inside) == 4  # two casts per block
    for op in inside:
        op.prim_path = "cast"
    names, block = block_of_ops(graph)
    assert names == ["layers.0", "layers.1"]
    assert [block[op.id] for op in inside] == [0, 0, 1, 1]
    assert crossing(graph, block) == [("Add", (8, 32), "float32")]
