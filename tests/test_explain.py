"""What ``explain`` shows: the symbolic cost the planner stores per decision (checked against
hand-derived FLOPs and bytes), per-operator times that add up to the step, and block instances
folded when their strategies repeat."""
from __future__ import annotations

import math

import pytest

from integration_support import MLP_OPTIONS
from smsg_ms.plan import OpDecision, Plan
from smsg_ms.planner import plan_graph
from smsg_ms.report.tables import explained_decisions


@pytest.fixture(scope="module")
def mlp_plan(captured):
    graph = captured("mlp", **MLP_OPTIONS)
    return graph, plan_graph(graph, 8, network="mlp", options=MLP_OPTIONS)


def test_matmul_symbolic_terms_match_hand_derivation(mlp_plan):
    """A MatMul (m, k) x (k, n) with in_strategy ((c_m, c_k), (c_k, c_n)) does 2·m·k·n /
    (c_m·c_k·c_n) FLOPs forward per device and holds k·n / (c_k·c_n) fp32 weight elements."""
    graph, plan = mlp_plan
    matmuls = [d for d in plan.decisions if d.op_type == "MatMul"]
    assert matmuls
    for d in matmuls:
        op = next(o for o in graph.ops if o.prim_path == d.name)
        a, b = (graph.tensors[t].shape for t in op.inputs[:2])
        sa, sb = d.strategy
        if op.attrs.get("transpose_a"):
            a, sa = a[::-1], sa[::-1]
        if op.attrs.get("transpose_b"):
            b, sb = b[::-1], sb[::-1]
        (m, k), (k2, n) = a, b
        (cm, ck), (_, cn) = sa, sb
        assert k == k2
        sym = plan.symbolic_of(d)
        terms = {t["term"]: t for t in sym["terms"]}
        assert terms["FLOPs forward"]["value"] == 2 * m * k * n / (cm * ck * cn)
        assert terms["FLOPs forward"]["unit"] == "FLOPs"
        assert terms["memory: parameter"]["value"] == 4 * k * n / (ck * cn)
        assert sym["D"] == 8
        assert {sym["cuts"][f"c_{ch}"] for ch in "mkn"} <= {1, 2, 4, 8}


def test_decision_seconds_add_up_to_the_step(mlp_plan):
    _, plan = mlp_plan
    total = sum(d.seconds for d in plan.decisions)
    assert math.isclose(total, plan.totals["step_seconds"], rel_tol=1e-9)


def test_no_pure_data_parallel_baseline_when_batch_does_not_divide(captured):
    """Batch 8 on 16 devices: MindSpore's batch-parallel plan cannot split the data inputs."""
    options = dict(MLP_OPTIONS, batch=8)
    graph = captured("mlp", **options)
    plan = plan_graph(graph, 16, network="mlp", options=options)
    assert plan.totals["data_parallel_step_seconds"] is None
    assert plan.totals["relative_to_data_parallel"] is None


def _decision(name, strategy, seconds=1e-3):
    return OpDecision(name=name, op_type="MatMul", strategy=strategy, seconds=seconds,
                      block="layers.*" if name.startswith("layers.") else None)


def test_repeated_block_instances_fold_into_the_first():
    same, other = [[2, 1], [1, 4]], [[8, 1], [1, 1]]
    decisions = [_decision("embed", [[8, 1]])]
    for i in range(3):
        decisions += [_decision(f"layers.{i}.a", same), _decision(f"layers.{i}.b", same)]
    decisions += [_decision("layers.3.a", same), _decision("layers.3.b", other),
                  _decision("head", other)]
    plan = Plan(network="t", fingerprint="f", devices=8, options={}, input_shapes=[],
                hardware="ascend910b", decisions=decisions)
    rows = explained_decisions(plan)
    shown = [d.name for d, line in rows if d is not None]
    folded = [line for d, line in rows if d is None]
    assert shown == ["embed", "layers.0.a", "layers.0.b", "layers.3.a", "layers.3.b", "head"]
    assert [f.split(":")[0] for f in folded] == ["layers.1", "layers.2"]
    assert all("same strategies as layers.0 (2 primitives" in f for f in folded)
    assert [d.name for d, _ in explained_decisions(plan, show_all=True)] == [
        d.name for d in decisions]
