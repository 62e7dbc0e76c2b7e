"""Tensor-valued control flow (issue #14, item 3): the capture names the cell and the source
line, `plan` refuses with that message (never a plan that silently omits the loop body), and
`check` fails a plan that leaves a weight of the network unplanned, naming it.

The network is :func:`smsg_ms.networks.probes.tensor_loop`: ``h = x @ W_in``, then
``while h.sum() < limit: h = body(h)`` (``body`` reads ``body.weight``), then ``h @ W_out``.
Expected values by reading its source: the loop's condition is a tensor, so MindSpore keeps
the loop as control flow in the compiled graph, and the weights read in the loop body and
after it (``body.weight``, ``w_out``) are read by no captured operator; ``w_in`` is read
before the loop.
"""
from __future__ import annotations

import inspect

import pytest

from smsg_ms.graph.capture import capture_network
from smsg_ms.networks import probes
from smsg_ms.planner import PlanningError, plan_graph

SPEC = "smsg_ms.networks.probes:tensor_loop"


@pytest.fixture(scope="module")
def loop_graph():
    return capture_network(SPEC)


def _while_line() -> int:
    """Line number of the ``while`` in tensor_loop's source (found independently of the
    capture, by text)."""
    lines, start = inspect.getsourcelines(probes.tensor_loop)
    (k,) = [i for i, line in enumerate(lines) if line.strip().startswith("while ")]
    return start + k


def test_capture_names_the_cell_and_the_line_of_the_loop(loop_graph):
    (flow,) = loop_graph.control_flow()
    assert "in cell '<top>'" in flow
    assert f"probes.py:{_while_line()} " in flow
    assert loop_graph.unread_parameters() == ["body.weight", "w_out"]


def test_plan_refuses_tensor_control_flow_with_cell_line_and_weights(loop_graph):
    with pytest.raises(PlanningError) as err:
        plan_graph(loop_graph, 8, progress=False)
    text = str(err.value)
    assert f"probes.py:{_while_line()}" in text
    assert "body.weight" in text and "w_out" in text


def test_check_fails_a_plan_that_leaves_weights_unplanned(loop_graph, tmp_path):
    """A plan made without the refusal (the control-flow warning dropped, as an older smsg-ms
    wrote it): MindSpore compiles it, but the loop's weights have no layout in the plan, so
    `check` fails and names them."""
    import dataclasses

    from smsg_ms.integration.check import check_plan, summary_line

    blind = dataclasses.replace(loop_graph, warnings=[])
    blind.tensors = {k: dataclasses.replace(t) for k, t in loop_graph.tensors.items()}
    for t in blind.tensors.values():        # every weight "read", so planning proceeds
        if t.kind == "parameter" and not t.consumers:
            t.consumers = [0]
    plan = plan_graph(blind, 8, progress=False, network=SPEC, options={})
    plan.fingerprint = loop_graph.fingerprint()
    plan.seal()
    report = check_plan(plan, [0])   # fails before compiling (MindSpore crashes on the loop)
    assert report.unplanned == ["body.weight", "w_out"]
    assert not report.ok
    assert summary_line(report).endswith("2 unplanned weights)")
