"""A ``Concat`` whose input tuple holds a constant (issue #18: mindformers' MTP ``roll_tensor``
appends ``zeros((bs, 1))`` to the shifted labels; DeepSeek-V3's one-stage compile failed with
MindSpore's "ConcatInfo: strategy size: 1 is not equal to inputs size: 2").

The network is :func:`smsg_ms.networks.probes.concat_constant`: ``concat((x[:, 1:],
zeros(batch, 1)), axis=-1) @ W``, ``x`` (8, 16). Expected values: by reading its source, the
Concat has two inputs, (8, 15) and (8, 1); and MindSpore's own compile (the dry-run of
``check``) accepts the plan's two-input strategy for it, where a one-input strategy is refused.
"""
from __future__ import annotations

import pytest

from smsg_ms.graph.capture import capture_network
from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph

SPEC = "smsg_ms.networks.probes:concat_constant"


@pytest.fixture(scope="module")
def graph():
    return capture_network(SPEC)


def test_the_constant_stays_an_input_of_the_concat(graph):
    (concat,) = [op for op in graph.ops if op.type == "Concat"]
    shapes = [graph.tensors[t].shape for t in concat.inputs]
    assert shapes == [(8, 15), (8, 1)]
    assert graph.tensors[concat.inputs[1]].kind == "constant"


def test_mindspore_compiles_the_plans_concat_strategy(graph):
    plan = plan_graph(graph, 4, progress=False, network=SPEC, options={})
    (decision,) = [d for d in plan.decisions if d.op_type == "Concat"]
    assert len(decision.strategy) == 2
    report = check_plan(plan, [0])
    assert report.ok, [r.error for r in report.ranks]
