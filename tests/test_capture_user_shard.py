"""A network whose own ``shard()`` needs 8 devices still captures (on one device) and scores.

Hand derivation for ``y = x @ w``, x (B, K) cut (2, 1), w (K, N) cut (1, 4), 8 devices: K is
not cut, so the forward needs no AllReduce; x is a data input, so no dx; dw = x^T dy sums over
B, which is cut 2-way, and w's slice (K, N/4) is repeated on those 2 devices: one gradient
AllReduce in a group of 2 over K*N/4 float32 elements. Nothing else.

The dry-run tests plan from ``shared_capture`` (conftest): ``check_plan``'s fingerprint capture
reuses the test's graph, one capture child per network instead of two.
"""
from __future__ import annotations

from smsg_ms.compare.score import score
from smsg_ms.cost.model import CostModel
from smsg_ms.graph.capture import capture_network

SPEC = "smsg_ms.networks.user_shard:build"
B, K, N = 16, 32, 64
USER = [[2, 1], [1, 4]]


def test_user_shard_captures_and_scores():
    graph = capture_network(SPEC)
    (mm,) = [op for op in graph.ops if op.type == "MatMul"]
    assert mm.prim_path == "mm"
    assert any("shard()" in w and "mm" in w for w in graph.warnings)
    assert graph.tensors[mm.inputs[0]].shape == (B, K)  # global shapes (1-device capture)
    got = score(SPEC, 8, {"mm": USER}, graph=graph)
    assert got["pinned"] == 1 and got["unknown"] == [] and got["unavailable"] == []
    cost = CostModel(graph, 8).check(mm, ((2, 1), (1, 4)))
    kinds = [(c.kind, c.group, c.phase, c.full_bytes) for c in cost.collectives]
    assert kinds == [("AllReduce", 2, "grad_sync", K * N // 4 * 4)]


def test_a_layout_the_network_fixes_is_kept_and_the_plan_compiles(shared_capture):
    """``user_shard.self_defined``: its ReLU carries ``self_define_shard`` and a ``Layout`` that
    cuts the batch 8 ways. MindSpore accepts no strategy for such a primitive
    (``self_define_shard_info.cc``) and, with its layout cleared, rejects the compile ("tuple
    in tuple input does not support GenerateBatchParallelStrategy", as before this fix): the
    plan does not write it back, `check` keeps its layout and compiles. Expected collectives by
    hand: x (16, 32) cut 8 ways on the batch throughout (the ReLU's layout and the plan's
    data-parallel MatMul agree), w (32, 64) whole: one gradient AllReduce over 8 devices of
    32 * 64 float32, nothing else predicted."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph

    spec = "smsg_ms.networks.user_shard:self_defined"
    graph = shared_capture(spec)
    plan = plan_graph(graph, 8, progress=False, network=spec, options={})
    relu = next(d for d in plan.decisions if d.name == "relu")
    assert not relu.shardable and "relu" not in plan.strategies
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok
    grad = [row for row in report.ranks[0].rows if row.key == ("AllReduce", "grad_sync", 8)]
    assert [(g.inserted, g.inserted_bytes) for g in grad] == [(1, 32 * 64 * 4)]


def test_a_kept_layout_written_for_eight_devices_is_fitted_to_four(shared_capture):
    """``user_shard.written_for_eight``: the ReLU's layout is ``Layout((8, 1))`` whatever the
    run (as mindformers GLM2's ``tile_kv`` writes ``(1, 4, 1, 2)``). On 4 devices MindSpore
    refused it before this fix ("The configured device_matrix {8, 1} accumulate value 8 dose
    not equal to the device number in one stage 4"); fitted, its outer axis gives up the
    excess: ``(4, 1)``, the batch cut 4 ways, which is the plan's data-parallel MatMul. Expected
    by hand as in the test above, at 4 devices: one gradient AllReduce over 4 devices of
    32 * 64 float32, nothing else."""
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph

    spec = "smsg_ms.networks.user_shard:written_for_eight"
    plan = plan_graph(shared_capture(spec), 4, progress=False, network=spec, options={})
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok
    grad = [row for row in report.ranks[0].rows if row.key == ("AllReduce", "grad_sync", 4)]
    assert [(g.inserted, g.inserted_bytes) for g in grad] == [(1, 32 * 64 * 4)]


def test_fitted_device_matrix_by_hand():
    """Outer axes give up an excess first; a shortfall goes to the outermost axis no tensor map
    names; otherwise nothing (derivations in ``smsg_ms/integration/kept_layouts.py``)."""
    from smsg_ms.cost.kept_layout import fitted_device_matrix

    # GLM2's tile_kv (dp, cp, rep, mp) = (1, 4, 1, 2), rep unused, in a stage of 4: 8/4 = 2
    # taken from the outermost axis that has a factor 2 (cp)
    assert fitted_device_matrix((1, 4, 1, 2), 4, {0, 1, 3}) == (1, 2, 1, 2)
    assert fitted_device_matrix((1, 4, 1, 2), 2, {0, 1, 3}) == (1, 1, 1, 2)
    # 16 devices: the replica axis rep grows by 2
    assert fitted_device_matrix((1, 4, 1, 2), 16, {0, 1, 3}) == (1, 4, 2, 2)
    # no replica axis to grow, not a divisor either way, or nothing to change
    assert fitted_device_matrix((2, 2), 8, {0, 1}) is None
    assert fitted_device_matrix((3,), 4, {0}) is None
    assert fitted_device_matrix((4, 2), 8, {0}) is None


def test_a_kept_layout_is_the_one_choice_of_its_primitive(shared_capture):
    """``user_shard.columns_for_eight``: the ReLU keeps ``x`` (16, 32) cut (1, 8) (columns).
    The capture records that layout; the plan's only option for the ReLU is it, so the
    prediction prices what MindSpore does around it (the data input re-cut into it, the MatMul
    after it) and equals what the compile inserts (``report.ok``). Before this, the ReLU was
    priced at the batch cut the planner preferred and MindSpore's extra collectives were
    unpredicted."""
    from smsg_ms.cost.kept_layout import KEPT_LAYOUT_ATTR
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph

    spec = "smsg_ms.networks.user_shard:columns_for_eight"
    graph = shared_capture(spec)
    (relu,) = [op for op in graph.ops if op.type == "ReLU"]
    assert KEPT_LAYOUT_ATTR in relu.attrs
    assert [o.strategy for o in CostModel(graph, 8).options(relu)] == [((1, 8),)]
    plan = plan_graph(graph, 8, progress=False, network=spec, options={})
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]


def test_own_strategies_are_kept_unless_replaced(shared_capture):
    """#14 item 2: the network's own ``mm.shard(((2, 1), (1, 4)))`` (its code, USER) is the
    plan's strategy on 8 devices, noted as kept; ``replace_strategies`` plans it anew: the
    plan of the same graph without the recorded strategy (a network with no ``shard()``). On 4
    devices USER (8 devices) does not fit: planned anew, as MindSpore would refuse it there."""
    import copy

    from smsg_ms.cost.kept_layout import OWN_STRATEGY_ATTR
    from smsg_ms.planner import plan_graph

    graph = shared_capture(SPEC)
    (mm,) = [op for op in graph.ops if op.type == "MatMul"]
    assert OWN_STRATEGY_ATTR in mm.attrs
    kept = plan_graph(graph, 8, progress=False, network=SPEC, options={})
    assert kept.strategies["mm"] == USER
    assert any("own shard()" in n for n in kept.decisions[0].notes)
    bare = copy.deepcopy(graph)
    del next(op for op in bare.ops if op.type == "MatMul").attrs[OWN_STRATEGY_ATTR]
    anew = plan_graph(graph, 8, progress=False, network=SPEC, options={},
                      replace_strategies=True)
    assert anew.strategies == plan_graph(bare, 8, progress=False, network=SPEC,
                                         options={}).strategies
    assert anew.strategies["mm"] != USER
    four = plan_graph(graph, 4, progress=False, network=SPEC, options={})
    assert not any("own shard()" in n for d in four.decisions for n in d.notes)


def test_pipelined_plans_keep_own_strategies_unless_replaced(shared_capture):
    """``--replace-strategies`` with ``--pipeline``: ``user_shard.blocks`` (two blocks, each
    MatMul carrying its own ``shard(((2, 1), (1, 4)))``) on 16 devices in 2 stages, 8 devices a
    stage where that strategy fits. Kept (default): every block's MatMul is USER, noted as kept.
    Replaced: the plan of the same graph without the recorded strategies (a network with no
    ``shard()``), the strategy planned anew. One capture (micro-batch 8)."""
    import copy

    from smsg_ms.cost.kept_layout import OWN_STRATEGY_ATTR
    from smsg_ms.planner import plan_network_pipelined

    spec = "smsg_ms.networks.user_shard:blocks"
    graph = shared_capture(spec, batch=8)
    bare = copy.deepcopy(graph)
    for op in bare.ops:
        op.attrs.pop(OWN_STRATEGY_ATTR, None)

    def plan(g, **kw):
        def capture(batch):
            assert batch == 8, batch      # 16 samples in 2 micro-batches
            return g
        return plan_network_pipelined(spec, 16, global_batch=16, stages=2, micro_batches=2,
                                      capture=capture, **kw)

    kept = plan(graph)
    mms = [name for name in kept.strategies if name.endswith(".mm")]
    assert len(mms) == 2 and all(kept.strategies[m] == USER for m in mms)
    assert sum("own shard()" in n for d in kept.decisions for n in d.notes) == 2
    anew = plan(graph, replace_strategies=True)
    assert anew.strategies == plan(bare).strategies
    assert all(anew.strategies[m] != USER for m in mms)
    assert not any("own shard()" in n for d in anew.decisions for n in d.notes)


def test_a_tuple_input_layout_for_eight_devices_captures_on_one():
    """``user_shard.concat_for_eight``: a Concat laid out with a tuple of ``Layout`` objects
    over 8 devices (one per tuple element, as mindformers' MTP ``concat`` at ``dp = 8``).
    MindSpore refused it on the capture's one device before the fix ("The configured
    device_matrix ... accumulate value 8 dose not equal to the device number in one stage
    1"): its layouts now pass over a device matrix of ones, as single layouts do; the
    capture has the global shapes and names the primitive in its warning, and the layouts
    the network fixes are recorded as written (one per tuple element, 8 devices)."""
    import json

    from smsg_ms.cost.kept_layout import KEPT_LAYOUT_ATTR

    graph = capture_network("smsg_ms.networks.user_shard:concat_for_eight")
    (cat,) = [op for op in graph.ops if op.type == "Concat"]
    assert cat.prim_path == "concat"
    assert graph.tensors[cat.outputs[0]].shape == (B, 2 * K)
    assert any("shard()" in w and "concat" in w for w in graph.warnings), graph.warnings
    kept = json.loads(cat.attrs[KEPT_LAYOUT_ATTR])
    assert [(v["device_matrix"], v["tensor_map"]) for v in kept] == [([8, 1], [1, -1])] * 2
