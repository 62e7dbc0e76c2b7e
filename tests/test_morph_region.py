"""A ``Morph`` whose layout the network fixes (mindformers' ``parallel_core`` linear layers) is
priced as MindSpore compiles it: the region at the network's layout, nothing inside it.

Network: ``smsg_ms.networks.morph_linear:build``: ``x (64, 16, 32)`` ``(seq, batch, hidden)`` →
ReLU → Morph(Reshape → MatMul ``w (32, 64)`` → Reshape) → ReLU; the Morph's layouts over
``(dp, tp) = (devices, 1)``: input ``(None, dp, None)`` (batch cut on dimension 1), weight
whole, output ``(None, dp, tp)``.

Hand derivation at 8 devices: the ReLUs can take the batch cut on dimension 1 (8 divides 16),
so no tensor needs a redistribution at the Morph's input or output; the weight is whole on
every device and its gradient sums the 8 batch slices: one gradient AllReduce over 8 devices
of 32 * 64 float32. MindSpore's own compile (the dry-run) must insert exactly that. Before the
regions, the capture saw only the body's Reshape/MatMul, priced at MindSpore's batch-parallel
default (dimension 0, the sequence), and the check failed with 2 AllGathers and 1
ReduceScatter inserted, none predicted (the mindformers Qwen3 / TeleChat3 pattern).
"""
from __future__ import annotations

import json

from smsg_ms.cost.model import CostModel
from smsg_ms.cost.morph_region import fitted_layout
from smsg_ms.graph.morph_regions import ENTRY_ATTR, EXIT_ATTR, MORPH_ATTR

SPEC = "smsg_ms.networks.morph_linear:build"
HIDDEN, OUT = 32, 64


def test_fitted_layout_grows_the_data_parallel_axis():
    """mindformers writes ``(dp, cp, tp)`` with ``dp`` = the run's devices: captured on one
    device as ``(1, 1, 1)``, at 8 devices ``dp`` = 8 (by hand); an unnamed matrix keeps the
    older rule (a replica axis takes the shortfall: every axis is named by the tensor map
    here, so no layout)."""
    lay = {"device_matrix": [1, 1, 1], "tensor_map": [1, 2, -1], "alias_name": ["dp", "cp", "tp"]}
    got = fitted_layout(lay, 8)
    assert got.device_matrix == (8, 1, 1) and got.cuts == (1, 8, 1)
    assert fitted_layout(dict(lay, alias_name=[], tensor_map=[1, 2, 0]), 8) is None


def test_fitted_layout_of_multi_axis_maps_and_moe_axes():
    """mindformers' MoE layer (``moe_layer.py``, ``ffn.py``): the permute's input
    ``layout("dp", "cp_tp", "None")`` maps the sequence to two axes, its output
    ``layout_moe("dp_cp", "None", "None")`` over ``("dp_ex_ep", "ep")``, both captured on one
    device. At 8 devices, by hand: ``dp`` (resp. ``dp_ex_ep``, data parallel outside expert
    parallel, ``ep = 1``) takes the 8 devices; a dimension mapped to several axes is cut by the
    one over 1 (8 on ``dp_cp``), whole when all are 1 (``cp_tp``). Two axes over 1 on one
    dimension: no layout (not modelled)."""
    perm_in = {"device_matrix": [1, 1, 1], "tensor_map": [2, [1, 0], -1],
               "alias_name": ["dp", "cp", "tp"]}
    got = fitted_layout(perm_in, 8)
    assert got.device_matrix == (8, 1, 1) and got.cuts == (8, 1, 1)
    perm_out = {"device_matrix": [1, 1], "tensor_map": [[1, 0], -1, -1],
                "alias_name": ["dp_ex_ep", "ep"]}
    got = fitted_layout(perm_out, 8)
    assert got.device_matrix == (8, 1) and got.cuts == (8, 1, 1)
    assert fitted_layout(dict(perm_out, device_matrix=[2, 4]), 8) is None


def test_morph_fns_with_shape_or_defaulted_arguments_are_wrapped():
    """A ``Morph`` ``fn`` taking a shape tuple beside its laid-out input, or a defaulted
    argument, is wrapped (its defaults kept); ``*args`` is not (MindSpore's ``Morph`` refuses
    it)."""
    from mindspore import Layout
    from mindspore.ops.operations import Morph

    from smsg_ms.graph.morph_regions import _arity, mark_morph_fns, unmark_morph_fns

    def reshape_fn(x, shp):
        return x.reshape(shp)

    def defaulted(x, y, n=None):
        return x + y

    def star(*args):
        return args[0]

    def first(*args):
        return args[0]

    assert _arity(reshape_fn) == (2, ()) and _arity(defaulted) == (3, (None,))
    assert _arity(star) is None
    lay = Layout((1, 1), ("dp", "tp"))
    prims = {}
    for name, fn, ins in (("r", reshape_fn, (lay("dp", "None"),)),
                          ("d", defaulted, (lay("dp", "None"), lay("dp", "None"))),
                          ("s", star, (lay("dp", "None"),))):
        prim = Morph(fn, first, first).add_prim_attr("self_define_shard", True)
        prim.shard(in_strategy=ins, out_strategy=(lay("dp", "None"),))
        prims[name] = prim
    assert mark_morph_fns(prims) == ["d", "r"]
    assert prims["d"].__morph_fn__.__defaults__ == (None,)
    unmark_morph_fns(prims)
    assert prims["r"].__morph_fn__ is reshape_fn and prims["d"].__morph_fn__ is defaulted


def test_the_morph_body_is_one_region_at_the_network_layout(shared_capture):
    graph = shared_capture(SPEC)
    assert not [op for op in graph.ops if op.type == "Identity"]   # the marks are gone
    body = [op for op in graph.ops if MORPH_ATTR in op.attrs]
    assert [op.type for op in body] == ["Reshape", "MatMul", "Reshape"]
    assert {op.attrs[MORPH_ATTR] for op in body} == {"lin.morph"}
    first, mm, last = body
    assert list(json.loads(first.attrs[ENTRY_ATTR])) == ["0"]
    assert list(json.loads(mm.attrs[ENTRY_ATTR])) == ["1"]          # the weight
    assert list(json.loads(last.attrs[EXIT_ATTR])) == ["0"]
    model = CostModel(graph, 8)
    (opt,) = model.options(first)
    assert opt.in_layouts[0].cuts == (1, 8, 1) and opt.collectives == []
    (opt,) = model.options(mm)
    assert opt.in_layouts[1].cuts == (1, 1)
    assert [(c.kind, c.group, c.phase, c.full_bytes) for c in opt.collectives] == [
        ("AllReduce", 8, "grad_sync", HIDDEN * OUT * 4)]
    (opt,) = model.options(last)
    assert opt.out_layouts[0].cuts == (1, 8, 1)


def test_a_plan_around_a_morph_passes_check(shared_capture):
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph

    plan = plan_graph(shared_capture(SPEC), 8, progress=False, network=SPEC, options={})
    assert plan.strategies["relu"] == [[1, 8, 1]]     # the batch cut the Morph takes
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]
    grad = [row for row in report.ranks[0].rows if row.key == ("AllReduce", "grad_sync", 8)]
    assert [(g.inserted, g.inserted_bytes) for g in grad] == [(1, HIDDEN * OUT * 4)]
    compared = [r for r in report.ranks[0].rows if "loss" not in r.key[1]]
    assert {r.key[0] for r in compared if r.inserted} == {"AllReduce"}


def test_a_pipelined_plan_of_morph_layers_passes_check(capture_of, shared_capture):
    """Pipelined (2 stages of 4 devices, 2 micro-batches) over 4 Morph layers
    (``layers=4``: ``x + Morph(ReLU(x))`` per block, weight ``(32, 32)``, batch 16).

    Before, MindSpore refused every such plan inside its Morph pass ("The pointer[abs] is
    null", ``irpass/morph.cc``, compiling ``_TrainGradAccuStepCell``: the Qwen3 / TeleChat3
    pipelined rows); with the micro-batch graph shared (``pipeline_train_cell``) it compiles.
    By hand: each stage holds 2 blocks; the Morph's layout keeps its weight whole on the
    stage's 4 devices (``dp`` = 4, a stage's devices), so each stage AllReduces 2 gradients of
    32·32 float32 over 4 devices once per step; the border tensor is a micro-batch of 8 cut
    4 ways on dimension 1: ``(64, 2, 32)`` float32, Sent and Received once per micro-batch.
    """
    from smsg_ms.integration.check import check_plan
    from smsg_ms.integration.pipeline import ranks_per_stage
    from smsg_ms.planner import plan_network_pipelined

    plan = plan_network_pipelined(SPEC, 8, global_batch=16, stages=2, micro_batches=2,
                                  capture=capture_of(SPEC, layers=4), layers=4)
    assert plan.pipeline["stage_of_block"] == {"blocks.0": 0, "blocks.1": 0, "blocks.2": 1,
                                               "blocks.3": 1}
    report = check_plan(plan, ranks_per_stage(8, 2))
    assert [r.error for r in report.ranks] == [None, None]
    assert report.ok, [(r.stage, [(x.key, x.predicted, x.inserted) for x in r.rows + r.p2p])
                       for r in report.ranks]
    for rank in report.ranks:
        grad = {row.key: (row.inserted, row.inserted_bytes) for row in rank.rows}
        assert grad[("AllReduce", "grad_sync", 4)] == (2, 2 * HIDDEN * HIDDEN * 4)
        border = {(p.key[0], p.key[2]): p.inserted for p in rank.p2p}
        assert set(border.values()) == {2} and {k[1] for k in border} == {(64, 2, HIDDEN)}
