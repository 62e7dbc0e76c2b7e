"""#14 items 2-3, patterns GLM2 exposed; expected collectives from MindSpore's compiler (the
dry-run, ``check_plan``).

- A layout a network fixes (``self_define_shard``) is priced over the network's own device
  matrix, in its axis order (``smsg_ms.networks.repeat_kv``: GLM2's ``tile_kv``, heads on the
  innermost axis). Priced in a strategy's order (heads over ranks {0, 4}) the plan predicted
  one AllGather over 2 ranks where MindSpore gathers over 4 ranks and then 2 (1 vs 4).
- ``Divs`` (no ``OperatorInfo`` in MindSpore, as ``Adds``, ``Subs``) are laid out all or nothing
  (``smsg_ms.networks.scalar_div``, batch 4 on 8 devices: whole); priced with the gcd rule of
  a strategy-less operator (4-way) the plan missed the AllGather MindSpore inserts before them.
"""
from __future__ import annotations

import pytest

from smsg_ms.cost.layout import TensorLayout
from smsg_ms.cost.model import CostModel
from smsg_ms.cost.no_operator_info import all_or_nothing_cut

REPEAT_KV = "smsg_ms.networks.repeat_kv:build"
SCALAR_DIV = "smsg_ms.networks.scalar_div:build"


def _checked(spec, graph, devices=8):
    from smsg_ms.integration.check import check_plan
    from smsg_ms.planner import plan_graph

    plan = plan_graph(graph, devices, progress=False, network=spec, options={})
    report = check_plan(plan, [0])
    assert [r.error for r in report.ranks] == [None]
    return report


def test_a_kept_layout_takes_the_networks_axis_order(shared_capture):
    """The Tile's one option lays ``(4, 2, 1, 256)`` over the network's matrix ``(1, 4, 1, 2)``
    with tensor map ``(3, 0, -1, 2)`` (``Layout`` axes dp, cp, rep, mp: dims dp, mp, None,
    cp, counted from the right), input and output; the cuts (1, 2, 1, 4) are the same as the
    strategy order's, the ranks holding each slice are not."""
    graph = shared_capture(REPEAT_KV)
    (tile,) = [op for op in graph.ops if op.type == "Tile"]
    (option,) = CostModel(graph, 8).options(tile)
    want = TensorLayout((1, 4, 1, 2), (3, 0, -1, 2))
    assert option.in_layouts[0] == want and option.out_layouts[0] == want
    assert option.in_layouts[0].cuts == (1, 2, 1, 4)
    # fitted to 4 devices (a pipeline stage): the outer axis gives up the excess
    (half,) = CostModel(graph, 4).options(tile)
    assert half.in_layouts[0] == TensorLayout((1, 2, 1, 2), (3, 0, -1, 2))


def test_a_kept_layout_in_the_networks_order_checks(shared_capture):
    report = _checked(REPEAT_KV, shared_capture(REPEAT_KV))
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]


@pytest.mark.parametrize("devices,first_in,first_out,cut", [
    (8, 4, 4, 1),      # StandAloneInfo: 4 rows do not divide by 8 (not gcd 4)
    (8, 16, 16, 8),    # BatchParallelInfo: every device
    (8, 16, 4, 1),     # the output's first dimension decides too
    (4, -1, -1, 1),    # dynamic (-1): C++'s -1 % 4 is not 0
    (8, None, 8, 1),   # a scalar first input
])
def test_all_or_nothing_by_hand(devices, first_in, first_out, cut):
    """``OperatorInstance`` (``frontend/parallel/step_parallel_utils.cc``)."""
    assert all_or_nothing_cut(devices, first_in, first_out) == cut


def test_scalar_operators_are_laid_out_all_or_nothing(shared_capture):
    """``x (4, 32)`` on 8 devices: ``Divs`` takes ``x`` whole, the scalar has no layout (the
    ``Add`` of ``+ 1.0`` has an ``OperatorInfo``: not concerned); the plan's prediction equals
    the compile's collectives."""
    graph = shared_capture(SCALAR_DIV)
    model = CostModel(graph, 8)
    (divs,) = [op for op in graph.ops if op.type == "Divs"]
    assert model.default(divs).strategy[0] == (1, 1)
    report = _checked(SCALAR_DIV, graph)
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]


KEPT_MIRROR = "smsg_ms.networks.kept_mirror:build"


def _ranks(span, rank=0):
    """Ranks of ``rank``'s group over a ``((size, stride), ...)`` span, by brute force over
    the 8 ranks: those that differ from ``rank`` only in the span's axes (rank = row-major
    index: axis coordinate ``(r // stride) % size``)."""
    from math import prod

    if not span:
        return set()
    inner = {stride for _, stride in span}
    # every axis of the (2, 2, 2) matrix: stride 4, 2, 1
    fixed = [(2, s) for s in (4, 2, 1) if s not in inner]
    assert prod(size for size, _ in span) * prod(size for size, _ in fixed) == 8
    return {r for r in range(8)
            if all((r // s) % n == (rank // s) % n for n, s in fixed)}


def test_a_kept_layouts_gradient_sync_groups_follow_the_networks_matrix(shared_capture):
    """``w`` laid ``("mp", "None")`` over ``(2, 2, 2)`` named (dp, cp, mp): its gradient
    AllReduce varies dp and cp with mp fixed, rank 0's group {0, 2, 4, 6} (derived by hand from
    ``DeviceMatrix::GetDevicesAlongDim``: rank = row-major index, strides 4, 2, 1). Before the
    fix the option kept the strategy order's span (replicas appended on the right, stride 1):
    {0, 1, 2, 3}. The compile's rows (group sizes) equal the plan's."""
    graph = shared_capture(KEPT_MIRROR)
    (mul,) = [op for op in graph.ops if op.type == "Mul"]
    (option,) = CostModel(graph, 8).options(mul)
    (sync,) = [c for c in option.collectives if c.phase == "grad_sync"]
    assert sync.group == 4 and sync.full_bytes == 8 * 32 * 4     # w (16, 32) rows cut 2
    assert sync.span == ((2, 4), (2, 2))
    assert _ranks(sync.span) == {0, 2, 4, 6}
    assert _ranks(sync.span, 1) == {1, 3, 5, 7}
    report = _checked(KEPT_MIRROR, graph)
    assert report.ok, [(r.key, r.predicted, r.inserted) for r in report.ranks[0].rows]


def test_network_span_maps_axes_by_the_dimension_they_cut():
    """By hand: strategy order ``(4, 2)`` over 8 devices cuts dim 0 on axis 0 (stride 2) and
    dim 1 on axis 1 (stride 1); the network's ``(2, 4)`` cuts dim 0 on its axis 1 (stride 1),
    dim 1 on its axis 0 (stride 4). A group over dim 0's axis moves from ((4, 2),) to
    ((4, 1),), one over dim 1's from ((2, 1),) to ((2, 4),); a replica axis (strategy (2, 1)
    on 8: replicas (4, stride 1)) onto the network's unnamed axes."""
    from smsg_ms.cost.kept_layout import network_span

    opt = [TensorLayout((4, 2), (1, 0))]
    net = [TensorLayout((2, 4), (0, 1))]
    assert network_span(((4, 2),), opt, net) == ((4, 1),)
    assert network_span(((2, 1),), opt, net) == ((2, 4),)
    assert network_span(((4, 2), (2, 1)), opt, net) == ((2, 4), (4, 1))
    rep_opt = [TensorLayout((2, 4), (1, -1))]                     # rows on axis 0, replicas 4
    rep_net = [TensorLayout((2, 2, 2), (0, -1))]                  # rows on the innermost axis
    assert network_span(((4, 1),), rep_opt, rep_net) == ((2, 4), (2, 2))
    assert network_span((), rep_opt, rep_net) is None
