"""Backward collectives as MindSpore compiles them (issue #14, ``check 8`` of DeepSeek-V3 and
TeleChat3-MoE: 6 backward AllReduces predicted, 2 inserted; of Qwen3-MoE built for 8 devices:
19 backward ReduceScatters predicted, 18 inserted).

Only where the gradient depends on the data:

Network ``smsg_ms.networks.aux_loss:build`` (its own ``shard()`` strategies, batch cut 8
ways): four reductions of batch-cut tensors, a forward AllReduce each in MindSpore's
compile; the bprop of a forward AllReduce is an AllReduce of ``dout`` (``grad_comm_ops.py``)
only for the loss numerator, whose gradient ``1/denominator`` is data. The auxiliary mean
(gradient the constant 0.01) and the statistic only ``AssignAdd`` reads (no gradient) get
none; the denominator reads the input (no gradient). Oracle: MindSpore's dry-run compile of
the plan at 8 devices (``check``); the counts 4 forward / 1 backward by hand from the above.
"""
from __future__ import annotations

SPEC = "smsg_ms.networks.aux_loss:build"


def test_data_dependent_gradients_by_hand():
    from smsg_ms.graph.capture import capture_network
    from smsg_ms.cost.gradient_flow import data_dependent_gradients

    graph = capture_network(SPEC)
    varying = data_dependent_gradients(graph)
    out = {op.prim_path: op.outputs[0] for op in graph.ops if op.prim_path}
    assert out["numerator"] in varying and out["relu"] in varying
    assert out["aux_mean"] not in varying and out["load_mean"] not in varying


def test_backward_allreduces_are_mindspores():
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_network

    plan = plan_network(SPEC, 8, progress=False)
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    rows = {r.key: (r.predicted, r.inserted) for r in report.ranks[0].rows}
    assert rows[("AllReduce", "forward", 8)] == (4, 4), rows
    assert rows[("AllReduce", "backward", 8)] == (1, 1), rows
    assert report.ok, rows


def test_an_add_of_two_inputs_gathered_alike_scatters_back_once():
    """``smsg_ms.networks.residual_gathers:build`` (Qwen3-MoE's first residual built for 8
    devices, in small): both inputs of the Add gathered from the ``seq`` cut, 2 forward
    AllGathers; the Add's bprop gives both the same ``dout``, and MindSpore's compile has one
    backward ReduceScatter for the two (its CSE merges the equal ones). Oracle: the dry-run."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_network

    plan = plan_network("smsg_ms.networks.residual_gathers:build", 8, progress=False)
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    rows = {r.key: (r.predicted, r.inserted) for r in report.ranks[0].rows}
    assert rows[("AllGather", "forward", 8)] == (2, 2), rows
    assert rows[("ReduceScatter", "backward", 8)] == (1, 1), rows
    assert report.ok, rows


def test_an_inplace_add_of_two_inputs_gathered_alike_scatters_back_once():
    """``c = a; c += b`` (an ``InplaceAddExt`` without strategy, mindcv Res2Net's ``out +=
    identity``), both inputs redistributed from a ``batch`` cut to its default ``seq`` cut:
    2 forward AllGathers, one backward ReduceScatter (before: 2 predicted; Res2Net-50 check 8:
    12 predicted, 11 inserted). Oracle: the dry-run."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_network

    plan = plan_network("smsg_ms.networks.residual_gathers:build", 8, progress=False,
                        inplace=True)
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    rows = {r.key: (r.predicted, r.inserted) for r in report.ranks[0].rows}
    assert rows[("AllGather", "forward", 8)] == (2, 2), rows
    assert rows[("ReduceScatter", "backward", 8)] == (1, 1), rows
    assert report.ok, rows
