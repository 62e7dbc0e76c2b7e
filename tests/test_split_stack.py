"""Functional ``ops.split`` / ``ops.concat`` / ``ops.stack`` around a residual, and a
last-position head (``x[:, -1, :]``, ``x[:, :1, :].squeeze(1)``), against MindSpore's compiler
(CPU dry-run).

Network: :mod:`smsg_ms.networks.split_stack` (4 blocks, batch 16, 4 tokens, width 32; 8
devices). Expected collectives: MindSpore's own compile of the plan (``check``: 0 mismatches).
Before the Stack family the model laid a strategy-less Stack out by the generic fallback (its
output whole: the stacked axis, 2, does not divide 8), while ``StackInfo`` (``ops_info/
pack_info.cc``) keeps the inputs' batch cut and inserts the stacked axis uncut; the plan then
predicted none of the 4 + 4 AllGathers (groups 2 and 4) MindSpore inserts between each Stack
and the following ``sum(0)`` and their 8 ReduceScatters. The StridedSlice masks and Squeeze
rules are read from ``strided_slice_info.cc`` (a shrunk dimension is never cut and leaves the
output) and ``activation_info.cc`` (``SqueezeInfo``: the squeezed dimensions leave the output).
"""
from __future__ import annotations

from smsg_ms.cost import operators
from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph

SPEC = "smsg_ms.networks.split_stack:build"


def _shapes(graph, op):
    return ([graph.tensors[t].shape for t in op.inputs],
            [graph.tensors[t].shape for t in op.outputs])


def test_stack_split_concat_plan_matches_mindspore(captured, shared_capture):
    plan = plan_graph(captured(SPEC), 8, network=SPEC, progress=False)
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    inserted = {row.key: row.inserted for row in rank.rows}
    # per block: Stack's (16, 4, 32) batch cut 8 → sum(0)'s default cut 2 of the stacked axis
    assert inserted.get(("AllGather", "forward", 2)) == 4
    assert inserted.get(("AllGather", "forward", 4)) == 4


def test_stack_keeps_the_inputs_cut_and_inserts_its_axis_uncut(captured):
    graph = captured(SPEC)
    op = next(o for o in graph.ops if o.type == "Stack")
    spec = operators.describe(op, *_shapes(graph, op))
    assert len(set(spec.inputs)) == 1                      # one strategy for every input
    stacked = spec.outputs[0][0]
    assert stacked in spec.fixed and stacked not in spec.inputs[0]
    assert spec.outputs[0][1:] == spec.inputs[0]
    assert spec.cuttable() == spec.inputs[0]               # every input dimension may be cut


def test_shrunk_and_squeezed_dimensions_leave_the_output(captured):
    graph = captured(SPEC)
    slices = [o for o in graph.ops if o.type == "StridedSlice"]
    last = next(o for o in slices if o.attrs.get("shrink_axis_mask"))   # x[:, -1, :]
    spec = operators.describe(last, *_shapes(graph, last))
    x = spec.inputs[0]
    assert spec.outputs[0] == x[0] + x[2]
    assert spec.cuttable() == x[0] + x[2]
    squeeze = next(o for o in graph.ops if o.type == "Squeeze")          # (16, 1, 32) → (16, 32)
    spec = operators.describe(squeeze, *_shapes(graph, squeeze))
    x = spec.inputs[0]
    assert spec.outputs[0] == x[0] + x[2] and spec.cuttable() == x[0] + x[2]


def test_rejection_names_the_unknown_operator_and_its_cell(captured, shared_capture):
    """MindSpore refuses ``nn.LSTM``'s training graph in semi-auto parallel (its own message
    names no operator); ``check``'s one line names the LSTM, its cell and what to do."""
    spec = "smsg_ms.networks.recurrent:build"
    plan = plan_graph(captured(spec), 8, network=spec, progress=False)
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error and "\n" not in rank.error
    assert "split_size" in rank.error                      # MindSpore's own reason, first
    assert "LSTM in Default/lstm-LSTM/rnn-_DynamicLSTMCPUGPU" in rank.error
    assert "replace that cell" in rank.error


def test_functional_transpose_cuts_its_only_input_the_weight(captured, shared_capture):
    """``x @ ops.transpose(w, (1, 0))``: MindSpore's base batch-split rule cuts the weight the
    Transpose reads alone (the dry-run: one AllGather of it per block, its ReduceScatter, no
    gradient AllReduce of ``w``); the model kept it whole (2 mismatches per kind before)."""
    spec = "smsg_ms.networks.transposed_weight:build"
    plan = plan_graph(captured(spec), 8, network=spec, progress=False)
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    inserted = {row.key: row.inserted for row in rank.rows}
    assert inserted.get(("AllGather", "forward", 8)) == 2
    assert inserted.get(("AllReduce", "grad_sync", 8)) == 2      # the biases only
