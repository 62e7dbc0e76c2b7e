"""Cost model against hand derivations (no MindSpore here; see test_cost_vs_mindspore.py).

Graphs are built by hand as OpGraph objects, so expected values are derived in each test from
the shapes: Megatron's column-then-row parallel MLP, counting of strategies, ring volumes.
"""
from __future__ import annotations

import pytest
import sympy

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.hardware import PRESETS, get_hardware
from smsg_ms.cost.layout import TensorLayout
from smsg_ms.cost.model import CostModel
from smsg_ms.graph.model import OpGraph, OpNode, TensorInfo

B, S, H, F = 4, 128, 256, 1024  # batch, sequence, hidden, ffn


def mlp_graph(dtype="float32", F=F):
    """x (B*S, H) -> MatMul w1 (H, F) -> GeLU -> MatMul w2 (F, H)."""
    t = {
        "x": TensorInfo("x", (B * S, H), dtype, "input", consumers=[0]),
        "w1": TensorInfo("w1", (H, F), dtype, "parameter", consumers=[0]),
        "h": TensorInfo("h", (B * S, F), dtype, producer=0, consumers=[1]),
        "g": TensorInfo("g", (B * S, F), dtype, producer=1, consumers=[2]),
        "w2": TensorInfo("w2", (F, H), dtype, "parameter", consumers=[2]),
        "y": TensorInfo("y", (B * S, H), dtype, producer=2, consumers=[3]),
        "p": TensorInfo("p", (B * S, H), dtype, producer=3),
    }
    ops = [OpNode(0, "MatMul", ["x", "w1"], ["h"], {"transpose_a": False, "transpose_b": False},
                  "w1.matmul"),
           OpNode(1, "GeLU", ["h"], ["g"], {}, "act"),
           OpNode(2, "MatMul", ["g", "w2"], ["y"], {}, "w2.matmul"),
           OpNode(3, "Softmax", ["y"], ["p"], {"axis": [-1]}, "softmax")]
    return OpGraph(ops, t, ["x"], ["p"], "mlp")


def test_megatron_mlp_volumes():
    """Column-parallel w1, row-parallel w2 on 8 devices: the forward has exactly one AllReduce of
    B*S*H elements (w2's partial sums), the backward one more of the same size; weights fully
    cut need no gradient sync."""
    g = mlp_graph()
    cm = CostModel(g, 8)
    c1 = cm.check(g.ops[0], ((1, 1), (1, 8)))
    c2 = cm.check(g.ops[2], ((1, 8), (8, 1)))
    assert c1.collectives == []
    kinds = [(c.kind, c.group, c.phase, c.full_bytes) for c in c2.collectives]
    assert kinds == [("AllReduce", 8, "forward", B * S * H * 4),
                     ("AllReduce", 8, "backward", B * S * H * 4)]
    # ring AllReduce: 2(g-1)/g * S
    assert c2.collectives[0].volume == 2 * 7 / 8 * B * S * H * 4
    # FLOPs: 2*m*k*n / 8 forward, twice that backward (only dw for w1: x is a data input)
    assert c2.flops_fwd == 2 * B * S * F * H // 8
    assert c2.flops_bwd == 2 * c2.flops_fwd
    assert c1.flops_bwd == c1.flops_fwd
    # memory: w2 slice (F/8, H) fp32, gradient alike, Adam 2 fp32 states
    assert c2.memory["parameter"] == F * H * 4 // 8
    assert c2.memory["optimizer"] == 2 * F * H * 4 // 8
    # layouts: w1's output is cut on columns, which is what w2's input wants: no redistribution
    assert cm.redistribution(g.tensors["h"], c1.out_layouts[0], c2.in_layouts[0]) == []


def test_data_parallel_grad_sync_and_seconds():
    g = mlp_graph()
    cm = CostModel(g, 8, "a100", optimizer="momentum")
    c = cm.check(g.ops[0], ((8, 1), (1, 1)))
    (sync,) = c.collectives
    assert (sync.kind, sync.group, sync.phase, sync.full_bytes) == ("AllReduce", 8, "grad_sync",
                                                                   H * F * 4)
    assert c.memory["optimizer"] == H * F * 4
    # a100 = DGX A100: 8 GPUs in one node, so the 8-way AllReduce stays on NVLink:
    # ring 2·7/8·S over 300 GB/s + 8 us
    ring = 2 * 7 / 8 * H * F * 4 / 300e9 + 8e-6
    # kernels by hand (fp32): forward reads x's slice (B·S/8, H) and the whole w1 (H, F), writes
    # h's slice (B·S/8, F); 2·(B·S/8)·H·F FLOPs on the tensor cores (312 TFLOP/s) against bytes
    # over HBM (2.039 TB/s): memory-bound; one 5 us launch
    x, w, h = B * S // 8 * H * 4, H * F * 4, B * S // 8 * F * 4
    flops = 2 * (B * S // 8) * H * F
    fwd = 5e-6 + max(flops / 312e12, (x + w + h) / 2.039e12)
    # backward: only w1 gets a gradient (x is a data input): one launch, dw = xᵀ·dh reads dh and
    # the inputs, writes dw
    bwd = 5e-6 + max(flops / 312e12, (h + x + w + w) / 2.039e12)
    # the AllReduce overlaps the backward of the previous layer's equal operator: exposed
    # max(0, ring - bwd)
    assert ring > bwd
    # the optimizer update, once per step and memory-bound: read and write w1 and its one
    # momentum state (fp32, w bytes each), read its gradient twice: 2·(w + w) + 2·w over HBM
    update = (2 * (w + w) + 2 * w) / 2.039e12
    assert cm.seconds(c) == pytest.approx(fwd + bwd + (ring - bwd) + update)
    br = cm.breakdown(c)
    assert br["compute"] == pytest.approx(fwd + bwd)
    assert br["grad_sync"] == pytest.approx(ring - bwd)
    assert br["parameter_bytes"] == H * F * 4


def test_matmul_option_count_and_order():
    """Triples (c_m, c_k, c_n) of powers of two with product dividing 8: exponent triples with
    sum <= 3, C(6, 3) = 20. Those with k cut (the 20 less the C(5, 2) = 10 with e_k = 0) have a
    second option each, the out_strategy ((c_m·c_k, c_n),) that reduce-scatters the partial
    sums (``MatMul::CheckOutputStrategy``; the rows, 512, divide by every c_m·c_k <= 8), after
    the 20. On 24 devices 3-way cuts appear."""
    g = mlp_graph()
    opts = CostModel(g, 8).options(g.ops[0])
    assert len(opts) == 30
    assert opts[0].strategy == ((1, 1), (1, 1))
    plain = [o for o in opts if o.out_strategy is None]
    assert plain == opts[:20] and len({o.strategy for o in plain}) == 20
    scattered = opts[20:]
    assert len(scattered) == 10
    for o in scattered:
        (c_m, c_k), (_, c_n) = o.strategy
        assert c_k > 1 and o.out_strategy == ((c_m * c_k, c_n),)
        assert [c.kind for c in o.collectives if c.phase != "grad_sync"] == \
            ["ReduceScatter", "AllGather"]
    # no dimension divides by 3: no 3-way cut on 24 devices; with F = 768, w1's columns can be
    assert not any(3 in o.strategy[1] for o in CostModel(g, 24).options(g.ops[0]))
    g = mlp_graph(F=768)
    opts24 = CostModel(g, 24).options(g.ops[0])
    assert any(o.strategy[1][1] == 3 for o in opts24)
    # every proposed strategy passes the check
    cm = CostModel(g, 24)
    for o in opts24:
        cm.check(g.ops[0], o.strategy)


def test_softmax_axis_never_proposed_and_rejected():
    g = mlp_graph()
    cm = CostModel(g, 8)
    assert all(o.strategy[0][1] == 1 for o in cm.options(g.ops[3]))
    with pytest.raises(StrategyError, match=r"softmax: input 0 dimension 1: cannot be cut"):
        cm.check(g.ops[3], ((2, 4),))


@pytest.mark.parametrize("strategy, message", [
    (((3, 1), (1, 1)), r"w1.matmul: input 0 dimension 0: cut 3 does not divide size 512"),
    (((2, 4), (2, 1)), r"w1.matmul: input 1 dimension 0: cut 2 differs from input 0 dimension 1"),
    (((4, 1), (1, 4)), r"w1.matmul: input 1 dimension 1: cut 4 brings the product of cuts to 16"),
    (((2, 1),), r"strategy has 1 inputs"),
])
def test_bad_strategies_name_operator_input_dimension(strategy, message):
    g = mlp_graph()
    with pytest.raises(StrategyError, match=message):
        CostModel(g, 8).check(g.ops[0], strategy)


def test_redistribution_gather_and_move():
    g = mlp_graph()
    cm = CostModel(g, 8)
    t = g.tensors["y"]  # (512, 256) fp32
    batch8 = TensorLayout((8, 1), (1, 0))
    mixed = TensorLayout((2, 4, 1), (2, 1))  # rows 2-way, columns 4-way
    full = TensorLayout.replicated(2, 8)
    assert cm.redistribution(t, full, batch8) == []          # pure slice
    assert cm.redistribution(t, batch8, TensorLayout((8,), (0, -1))) == []  # same placement
    # rows 8-way -> rows 2-way x columns 4-way: the 4-way part of the row cut moves to the
    # columns: AllGather over 4 of the (512/2, 256) block, then a slice; bprop ReduceScatter.
    got = [(c.kind, c.group, c.full_bytes, c.phase) for c in cm.redistribution(t, batch8, mixed)]
    assert got == [("AllGather", 4, 256 * 256 * 4, "forward"),
                   ("ReduceScatter", 4, 256 * 256 * 4, "backward")]
    # un-split everything: AllGather of the whole tensor over 8
    got = [(c.kind, c.group, c.full_bytes) for c in cm.redistribution(t, batch8, full)]
    assert got[0] == ("AllGather", 8, 512 * 256 * 4)
    alltoall = CostModel(g, 8, enable_alltoall=True)
    got = [(c.kind, c.group, c.full_bytes) for c in alltoall.redistribution(t, batch8, mixed)]
    assert got == [("AlltoAll", 4, 64 * 256 * 4), ("AlltoAll", 4, 64 * 256 * 4)]


def test_symbolic_matmul_flops_and_allreduce():
    g = mlp_graph()
    expr = CostModel(g, 8).symbolic(g.ops[2], ((1, 8), (8, 1)))
    m, k, n = sympy.symbols("m k n", positive=True, integer=True)
    cm_, ck, cn = sympy.symbols("c_m c_k c_n", positive=True, integer=True)
    assert sympy.simplify(expr["flops_fwd"] - 2 * m * k * n / (cm_ * ck * cn)) == 0
    ar = [v for key, v in expr.items() if key.startswith("forward:AllReduce")][0]
    # ring AllReduce of the local fp32 output (m/c_m, n/c_n) over c_k devices
    assert sympy.simplify(ar - 2 * (ck - 1) / ck * 4 * m * n / (cm_ * cn)) == 0


def test_hardware_presets():
    assert {"atlas-800t-a2", "dgx-a100", "dgx-h100"} <= set(PRESETS)
    # the old names are aliases of the servers they come in
    assert get_hardware("h100") is PRESETS["dgx-h100"]
    assert get_hardware("ASCEND910B") is PRESETS["atlas-800t-a2"]
    with pytest.raises(ValueError, match="presets: a100, ascend910b, atlas-800t-a2, dgx-a100"):
        get_hardware("tpu")


def test_functional_op_gets_single_default_option():
    g = mlp_graph()
    g.ops[1].prim_path = None
    (opt,) = CostModel(g, 8).options(g.ops[1])
    assert opt.strategy == ((8, 1),) and "default batch-parallel" in opt.notes[-1]


def test_reshape_options_follow_the_merge():
    t = {"a": TensorInfo("a", (8, 512, 16, 64), "float32", producer=None),
         "b": TensorInfo("b", (4096, 1024), "float32", producer=0)}
    g = OpGraph([OpNode(0, "Reshape", ["a"], ["b"], {}, "r")], t, ["a"], ["b"])
    opts = CostModel(g, 8).options(g.ops[0])
    # cuts may sit on dim 0 (-> 4096) and dim 2 (heads -> 1024); pairs with product | 8: 10
    assert len(opts) == 10
    o = next(o for o in opts if o.strategy == ((2, 1, 4, 1),))
    assert o.out_layouts[0].cuts == (2, 4) and o.in_layouts[0].cuts == (2, 1, 4, 1)
