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


def _check_rows(spec: str, **options):
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_network

    plan = plan_network(spec, 8, progress=False, **options)
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    return report, {r.key: (r.predicted, r.inserted) for r in report.ranks[0].rows}


def test_backward_allreduces_are_mindspores():
    report, rows = _check_rows(SPEC)
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


def test_gathers_of_one_split_that_disagree_on_the_output_scatter_back_per_reader():
    """``smsg_ms.networks.split_gathers:build`` (DeepSeek-V3's ``q_nope, q_pe = split(q)``,
    ``q_pe`` read twice, in small): both outputs of the Split gathered, ``b`` for two readers.
    MindSpore's ``MergeComm`` keys the three AllGathers by the Split and finds two output
    indices (``get_item_index``), so it merges none: ``b``'s two chains each get their
    ReduceScatter, three in all (two before the rule). With ``a`` not gathered, ``b``'s two
    AllGathers agree and are merged: one ReduceScatter for ``b``, one for ``a * w3`` (cut on
    ``seq``) gathered into the batch-cut Add. Oracle: MindSpore's dry-run compile (its
    ``merge_comm`` IR dump shows the three AllGathers of the first case unmerged)."""
    spec = "smsg_ms.networks.split_gathers:build"
    report, rows = _check_rows(spec)
    assert rows[("AllGather", "forward", 8)] == (2, 2), rows
    assert rows[("ReduceScatter", "backward", 8)] == (3, 3), rows
    assert report.ok, rows
    report, rows = _check_rows(spec, gather_both=False)
    assert rows[("AllGather", "forward", 8)] == (2, 2), rows
    assert rows[("ReduceScatter", "backward", 8)] == (2, 2), rows
    assert report.ok, rows


def test_a_later_allgather_of_each_readers_chain_scatters_back_per_reader():
    """``smsg_ms.networks.two_step_gathers:build``: ``h`` cut ``(8, 1)`` read by two
    operators cut ``(1, 4)``, each read a 2-way then a 4-way AllGather. ``MergeComm`` shares
    the first (both read ``h``, and agree); the second reads its own chain's first, so each
    read keeps its 4-way ReduceScatter: one 2-way and two 4-way in the backward (one 4-way
    predicted before). Oracle: MindSpore's dry-run compile. Its gradient sync: ``w1`` and
    ``w2`` (cut ``(1, 4)``, 2 replicas) have one gradient, ``dc * h`` (the Add gives both
    products the same ``dout``, and both read the one gathered ``h``): one 2-way AllReduce,
    which both ``ApplyMomentum`` read in the compiled graph (two predicted before)."""
    report, rows = _check_rows("smsg_ms.networks.two_step_gathers:build")
    assert rows[("AllGather", "forward", 2)] == (1, 1), rows
    assert rows[("AllGather", "forward", 4)] == (1, 1), rows
    assert rows[("ReduceScatter", "backward", 2)] == (1, 1), rows
    assert rows[("ReduceScatter", "backward", 4)] == (2, 2), rows
    assert rows[("AllReduce", "grad_sync", 2)] == (1, 1), rows
    assert report.ok, rows


def test_weights_with_one_gradient_expression_share_their_allreduce():
    """``smsg_ms.networks.twin_dense:build``: ``(x @ w1 + b1) + (y @ w2 + b2)``, every weight
    and bias replicated 2 ways. MindSpore's CSE (after autodiff) merges equal gradient
    expressions and then their mirror AllReduces: with ``y = relu(x)`` the biases' gradients
    are equal (3 AllReduces for 4 weights), with ``y = x`` the matrices' too (2); a ``Sub``
    gives the second layer ``-dout`` (4); biases added by broadcast ``Add`` operators after
    the sum get the one ``dout`` summed over the rows (3). Oracle: MindSpore's dry-run compile
    of each (the counts by hand from the above agree)."""
    spec = "smsg_ms.networks.twin_dense:build"
    for options, syncs in (({}, 3), ({"same_input": True}, 2), ({"combine": "sub"}, 4),
                           ({"biases": "added"}, 3)):
        report, rows = _check_rows(spec, **options)
        assert rows[("AllReduce", "grad_sync", 2)] == (syncs, syncs), (options, rows)
        assert report.ok, (options, rows)


def test_a_pipeline_stage_keeps_the_backward_allreduce_of_a_constant_gradient():
    """``smsg_ms.networks.stage_aux:build`` (mindformers' MoE auxiliary loss summed into the
    loss, in small) on 2 stages of 4 devices, 2 micro-batches: each block's ``mean(h)`` of the
    batch-cut activation and the network's ``mean(x_L)`` are a forward AllReduce each, with a
    constant gradient. The pipelined compile keeps their backward AllReduce (Qwen3-MoE's and
    DeepSeek-V3's ``check 8 p2``: 2 and 4 predicted, 4 and 6 inserted, before). By hand, per
    micro-batch: stage 0 has layer 0's mean (1 forward, 1 backward), stage 1 layer 1's and the
    output's (2 and 2); times 2 micro-batches. Oracle: the dry-run."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.integration.pipeline import ranks_per_stage
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined("smsg_ms.networks.stage_aux:build", 8, global_batch=32,
                                  stages=2, micro_batches=2)
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    for rank, want in zip(report.ranks, (2, 4)):
        rows = {r.key: (r.predicted, r.inserted) for r in rank.rows}
        assert rows[("AllReduce", "forward", 4)] == (want, want), rows
        assert rows[("AllReduce", "backward", 4)] == (want, want), rows
    assert report.ok


def test_an_inplace_add_of_two_inputs_gathered_alike_scatters_back_once():
    """``c = a; c += b`` (an ``InplaceAddExt`` without strategy, mindcv Res2Net's ``out +=
    identity``), both inputs redistributed from a ``batch`` cut to its default ``seq`` cut:
    2 forward AllGathers, one backward ReduceScatter (before: 2 predicted; Res2Net-50 check 8:
    12 predicted, 11 inserted). Oracle: the dry-run."""
    report, rows = _check_rows("smsg_ms.networks.residual_gathers:build", inplace=True)
    assert rows[("AllGather", "forward", 8)] == (2, 2), rows
    assert rows[("ReduceScatter", "backward", 8)] == (1, 1), rows
    assert report.ok, rows


#: (stage_aux coefficients, backward AllReduces per stage) on 2 stages of 4 devices, 2
#: micro-batches; the counts are the dry-run's (MindSpore's CSE merges a stage's equal
#: ``Mul(dout, c)`` per micro-batch, ``smsg_ms.planner.constant_gradients``)
EQUAL_CONSTANTS = (
    # stage 0 layers 0-1 (0.01 twice: 1 per micro-batch), stage 1 layers 2-3 (0.01 twice: 1)
    # and the output mean (1): 4 and 6 before the rule
    ((0.01, 0.01, 0.01, 0.01), (2, 4)),
    # stage 0 layers 0-2 (0.01, 0.02, 0.01: 2), stage 1 layers 3-5 (0.02, 0.02, 0.03: 2) and
    # the output mean (1): 6 and 8 before the rule
    ((0.01, 0.02, 0.01, 0.02, 0.02, 0.03), (4, 6)),
)
#: ``two_sums``, 4 blocks of 0.01, planned 3 | 1: stage 0's means add into two sums that
#: cross the border, ``a + m0 + m2`` and ``b + m1``; their gradients are one expression on
#: stage 1 (the Adds pass ``dout`` on) but two Receives on stage 0: 2 per micro-batch there
#: (merged through the border: 1, 2 predicted for 4), stage 1 layer 3 and the output mean 2
TWO_SUMS = ({"layers": 4, "two_sums": True}, (4, 4))


def test_constants_are_fingerprinted_by_value(captured):
    """The capture records a constant's value fingerprint: the blocks' ``aux_scale``
    coefficients of ``stage_aux`` are equal exactly where the coefficients given are (the
    oracle: the network's arguments)."""
    coefficients = EQUAL_CONSTANTS[1][0]
    graph = captured("smsg_ms.networks.stage_aux:build", layers=len(coefficients),
                     coefficients=coefficients)
    scales = {op.prim_path: graph.tensors[op.inputs[1]] for op in graph.ops
              if op.prim_path and op.prim_path.endswith(".aux_scale")}
    values = [scales[f"layers.{i}.aux_scale"] for i in range(len(coefficients))]
    assert all(t.kind == "constant" and len(t.value) == 16 for t in values)
    for a, ca in zip(values, coefficients):
        for b, cb in zip(values, coefficients):
            assert (a.value == b.value) == (ca == cb), (ca, cb)
    again = type(graph).from_json(graph.to_json())
    assert again.tensors[values[0].name].value == values[0].value
    assert again.fingerprint() == graph.fingerprint()


def test_a_pipeline_stage_merges_the_allreduces_of_equal_constant_gradients():
    """``stage_aux`` with more blocks than stages: on one stage, blocks that scale their
    auxiliary mean by one coefficient have the same gradient expression ``Mul(dout, c)``
    (``dout`` received from the next stage, or the loss's), and MindSpore's CSE after autodiff
    (``frontend/optimizer/cse.cc``: tensor ``ValueNode``\\ s equal in value are one input)
    leaves one backward AllReduce of them per micro-batch; different coefficients keep theirs,
    and so do gradients received from the next stage as two tensors (``two_sums``)
    (DeepSeek-V3 ``check 8 p2``: its two routers' auxiliary losses on stage 1, 8 predicted /
    6 inserted before). Oracle: the dry-run compile of each (counts by hand above)."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.integration.pipeline import ranks_per_stage
    from smsg_ms.planner import plan_network_pipelined

    spec = "smsg_ms.networks.stage_aux:build"
    cases = [({"layers": len(c), "coefficients": c}, want) for c, want in EQUAL_CONSTANTS]
    for options, want in cases + [TWO_SUMS]:
        plan = plan_network_pipelined(spec, 8, global_batch=32, stages=2, micro_batches=2,
                                      **options)
        report = check_plan(plan, ranks_per_stage(8, 2))
        assert [r.error for r in report.ranks] == [None, None]
        for rank, backward in zip(report.ranks, want):
            rows = {r.key: (r.predicted, r.inserted) for r in rank.rows}
            assert rows[("AllReduce", "backward", 4)] == (backward, backward), (options, rows)
        assert report.ok, options


#: (stage_aux options, backward AllReduces) on one stage of 8 devices, counts from the
#: dry-run: the ``(1, 1)`` loss keeps its bprop a CNode, so no constant gradient is folded
#: (``opt_a`` dump: ``RealDiv(Tensor[[1]], 1)``); the CSE merges the blocks' equal ones
ONE_STAGE_KEPT = (
    ({"layers": 2, "coefficients": (0.01, 0.02)}, 3),   # 2 blocks and the output mean
    ({"layers": 2}, 2),                                  # 0.01 twice: one, and the output mean
)


def test_one_stage_keeps_constant_gradients_of_a_rank_two_loss():
    """``stage_aux`` planned on one stage: ``AllReduceConstElim`` drops only an AllReduce of a
    ``ValueNode``, and the ``(1, 1)`` loss's bprop is no value, so its constant gradients'
    backward AllReduces stay (0 predicted before, the fold); the ``(1,)`` loss of
    ``aux_loss`` folds (``test_backward_allreduces_are_mindspores``: 1 / 1, the numerator's
    only). Oracle: the dry-run (``opt_a`` IR dumps of both)."""
    from smsg_ms.cost.gradient_flow import folds_loss_gradient
    from smsg_ms.graph.capture import capture_network

    assert not folds_loss_gradient(capture_network("smsg_ms.networks.stage_aux:build"))
    assert folds_loss_gradient(capture_network(SPEC))
    for options, want in ONE_STAGE_KEPT:
        report, rows = _check_rows("smsg_ms.networks.stage_aux:build", **options)
        assert rows[("AllReduce", "backward", 8)] == (want, want), (options, rows)
        assert report.ok, (options, rows)
