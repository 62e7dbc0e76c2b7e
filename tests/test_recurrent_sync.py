"""Gradient AllReduces of a weight read in every step of a recurrence, against MindSpore's
compiler (CPU dry-run, 8 devices).

``nn.GRU`` (:func:`smsg_ms.networks.recurrent.build_gru`, 3 steps): its ``_DynamicRNNBase``
receives each weight once as a call argument, so MindSpore's graph loads it once and
``DoInsertMirrorOps`` (``step_parallel.cc``) gives each of the 3 reads its own
``_MirrorOperator``: 4 weights x 3 steps = 12 AllReduces (the plan predicted 4 before). Its
``ops.Stack()(outputs)`` of a Python list reads the list's tensors (``make_list`` is plumbing,
as ``MakeList``), so the Stack family lays it out (one AllGather too few before). The
control (:func:`~smsg_ms.networks.recurrent.build_loop`) reads ``self.w`` in each of 3 steps,
one Load per read, and MindSpore shares one AllReduce. Expected counts: MindSpore's compile of
the plan (``check``).
"""
from __future__ import annotations

from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph

KEY = ("AllReduce", "grad_sync", 8)


def _grad_sync(spec, captured):
    plan = plan_graph(captured(spec), 8, network=spec, progress=False)
    rank = check_plan(plan, [0]).ranks[0]
    assert rank.error is None, rank.error
    bad = [(row.key, row.predicted, row.inserted) for row in rank.rows if not row.ok]
    assert not bad, f"(key, predicted, inserted): {bad}"
    row = next(r for r in rank.rows if r.key == KEY)
    return row.predicted, row.inserted


def test_gru_weights_sync_once_per_step(captured, shared_capture):
    predicted, inserted = _grad_sync("smsg_ms.networks.recurrent:build_gru", captured)
    assert inserted == 12
    assert predicted == inserted


def test_weight_read_by_attribute_each_step_syncs_once(captured, shared_capture):
    predicted, inserted = _grad_sync("smsg_ms.networks.recurrent:build_loop", captured)
    assert inserted == 1
    assert predicted == inserted


def test_only_foreign_functional_reads_are_counted(captured):
    gru = captured("smsg_ms.networks.recurrent:build_gru")
    assert {t.name: t.foreign_reads for t in gru.parameters()} == {
        "gru.weight_ih_l0": 3, "gru.weight_hh_l0": 3, "gru.bias_ih_l0": 3, "gru.bias_hh_l0": 3}
    loop = captured("smsg_ms.networks.recurrent:build_loop")
    assert [t.foreign_reads for t in loop.parameters()] == [0]

