"""Which tensors carry a gradient (:meth:`CostModel.carries_gradient`), and that tensors
without one get no backward collective, on mindformers' LLaMA captured on its training path."""
from __future__ import annotations

import pytest

MF = dict(layers=1, hidden=256, heads=4, ffn=512, vocab=512, seq=64, batch=8)


@pytest.fixture(scope="module")
def graph(captured):
    pytest.importorskip("mindformers")
    return captured("mf-llama", **MF)


def _upstream_parameters(graph, name: str) -> set[str]:
    """Trained parameters a tensor is computed from (walk producers backwards)."""
    seen, todo, out = set(), [name], set()
    while todo:
        t = graph.tensors[todo.pop()]
        if t.name in seen:
            continue
        seen.add(t.name)
        if t.kind == "parameter" and t.requires_grad:
            out.add(t.name)
        if t.producer is not None:
            todo.extend(graph.ops[t.producer].inputs)
    return out


def _reaches_outputs(graph, name: str) -> bool:
    """Some output is computed from the tensor (walk consumers forwards)."""
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in graph.outputs:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(t for op in graph.tensors[n].consumers for t in graph.ops[op].outputs)
    return False


def test_gradient_iff_a_trained_parameter_is_upstream(graph):
    """...and the loss reads the tensor (the returned loss itself, 1 element, gets the step's
    constant sens: a gradient, but a constant one, whose backward AllReduce MindSpore folds;
    :mod:`smsg_ms.cost.gradient_flow`)."""
    from smsg_ms.cost.model import CostModel

    model = CostModel(graph, 8)
    mask = [t for op in graph.ops if (op.prim_path or "").startswith("model.casual_mask.")
            for t in op.outputs]
    assert mask and not any(model.carries_gradient(t) for t in mask)
    for op in graph.ops:
        for t in op.outputs:
            want = bool(_upstream_parameters(graph, t)) and (
                t in graph.outputs or _reaches_outputs(graph, t))
            assert model.carries_gradient(t) == want, op.label
    losses = [t for t in graph.outputs if model.carries_gradient(t)]
    assert losses and all(model.constant_gradient(t) for t in losses)


def test_no_backward_collective_on_a_tensor_without_gradient(graph):
    from smsg_ms.planner import plan_graph

    plan = plan_graph(graph, 8, progress=False)
    backward = [c for d in plan.decisions for c in d.collectives if c["phase"] == "backward"]
    assert backward  # the plan does communicate in the backward pass
    for c in backward:
        assert _upstream_parameters(graph, c["tensor"]), c
