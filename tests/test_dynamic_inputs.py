"""#14 item 3: an input declared dynamic (``Cell.set_inputs(Tensor(shape=[None, 16]))``) is
never cut, and ``check`` compiles the declared dynamic shape. MindSpore's compiler is the
oracle: on 8 devices it refuses ``MatMul`` ``((8, 1), (1, 1))`` on the declared ``[-1, 16]``
("shape or divisor 1 at 0 cannot be divisible by strategy value 8"), which the static example
``(16, 16)`` would take; with ``Symbol(divisor=8)`` the cut is allowed (seen in the dry-run)."""
from __future__ import annotations

import copy

import pytest

SPEC = "smsg_ms.networks.dynamic_batch:build"


@pytest.fixture(scope="module")
def planned(shared_capture):
    """The capture (shared with ``check_plan``'s fingerprint capture) and its 8-device plan."""
    from smsg_ms.planner import plan_graph

    graph = shared_capture(SPEC)
    return graph, plan_graph(graph, 8, options={}, network=SPEC)


def test_declared_axes_are_recorded_and_never_cut(planned):
    graph, plan = planned
    x = graph.tensors[graph.inputs[0]]
    assert x.shape == (16, 16) and x.dynamic == [[0, 1]]   # the example's size, declared None
    matmul = next(op for op in graph.ops if op.type == "MatMul")
    weight = next(graph.tensors[n] for n in matmul.inputs if graph.tensors[n].kind == "parameter")
    assert weight.dynamic == []
    assert graph.tensors[matmul.outputs[0]].dynamic == [[0, 1]]   # the batch flows on
    strategies = plan.strategies
    assert strategies["matmul"][0][0] == 1 and strategies["relu"][0][0] == 1


def test_a_symbol_divisor_bounds_the_cut(planned):
    """``Symbol(divisor=4)``: MindSpore divides the divisor by the cut, so on 8 devices the
    batch may be cut 1, 2 or 4 ways, never 8 (the static example's 16 rows would allow 8)."""
    from smsg_ms.cost.model import CostModel

    graph = copy.deepcopy(planned[0])
    for t in graph.tensors.values():
        t.dynamic = [[0, 4]] if t.dynamic else []
    matmul = next(op for op in graph.ops if op.type == "MatMul")
    cuts = {o.strategy[0][0] for o in CostModel(graph, 8).options(matmul)}
    assert cuts == {1, 2, 4}


def test_check_compiles_the_declared_dynamic_shape(planned):
    from smsg_ms.dryrun.runner import DryRunError, run_child
    from smsg_ms.integration.check import check_plan, plan_compile_job

    _, plan = planned
    report = check_plan(plan, [0])
    rows = report.ranks[0].rows
    assert report.ranks[0].error is None and all(r.ok for r in rows), rows
    # the weight's gradient AllReduce: MindSpore records its shape with a -1 (count compared)
    assert any(r.key == ("AllReduce", "grad_sync", 8) and r.dynamic for r in rows)
    cut = copy.deepcopy(plan)
    for d in cut.decisions:
        if d.name in ("matmul", "relu"):
            d.strategy[0][0] = 8
            if d.name == "matmul":
                d.strategy[1] = [1, 1]
            else:
                d.strategy[0][1] = 1
    with pytest.raises(DryRunError, match="cannot be divisible by strategy value 8"):
        run_child(plan_compile_job(cut), devices=8)


def test_a_symbol_divisor_is_recorded_from_set_inputs():
    from smsg_ms.networks.dynamic_batch import build
    from smsg_ms.networks.dynamic_inputs import declared_axes, with_declared_dynamic

    net, inputs = build(divisor=4)
    assert declared_axes(net) == [{0: 4}]
    label = inputs[0]
    x, y = with_declared_dynamic(net, (inputs[0], label), labels=1)
    assert tuple(x.shape) == (-1, 16) and tuple(y.shape) == (-1, 16)   # the label's batch too
    assert declared_axes(build(divisor=0)[0]) == [{0: 1}]
