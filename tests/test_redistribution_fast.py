"""The numpy fast path of redistribution seconds equals the reference, bit for bit.

Oracle: ``CostModel.seconds(redistribute(...))``, the reference collectives of
:func:`smsg_ms.cost.redistribution.redistribute` summed by the cost model. A change of the
reference's semantics (or of how seconds are summed) makes these tests fail.
"""
from __future__ import annotations

from math import prod

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from smsg_ms import planner
from smsg_ms.cost.hardware import get_hardware
from smsg_ms.cost.layout import TensorLayout
from smsg_ms.cost.model import CostModel
from smsg_ms.cost.redistribution import redistribute
from smsg_ms.cost.redistribution_fast import gather_seconds_matrix
from smsg_ms.graph.model import OpGraph

HW = get_hardware("ascend910b")
SIZES = [1, 2, 3, 5, 6, 8, 12, 16, 24, 64, 96, 128, 4096, 32000]


def _model(devices: int) -> CostModel:
    return CostModel(OpGraph([], {}, [], []), devices, HW)


@st.composite
def layouts(draw, devices: int, rank: int):
    """A valid layout of ``devices`` devices: a random factorisation (size-1 axes allowed) and a
    random injective tensor map."""
    axes, left = [], devices
    while left > 1:
        d = draw(st.sampled_from([x for x in range(2, left + 1) if left % x == 0]))
        axes.append(d)
        left //= d
    axes = draw(st.permutations(axes)) if axes else [1]
    for _ in range(draw(st.integers(0, 2))):
        axes = list(axes)
        axes.insert(draw(st.integers(0, len(axes))), 1)
    free = list(draw(st.permutations(range(len(axes)))))
    tmap = []
    for cut in draw(st.lists(st.booleans(), min_size=rank, max_size=rank)):
        tmap.append(free.pop() if cut and free else -1)
    return TensorLayout(tuple(axes), tuple(tmap))


@st.composite
def cases(draw, power_of_two: bool = True):
    devices = 2 ** draw(st.integers(1, 10)) if power_of_two else draw(st.sampled_from([24, 48]))
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.sampled_from(SIZES)) for _ in range(rank))
    srcs = draw(st.lists(layouts(devices, rank), min_size=1, max_size=4))
    dsts = draw(st.lists(layouts(devices, rank), min_size=1, max_size=4))
    return devices, shape, draw(st.sampled_from([1, 2, 4])), srcs, dsts


def _reference(devices, shape, elem_bytes, srcs, dsts, backward: bool = True) -> np.ndarray:
    """Seconds of the reference collectives, without the backward ones for a tensor that
    carries no gradient (as ``CostModel.redistribution`` drops them)."""
    model = _model(devices)

    def colls(a, b):
        out = redistribute(shape, elem_bytes, a, b)
        return out if backward else [c for c in out if c.phase != "backward"]

    return np.array([[model.seconds(colls(a, b)) for b in dsts] for a in srcs])


def _assert_fast_equals(fast, devices, shape, elem_bytes, srcs, dsts, backward):
    """The fast block equals the reference exactly, pairs whose reference merges two AllGathers
    into one (``MergeAllConcat``) included."""
    ref = _reference(devices, shape, elem_bytes, srcs, dsts, backward)
    assert fast.tolist() == ref.tolist()   # exact, not approximate


@settings(max_examples=400, deadline=None)
@given(cases(), st.booleans())
def test_fast_seconds_equal_reference(case, backward):
    devices, shape, elem_bytes, srcs, dsts = case
    assume(elem_bytes * prod(shape) * devices < 2 ** 53)   # beyond: the fast path declines
    fast = gather_seconds_matrix(shape, elem_bytes, srcs, dsts, HW,
                                 backward)
    assert fast is not None
    _assert_fast_equals(fast, devices, shape, elem_bytes, srcs, dsts, backward)


def _gathers(sizes_and_groups, backward: bool) -> float:
    """Seconds of forward AllGathers of ``(S bytes, g devices)`` in order, summed as the cost
    model does, plus as much again for their backward ReduceScatters."""
    t = 0.0
    for nbytes, g in sizes_and_groups:
        t += (g - 1) * nbytes / g / HW.levels[0].bandwidth + HW.levels[0].latency
    return t + t if backward else t


@pytest.mark.parametrize("backward", [True, False])
@pytest.mark.parametrize("name, shape, elem_bytes, src, dst, gathers", [
    # Transpose (2,4,1) output → ReLU (4,2,1) on a (16, 8, 32) fp32 tensor over 8 devices:
    # dim 0 is cut on bits 1-2 then 0-1 (order: gather bit 1, 2 KiB slice → 4 KiB), then the
    # permutes, destination dimension 1 first (bit 2 → 8 KiB), then dimension 0 (bit 0 →
    # 16 KiB): the 4, 8, 16 KiB the dry-run shows
    ("transpose-relu", (16, 8, 32), 4, TensorLayout((2, 4, 1), (1, 2, -1)),
     TensorLayout((4, 2, 1), (2, 1, -1)), [(4096, 2), (8192, 2), (16384, 2)]),
    # (2,1,4) → (1,8,1): both moves land in dimension 1; its minor bits (1-2, from dimension 2)
    # are gathered first: 4·8·16/8 elements · 2 bytes = 128 B → 512 B, then bit 0 → 1024 B
    ("minor-first", (4, 8, 16), 2, TensorLayout((2, 4), (1, -1, 0)),
     TensorLayout((8,), (-1, 0, -1)), [(512, 4), (1024, 2)]),
    # both cuts swapped over 8 devices, (2,4) → (4,2) on an (8, 32) fp16 tensor: destination
    # dimension 1 first (bit 0, 64 B slice → 128 B), then dimension 0 (bits 1-2 → 512 B)
    ("last-dimension-first", (8, 32), 2, TensorLayout((2, 4), (1, 0)),
     TensorLayout((2, 4), (0, 1)), [(128, 2), (512, 4)]),
    # (8,1) → (1,4) with the replica axis first: bit 0 is replicated in the destination
    # (concat, 128 B slice → 256 B) before bits 1-2 move to the columns (→ 1024 B)
    ("concat-first", (8, 32), 4, TensorLayout((8,), (0, -1)),
     TensorLayout((2, 4), (-1, 0)), [(256, 2), (1024, 4)]),
    # (4,1,2,1) → replicated on a (4, 8, 12, 8) fp32 tensor (the dry-run's Reshape bank,
    # heads 2 rows 4 -> hidden 8): concat from the last cut dimension, heads 2-way
    # (1·8·6·8·4 B → 3 KiB), then rows 4-way (→ 12 KiB)
    ("concat-last-dimension-first", (4, 8, 12, 8), 4, TensorLayout((4, 2), (1, -1, 0, -1)),
     TensorLayout((8,), (-1, -1, -1, -1)), [(3072, 2), (12288, 4)]),
])
def test_fast_seconds_follow_gather_order(name, shape, elem_bytes, src, dst, gathers, backward):
    """Each gather carries the tensor as the previous gathers left it, in the order concat, then
    permutes from the destination's last dimension, minor axis first: derived by hand, and the
    reference's forward AllGathers are the same list. (Growing gathers send ``S_0·(G−1)`` bytes
    in all whatever their order, ``G`` the product of the groups, so the order only moves the
    float rounding: the bit-exact comparison above is what pins it.)"""
    ref = [(c.full_bytes, c.group) for c in redistribute(shape, elem_bytes, src, dst)
           if c.phase == "forward"]
    assert ref == gathers, name
    fast = gather_seconds_matrix(shape, elem_bytes, [src], [dst], HW,
                                 backward)
    assert fast[0, 0] == _gathers(gathers, backward), name


def test_fast_seconds_cover_every_rule():
    """Hand-picked pairs, one per rule of the reference, on an (8, 32) tensor over 8 devices:
    the fast path must agree on each, and each really has collectives."""
    shape, n = (8, 32), 8
    pairs = [
        # concat: dim 0 cut 8-way → replicated
        (TensorLayout((8,), (0, -1)), TensorLayout((8,), (-1, -1))),
        # permute: cut moves from dim 0 to dim 1
        (TensorLayout((2, 4), (1, -1)), TensorLayout((2, 4), (-1, 1))),
        # order: dim 1 cut 4-way on device bits 1-2 in the source, bits 0-1 in the destination
        (TensorLayout((2, 4), (-1, 0)), TensorLayout((4, 2), (-1, 1))),
        # split then concat: replica axis becomes a cut, a cut becomes replica
        (TensorLayout((2, 4), (0, -1)), TensorLayout((2, 4), (-1, 1))),
    ]
    for a, b in pairs:
        assert redistribute(shape, 2, a, b), (a, b)
    srcs, dsts = [a for a, _ in pairs], [b for _, b in pairs]
    fast = gather_seconds_matrix(shape, 2, srcs, dsts, HW)
    assert fast.tolist() == _reference(n, shape, 2, srcs, dsts).tolist()
    # derivation of the first pair: one AllGather over 8 of the 8·32·2-byte tensor, forward, and
    # its ReduceScatter twin backward, each (g-1)/g·S bytes plus one latency
    t = (7 * 512) / 8 / HW.levels[0].bandwidth + HW.levels[0].latency
    assert fast[0, 0] == t + t


@pytest.mark.parametrize("shape", [(8, 16), ("b", 16)])
def test_fast_path_declines(shape):
    """Non-power-of-two device counts and symbolic dimensions go to the reference."""
    a24, b24 = TensorLayout((24,), (0, -1)), TensorLayout((24,), (-1, -1))
    assert gather_seconds_matrix(shape, 2, [a24], [b24], HW) is None
    if shape[0] == "b":
        a8, b8 = TensorLayout((8,), (0, -1)), TensorLayout((8,), (-1, -1))
        assert gather_seconds_matrix(shape, 2, [a8], [b8], HW) is None


def test_fast_path_declines_sizes_float64_cannot_hold():
    """(k − 1)·S must be exact in float64 (odd part below 2^53), and the whole tensor times the
    devices below 2^62 (no int64 overflow); power-of-two sizes past 2^53 are exact."""
    a, b = TensorLayout((8,), (0, -1)), TensorLayout((8,), (-1, -1))
    # S = 2·8·3^32 bytes gathered over 8: (8 − 1)·S has the odd part 7·3^32 > 2^53
    assert gather_seconds_matrix((8 * 3 ** 32, 1), 2, [a], [b], HW) is None
    assert gather_seconds_matrix((2 ** 60, 8), 2, [a], [b], HW) is None     # 2^68 bytes·devices
    huge = (2 ** 25, 2 ** 24)   # 2^49 elements x 2 bytes x 8 devices = 2^53, every value exact
    fast = gather_seconds_matrix(huge, 2, [a], [b], HW)
    assert fast is not None
    _assert_fast_equals(fast, 8, huge, 2, [a], [b], True)
    assert gather_seconds_matrix((2 ** 20, 8), 2, [a], [b], HW) is not None


@st.composite
def large_cases(draw):
    """Cases of :func:`cases` with every dimension scaled up to 2^30 times: past 2^53 bytes ×
    devices, exact in float64 or not depending on the odd parts."""
    devices, shape, elem_bytes, srcs, dsts = draw(cases())
    shape = tuple(s << draw(st.integers(0, 30)) for s in shape)
    return devices, shape, elem_bytes, srcs, dsts


@settings(max_examples=300, deadline=None)
@given(large_cases(), st.booleans())
def test_fast_seconds_equal_reference_past_2_53(case, backward):
    """Where the fast path takes a large tensor it equals the reference bit for bit; with
    power-of-two dimensions (every (k − 1)·S exact) it always takes it."""
    devices, shape, elem_bytes, srcs, dsts = case
    assume(elem_bytes * prod(shape) * devices < 2 ** 62)
    fast = gather_seconds_matrix(shape, elem_bytes, srcs, dsts, HW, backward)
    if all(s & (s - 1) == 0 for s in shape):
        assert fast is not None
    if fast is not None:
        _assert_fast_equals(fast, devices, shape, elem_bytes, srcs, dsts, backward)


def test_planner_edges_equal_reference_at_64_devices(captured, monkeypatch):
    """Every edge matrix of a 2-layer llama at 64 devices (fully used devices, the fast path)
    equals the plain reference problem's, blocks of tensors with and without a gradient (the
    token ids) alike."""
    from smsg_ms.cost import redistribution_fast

    graph = captured("llama", layers=2)
    used, flags = [], set()

    def counted(*args):
        got = gather_seconds_matrix(*args)
        used.append(got is not None)
        flags.add(args[5])
        return got

    monkeypatch.setattr(redistribution_fast, "gather_seconds_matrix", counted)
    fast, _ = planner.build_problem(graph, CostModel(graph, 64, fully_use_devices=True))
    assert used and all(used)   # the fast path really computed every block
    assert flags == {True, False}
    plain, _ = planner.build_problem(graph, CostModel(graph, 64, fully_use_devices=True),
                                     reuse=False)
    assert [(e.u, e.v) for e in fast.edges] == [(e.u, e.v) for e in plain.edges]
    for f, p in zip(fast.edges, plain.edges):
        assert f.cost.tolist() == p.cost.tolist(), (f.u, f.v)
    assert [v.cost.tolist() for v in fast.variables] == [v.cost.tolist() for v in plain.variables]


def test_planner_falls_back_when_fast_path_disagrees(captured, monkeypatch):
    """A fast block that disagrees with the reference (as after a change of the reference's
    semantics) is caught by the spot check: a warning, and the reference's numbers are used."""
    from smsg_ms.cost import redistribution_fast

    graph = captured("llama", layers=2)

    def skewed(*args):
        got = gather_seconds_matrix(*args)
        return None if got is None else got * 1.5

    monkeypatch.setattr(redistribution_fast, "gather_seconds_matrix", skewed)
    with pytest.warns(RuntimeWarning, match="using the reference"):
        fast, _ = planner.build_problem(graph, CostModel(graph, 8))
    plain, _ = planner.build_problem(graph, CostModel(graph, 8), reuse=False)
    assert [e.cost.tolist() for e in fast.edges] == [e.cost.tolist() for e in plain.edges]


def test_planner_reshape_edges_equal_reference(captured, monkeypatch):
    """BERT at 8 devices: the edges into and out of its Reshapes, where layouts that cannot pass
    a Reshape are gathered whole (D9, ``cost.operators.reshape.through_reshape_block``), are
    equal in the fast problem and the plain reference one; and that rule really fires."""
    graph = captured("bert")
    fired = []
    real = CostModel.reshape_gathers

    def counted(self, op, layout, side):
        got = real(self, op, layout, side)
        fired.append(got)
        return got

    monkeypatch.setattr(CostModel, "reshape_gathers", counted)
    fast, _ = planner.build_problem(graph, CostModel(graph, 8))
    assert any(fired)
    plain, _ = planner.build_problem(graph, CostModel(graph, 8), reuse=False)
    assert [(e.u, e.v) for e in fast.edges] == [(e.u, e.v) for e in plain.edges]
    for f, p in zip(fast.edges, plain.edges):
        assert f.cost.tolist() == p.cost.tolist(), (f.u, f.v)


@settings(max_examples=150, deadline=None)
@given(cases(), st.data(), st.booleans())
def test_sub_blocks_cut_out_of_a_kept_program_equal_reference(case, data, backward):
    """A block whose layouts are rows and columns of a block costed before reuses that block's
    gather program (no new program is built) and still equals the reference exactly."""
    from smsg_ms.cost import redistribution_fast as R

    devices, shape, elem_bytes, srcs, dsts = case
    srcs, dsts = list(dict.fromkeys(srcs)), list(dict.fromkeys(dsts))
    assume(elem_bytes * prod(shape) * devices < 2 ** 53)
    gather_seconds_matrix(shape, elem_bytes, srcs, dsts, HW, backward)
    sub_s = data.draw(st.permutations(srcs).flatmap(
        lambda xs: st.integers(1, len(xs)).map(lambda k: xs[:k])))
    sub_d = data.draw(st.permutations(dsts).flatmap(
        lambda xs: st.integers(1, len(xs)).map(lambda k: xs[:k])))
    built = []
    build = R._build_gather_program
    R._build_gather_program = lambda *a: built.append(a) or build(*a)
    try:
        fast = gather_seconds_matrix(shape, elem_bytes, sub_s, sub_d, HW,
                                     backward)
    finally:
        R._build_gather_program = build
    assert not built
    _assert_fast_equals(fast, devices, shape, elem_bytes, sub_s, sub_d, backward)


@pytest.mark.parametrize("backward", [True, False])
@pytest.mark.parametrize("shape, gathers", [
    # (1, 8) fp16 over 8 devices, dimension 1 cut 8-way (bits 0-2) → cut 4-way by the minor
    # bits 1-2, bit 0 replicated: bits 1-2 sit at another position in dimension 1 (order
    # gather over 4), then bit 0 is concatenated (over 2). Both gather on dimension 1 with
    # dimension 0 holding 1 element per device, so OptimizeAllConcat moves both to axis 0, and
    # bit 0 sits just left of bits 1-2: MergeAllConcat makes one AllGather over 8 of the whole
    # 1·8·2 = 16 B tensor
    ((1, 8), [(16, 8)]),
    # the same layouts on a (2, 8) tensor: dimension 0 holds 2 elements per device, no gather
    # moves to axis 0, two AllGathers: 2·1·2 B → 16 B over 4, then → 32 B over 2
    ((2, 8), [(16, 4), (32, 2)]),
])
def test_fast_seconds_merge_adjacent_gathers(shape, gathers, backward):
    """MindSpore's MergeAllConcat (tensor_layout/tensor_transform.cc) depends on the shape as
    well as on the layouts; the fast path prices both outcomes as derived by hand (one
    AllGather over 8 devices of S = 16 B, or two), and agrees with the reference."""
    src, dst = TensorLayout((8,), (-1, 0)), TensorLayout((2, 4), (-1, 0))
    ref = [(c.full_bytes, c.group) for c in redistribute(shape, 2, src, dst)
           if c.phase == "forward"]
    assert ref == gathers
    fast = gather_seconds_matrix(shape, 2, [src], [dst], HW, backward)
    assert fast[0, 0] == _gathers(gathers, backward)


@st.composite
def merging_cases(draw):
    """Cases where MergeAllConcat fires often: shapes with many size-1 leading dimensions (the
    tensor's earlier dimensions holding one element per device), up to 1,024 devices."""
    devices = 2 ** draw(st.integers(1, 10))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.sampled_from([1, 1, 1, 2, 4, 8, 1024])) for _ in range(rank))
    srcs = draw(st.lists(layouts(devices, rank), min_size=1, max_size=6))
    dsts = draw(st.lists(layouts(devices, rank), min_size=1, max_size=6))
    return devices, shape, draw(st.sampled_from([1, 2, 4])), srcs, dsts


@settings(max_examples=300, deadline=None)
@given(merging_cases(), st.booleans())
def test_fast_seconds_equal_reference_where_gathers_merge(case, backward):
    """Random layouts on shapes where merged AllGathers are common: the fast path equals the
    reference exactly, merged pairs included."""
    devices, shape, elem_bytes, srcs, dsts = case
    fast = gather_seconds_matrix(shape, elem_bytes, srcs, dsts, HW, backward)
    _assert_fast_equals(fast, devices, shape, elem_bytes, srcs, dsts, backward)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_every_gather_records_the_source_dimension_of_its_first_bit(case):
    """Each AllGather of a gather program names the source dimension whose bits it starts on
    (where the program takes it from the rule that makes the gather rather than looking it up,
    the two agree), the dimension MergeAllConcat's test reads."""
    from smsg_ms.cost import redistribution_fast as R

    devices, shape, _, srcs, dsts = case
    nbits = devices.bit_length() - 1
    program = R._build_gather_program(tuple(srcs), tuple(dsts), len(shape), nbits)
    masks = R._side(list(srcs), len(shape), nbits)[0]            # (rank, sources)
    for at, row, run, grown, low, axis0, joins, dim in program[1]:
        first = (nbits - 1 - low.astype(np.int64)) - run.astype(np.int64) + 1
        held = (masks[dim.astype(np.int64), row].astype(np.int64) >> first) & 1
        assert held.all()
