"""Redistribution through a Reshape (D9) against MindSpore's parallel compiler (dry-run).

Each case: ReLU (source strategy) → Reshape → ReLU (destination strategy). MindSpore's
``ReshapeInfo`` redistributes the producer's layout to the consumer's through the reshape;
when a layout cannot be expanded onto the common refinement of the two shapes (a cut whose
chunks straddle the split dimensions: 96 of 12 × 8 cut 8 is 1.5 heads) it gathers the whole
tensor and slices; else it expands both layouts onto one shape and device matrix and
redistributes once (D11). Predicted: the producer's and consumer's own collectives plus
``CostModel.reshape_redistribution``. Observed: the collectives
under the case's scope, forward per case, backward over the whole compile (D1).
"""
from __future__ import annotations

from collections import Counter

import pytest

from smsg_ms.cost.layout import TensorLayout, front_split, maps_through_reshape, refined_shape
from smsg_ms.cost.model import CostModel
from smsg_ms.cost.redistribution_reshape import expand_device_matrix, unify_through_reshape
from smsg_ms.graph.model import OpGraph, OpNode, TensorInfo
from smsg_ms.dryrun import runner as dryrun
from test_cost_vs_mindspore import SPEC, act, backward_difference, observed

PREV = ["prev"]
HIDDEN, HEADS = (32, 96), (4, 8, 12, 8)    # 96 = 12 heads × 8


def chain(src_shape, src, dst_shape, dst):
    return [("ReLU", {}, [act(*src_shape)], [], [src]),
            ("Reshape", {}, [PREV], [list(dst_shape)], None),
            ("ReLU", {}, [PREV], [], [dst])]


def transposed(cuts, reader):
    """Transpose (8, 16) cut ``cuts`` → Reshape to 128 → ReLU cut ``reader``."""
    return [("Transpose", {}, [act(8, 16)], [[1, 0]], [list(cuts)]),
            ("Reshape", {}, [PREV], [[128]], None),
            ("ReLU", {}, [PREV], [], [[reader]])]


#: (name, steps, what MindSpore does, derived by hand, at 8 and 16 devices)
CASES = [
    # 96 cut 8: chunks of 12 = 1.5 heads; whole tensor (32·96·4 B = 12 KiB) gathered 8-way
    ("hidden 8 -> heads 4", chain(HIDDEN, [1, 8], HEADS, [1, 1, 4, 1])),
    # 96 cut 4: chunks of 24 = 3 heads, the same layout: nothing
    ("hidden 4 -> heads 4", chain(HIDDEN, [1, 4], HEADS, [1, 1, 4, 1])),
    # the consumer's 96 cut 8 cannot be written over heads: the 4-way heads cut gathered whole
    ("heads 4 -> hidden 8", chain(HEADS, [1, 1, 4, 1], HIDDEN, [1, 8])),
    # expandable: heads cut 2 moved to the head dimension, one 2-way AllGather of 12 KiB
    ("hidden 2 -> head dim 8", chain(HIDDEN, [1, 2], HEADS, [1, 1, 1, 8])),
    # 24 rows cut 8 (chunks of 3) into (6, 4): straddles, 6 KiB gathered 8-way
    ("rows 8 of 24 -> (6, 4)", chain((24, 64), [8, 1], (6, 4, 64), [2, 1, 4])),
    # 32 rows cut 8 = 4 × 2 of (4, 8): expandable, nothing
    ("rows 8 -> (4, 2)", chain(HIDDEN, [8, 1], HEADS, [4, 2, 1, 1])),
    ("hidden 8 -> heads 2 rows 4", chain(HIDDEN, [1, 8], HEADS, [4, 1, 2, 1])),
    ("heads 4 -> hidden 4", chain(HEADS, [1, 1, 4, 1], HIDDEN, [1, 4])),
    # gathered whole from the last dimension: heads 2-way (3 KiB), then rows 4-way (12 KiB)
    ("heads 2 rows 4 -> hidden 8", chain(HEADS, [4, 1, 2, 1], HIDDEN, [1, 8])),
    # merges and splits of cut axes (#14 item 3), (8, 16) float32 = 512 B, 64 B a device.
    # (8, 16) cut (2, 4) merged into 128 cut 8 = rows cut 8 on the refinement (8, 16): the
    # column cut is gathered (4-way, 256 B), the rows split further by a slice
    ("merge rows 2 cols 4 -> 8", chain((8, 16), [2, 4], (128,), [8])),
    # only the inner axis cut: each device's 2-element strides are 8 rows, no 128-chunk of
    # them exists: the 8-way column cut moves to the rows, AllGather then slice (512 B)
    ("merge cols 8 -> 8", chain((8, 16), [1, 8], (128,), [8])),
    # rows 4, cols 2: the 2-way column cut gathered (128 B), rows split 4 -> 8
    ("merge rows 4 cols 2 -> 8", chain((8, 16), [4, 2], (128,), [8])),
    # 128 cut 8 split into (8, 16) is rows 8 = (2 x 4); the minor 4 moves to the columns
    # (AllGather 4-way, 256 B)
    ("split 8 -> rows 2 cols 4", chain((128,), [8], (8, 16), [2, 4])),
    # a merge after a Transpose: (8, 16) cut (4, 2) leaves (16, 8) with the 2-way cut on its
    # rows over the minor device axis; MindSpore gathers the 4-way cut (of the new columns,
    # 256 B), then the 2-way one (512 B), then slices
    ("transposed merge -> 8", [("Transpose", {}, [act(8, 16)], [[1, 0]], [[4, 2]]),
                               ("Reshape", {}, [PREV], [[128]], None),
                               ("ReLU", {}, [PREV], [], [[8]])]),
    # D11: (8, 16) cut (2, 4) transposed leaves (16, 8) with the 4-way cut on its rows over the
    # minor device axis of (2, 4). MindSpore unifies (16, 8) and 128 cut 8 (8 = (2, 4)) on the
    # shape (2, 2, 4, 8) over three 2-way device axes a, b, c (major first): the source cuts
    # dims (0, 1, 3) by (b, c, a), the reader dims (0, 1, 2) by (a, b, c); every axis moves,
    # three 2-way AllGathers of the growing tensor (64 B a device: 128, 256, 512 B), then slices
    ("transposed merge, minor 4 -> 8", transposed((2, 4), 8)),
    # the reader cut 4: ReLU's device matrix (4, 2) keeps its replicas on the minor axis, so
    # 128 is cut by the major 4 = (a, b): (2, 64) cut by (a, b); both unify on (2, 8, 8), the
    # source cut by (b, c, a), the reader by (a, b, -): a and b move, c is gathered: three
    # 2-way AllGathers again (128, 256, 512 B)
    ("transposed merge, minor 4 -> 4", transposed((2, 4), 4)),
]

#: forward collectives (kind, group, bytes) derived by hand in the comments above
EXPECTED = [
    [("AllGather", 8, 12288)], [], [("AllGather", 4, 12288)], [("AllGather", 2, 12288)],
    [("AllGather", 8, 6144)], [], [("AllGather", 8, 12288)], [],
    [("AllGather", 2, 3072), ("AllGather", 4, 12288)],
    [("AllGather", 4, 256)], [("AllGather", 8, 512)], [("AllGather", 2, 128)],
    [("AllGather", 4, 256)], [("AllGather", 4, 256), ("AllGather", 2, 512)],
    [("AllGather", 2, 128), ("AllGather", 2, 256), ("AllGather", 2, 512)],
    [("AllGather", 2, 128), ("AllGather", 2, 256), ("AllGather", 2, 512)],
]


def net_cases():
    return [{"ops": [{"type": t, "init": i, "inputs": ins, "args": a}
                     for t, i, ins, a, _ in steps]} for _, steps in CASES]


def strategies():
    out = {}
    for i, (_, steps) in enumerate(CASES):
        for j, (_, _, ins, _, strat) in enumerate(steps):
            if strat is None:       # Reshape: shard() goes for nothing
                continue
            out[f"cases.{i}.steps.{j}.op"] = strat
            for k, inp in enumerate(ins):
                if inp[0] == "act":
                    out[f"cases.{i}.steps.{j}.pre{k}"] = [strat[k], strat[k]]
    return out


def predicted(graph, model, i, strats):
    ops = [op for op in graph.ops if op.prim_path and op.prim_path.startswith(f"cases.{i}.")]
    costs = {op.id: model.check(op, tuple(map(tuple, strats[op.prim_path])))
             for op in ops if op.type != "Reshape"}
    reshape = next(op for op in ops if op.type == "Reshape")
    before = graph.tensors[reshape.inputs[0]].producer
    after = next(op for op in ops if reshape.outputs[0] in op.inputs)
    colls = [c for cost in costs.values() for c in cost.collectives]
    colls += model.reshape_redistribution(reshape, costs[before].out_layouts[0],
                                          costs[after.id].in_layouts[0])
    return Counter((c.kind, c.phase, c.group, int(c.full_bytes)) for c in colls)


@pytest.fixture(scope="module")
def bank():
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC, cases=net_cases())


@pytest.mark.parametrize("devices", [8, 16])
def test_reshape_redistribution_equals_mindspore(bank, devices):
    strats = strategies()
    result = dryrun.run_child({"job": "compile", "spec": SPEC, "options": {"cases": net_cases()},
                               "strategies": strats}, devices=devices)
    model = CostModel(bank, devices)
    got_all, mismatches = [], []
    for i, (name, _) in enumerate(CASES):
        seen = observed(result["collectives"], i)
        got = predicted(bank, model, i, strats)
        got_all.append(got)
        fwd = sorted((k, v) for k, v in seen.items() if k[1] == "forward")
        want = sorted(Counter((k, "forward", g, b) for k, g, b in EXPECTED[i]).items())
        assert fwd == want, f"{name}: the hand derivation is wrong: MindSpore {fwd}"
        for phase in ("forward", "grad_sync"):
            w = sorted((k, v) for k, v in seen.items() if k[1] == phase)
            g = sorted((k, v) for k, v in got.items() if k[1] == phase)
            if w != g:
                mismatches.append(f"{name} [{phase}]: MindSpore {w} model {g}")
    assert not mismatches, "\n".join(mismatches)
    missing, extra = backward_difference(result["collectives"], got_all)
    assert not missing and not extra, (missing, extra)


@pytest.mark.parametrize("layout, shape, other, passes", [
    ((1, 8), HIDDEN, HEADS, False),      # 96 = 12 × 8 cut 8: 8 does not divide 12
    ((1, 4), HIDDEN, HEADS, True),       # 4 divides 12
    ((1, 24), HIDDEN, HEADS, True),      # fills the 12 heads, then 2 of the 8
    ((1, 16), HIDDEN, HEADS, False),     # 16 > 12 and 12 does not divide 16
    ((8, 1), (24, 64), (6, 4, 64), False),   # 6 does not divide 8
    ((8, 1), HIDDEN, HEADS, True),       # 4 × 2 of (4, 8)
    ((1, 1, 1, 8), HEADS, HIDDEN, True), # already the refined shape
    ((2, 1), (6, 4), (4, 6), False),     # no common refinement: gathered
    ((1, 1), (6, 4), (4, 6), True),
])
def test_maps_through_reshape(layout, shape, other, passes):
    devices = 48 if 24 in layout else 16
    lay = TensorLayout.from_cuts(layout, devices)
    assert maps_through_reshape(lay, shape, other) is passes


def test_refined_shape():
    assert refined_shape((1024, 768), (8, 128, 12, 64)) == (8, 128, 12, 64)
    assert refined_shape((6, 4), (4, 6)) is None
    assert refined_shape((2, 1, 6), (12,)) == (2, 6)


@pytest.mark.parametrize("parts, cut, want", [
    ([4, 8], 8, [4, 2]),      # the 4 outer parts whole, then 2 of the 8 inner
    ([12, 64], 8, None),      # chunks of 96 = 1.5 × 64
    ([12, 64], 4, [4, 1]),    # chunks of 3 × 64
    ([2, 384], 8, [2, 4]),
    ([3, 256], 8, None),      # 3 whole parts leave 8/3
    ([1, 16], 4, [1, 4]),     # a size-1 part cut once
])
def test_front_split(parts, cut, want):
    assert front_split(parts, cut) == want


def test_reshape_options_cut_across_split_dimensions():
    """(32, 96) → (4, 8, 12, 8) on 8 devices. Rows 32 = 4 × 8: cuts 1, 2, 4 land on the 4, cut
    8 is 4 × 2; hidden 96 = 12 × 8: cuts 1, 2, 4 land on the 12, 8 straddles (1.5 heads). Pairs
    with a product dividing 8: (1,1) (1,2) (1,4) (2,1) (2,2) (2,4) (4,1) (4,2) (8,1) = 9."""
    t = {"a": TensorInfo("a", HIDDEN, "float32", producer=None),
         "b": TensorInfo("b", HEADS, "float32", producer=0)}
    g = OpGraph([OpNode(0, "Reshape", ["a"], ["b"], {}, "r")], t, ["a"], ["b"])
    model = CostModel(g, 8)
    opts = model.options(g.ops[0])
    assert sorted(o.strategy[0] for o in opts) == [
        (1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (8, 1)]
    rows = next(o for o in opts if o.strategy == ((8, 1),))
    assert rows.out_layouts[0].cuts == (4, 2, 1, 1)
    assert rows.in_layouts[0].cuts == (8, 1)
    # a producer with hidden cut 8 cannot enter; one with hidden cut 4 can
    assert model.reshape_gathers(g.ops[0], TensorLayout.from_cuts((1, 8), 8), "input")
    assert not model.reshape_gathers(g.ops[0], TensorLayout.from_cuts((1, 4), 8), "input")
    # the head dimension cut 8 is already the refined shape: it passes
    assert not model.reshape_gathers(g.ops[0], TensorLayout.from_cuts((1, 1, 1, 8), 8), "output")
    with pytest.raises(ValueError, match="side"):
        model.reshape_gathers(g.ops[0], rows.in_layouts[0], "inside")


@pytest.mark.parametrize("tensor_map, matrix, want_shape, want_map", [
    # the four examples of TensorLayout::ExpandDeviceArrangement's comment (tensor_layout.cc):
    # (512, 1024) on device matrix (8, 4); an axis refined into (c1, c2) splits the dimension
    # it cuts into (c1, rest)
    ((1, 0), (4, 2, 2, 2), (4, 128, 2, 512), (3, 2, 1, 0)),
    ((0, 1), (4, 2, 2, 2), (2, 256, 4, 256), (1, 0, 3, 2)),
    ((1, -1), (4, 2, 2, 2), (4, 128, 1024), (3, 2, -1)),
    ((0, 1), (4, 2, 4), (512, 4, 256), (0, 2, 1)),
])
def test_expand_device_matrix(tensor_map, matrix, want_shape, want_map):
    shape, layout = expand_device_matrix((512, 1024), TensorLayout((8, 4), tensor_map), matrix)
    assert shape == want_shape and layout == TensorLayout(matrix, want_map)


def test_unify_through_reshape():
    """D11 by hand: (16, 8) on (2, 4) cut (4, 2) (tensor map (0, 1)) into 128 cut 8. The device
    matrices unify on (2, 4), 128 becomes (2, 64); the shapes refine to (2, 8, 8), splitting
    the 4-way cut of 16 into 2 × 2 (device matrix (2, 2, 2)), 64 follows as (2, 32); then
    (2, 2, 4, 8) for both. A straddling cut (96 cut 8 into 12 × 8) does not unify (D9)."""
    shape, src, dst = unify_through_reshape((16, 8), TensorLayout((2, 4), (0, 1)),
                                            (128,), TensorLayout((8,), (0,)))
    assert shape == (2, 2, 4, 8)
    assert src == TensorLayout((2, 2, 2), (1, 0, -1, 2))
    assert dst == TensorLayout((2, 2, 2), (2, 1, 0, -1))
    assert unify_through_reshape(HIDDEN, TensorLayout.from_cuts((1, 8), 8), HEADS,
                                 TensorLayout.from_cuts((1, 1, 4, 1), 8)) is None
