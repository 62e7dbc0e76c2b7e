"""Memory of expert parallelism (:func:`smsg_ms.cost.expert_dispatch.expert_memory_bytes`):
``ep`` moves expert weights between devices; it cannot take away more than the stage price
charged for them. With optimizer sharding on, MindSpore already divides the weight and the Adam
states among the replicas at ``ep = 1``, so the step from ``ep = 1`` to ``ep`` frees only the
gradient's share. Before, the change assumed every device held everything at ``ep = 1`` and the
shipped DeepSeek-V3 671B YAML (``enable_parallel_optimizer: True``) scored −2.25 GB.

Two stacked expert weights of a layer, E = 8 experts, h = 64, F = 128, bfloat16:
``w1 (E·h, 2F) = (512, 256)``, 131,072 elements (256 KB) and ``w2 (E·F, h) = (1024, 64)``,
65,536 elements (128 KB), e = 196,608 elements; both above MindSpore's 64 KB sharding threshold.
A stage of d = 8 devices, ep = 4.
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.expert_dispatch import ExpertLayout, expert_memory_bytes, expert_parallel_delta
from smsg_ms.graph.model import OpGraph, TensorInfo

E_ELEMENTS = 131_072 + 65_536


@pytest.fixture(scope="module")
def graph_and_layout():
    tensors = {"w1": TensorInfo("w1", (512, 256), "bfloat16", kind="parameter"),
               "w2": TensorInfo("w2", (1024, 64), "bfloat16", kind="parameter")}
    graph = OpGraph([], tensors, [], [], name="experts")
    layout = ExpertLayout(experts=8, weights={"w1": 131_072 * 2, "w2": 65_536 * 2},
                          weight_elements=E_ELEMENTS)
    return graph, layout


def test_without_optimizer_sharding_ep_divides_everything(graph_and_layout):
    graph, layout = graph_and_layout
    # by hand: bf16 weight 2 B + bf16 gradient 2 B + two fp32 Adam states 8 B = 12 B per element,
    # all e elements on every device at ep = 1, e/4 at ep = 4
    assert expert_memory_bytes(layout, graph, 8, 1) == 12 * E_ELEMENTS
    assert expert_memory_bytes(layout, graph, 8, 4) == 3 * E_ELEMENTS


def test_with_optimizer_sharding_only_the_gradient_shrinks(graph_and_layout):
    graph, layout = graph_and_layout
    # ep = 1: 8 replicas, first axes 512 and 1024 divisible by 8: weight 2e/8, gradient 2e
    # (level 1 keeps it whole), states 8e/8 = 3.25e. ep = 4: slices e/4 (first axes 128, 256),
    # 2 replicas: weight 2(e/4)/2, gradient 2(e/4), states 8(e/4)/2 = 1.75e
    assert expert_memory_bytes(layout, graph, 8, 1, True) == 3.25 * E_ELEMENTS
    assert expert_memory_bytes(layout, graph, 8, 4, True) == 1.75 * E_ELEMENTS


def test_delta_never_removes_more_than_is_held(graph_and_layout):
    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.cost.model import CostModel

    graph, layout = graph_and_layout
    model = CostModel(graph, 8, get_hardware("ascend910b"))
    # 2 stages: each holds half the layers, so half the change, -1.5e / 2 (sharded) and -9e / 2
    sharded = expert_parallel_delta(layout, model, 4, stages=2, sharding=True)
    assert sharded["memory_bytes"] == -0.75 * E_ELEMENTS
    plain = expert_parallel_delta(layout, model, 4, stages=2)
    assert plain["memory_bytes"] == -4.5 * E_ELEMENTS
