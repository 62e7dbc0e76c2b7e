"""A machine in levels (#16 item 1) and a time per micro-step (#16 item 2), against derivations by
hand: a two-node hierarchical AllReduce, the placement of a group by MindSpore's rank order, a
roofline, and the validation of a user's description file.
"""
from __future__ import annotations

import json

import pytest

from smsg_ms.cost.api import collective_seconds
from smsg_ms.cost.hardware import PRESETS, Level, Machine, get_hardware
from smsg_ms.cost.kernels import kernel_seconds, traffic, wave_quantization
from smsg_ms.cost.model import CostModel
from smsg_ms.graph.model import OpGraph, OpNode, TensorInfo

B1, L1 = 100e9, 2e-6      # node: bytes/s per device and direction, s per step
B2, L2 = 10e9, 5e-6       # cluster
TWO = ((B1, L1), (B2, L2))
S = 64 * 2**20            # bytes of the group's tensor


def test_two_node_allreduce_by_hand():
    """16 devices, 8 per node: reduce-scatter inside each node (each device sends 7/8·S over
    the node link), AllReduce of the 1/8 shard between the two nodes (a 2-ring: 2·1/2·S/8 over
    the network), AllGather inside the node (7/8·S again); a latency for each of the three."""
    want = 7 / 8 * S / B1 + L1 + (S / 8) / B2 + L2 + 7 / 8 * S / B1 + L1
    assert collective_seconds("AllReduce", (8, 2), S, TWO) == pytest.approx(want)
    # one device per node (a data-parallel group of stride 8): a plain ring over the network
    assert collective_seconds("AllReduce", (1, 2), S, TWO) == pytest.approx(S / B2 + L2)
    # inside one node: the flat ring on the node link
    assert collective_seconds("AllReduce", (8, 1), S, TWO) == pytest.approx(
        2 * 7 / 8 * S / B1 + L1)


def test_two_node_gathers_and_sends_by_hand():
    """AllGather of S over 2 nodes × 4: across the nodes on the S/4 each node-local index holds
    (1/2·S/4), then inside the node on S (3/4·S); a send between nodes crosses the network."""
    want = 3 / 4 * S / B1 + L1 + (S / 4) / 2 / B2 + L2
    assert collective_seconds("AllGather", (4, 2), S, TWO) == pytest.approx(want)
    assert collective_seconds("ReduceScatter", (4, 2), S, TWO) == pytest.approx(want)
    assert collective_seconds("Send", (1, 2), S, TWO) == pytest.approx(S / B2 + L2)
    assert collective_seconds("Send", (2, 1), S, TWO) == pytest.approx(S / B1 + L1)
    # AlltoAll over 2 × 4: each device sends S/8 to each of 7 peers, 3 in its node and 4 in
    # the other; the two links run at once, the network is the slower: 4/8·S / B2
    assert collective_seconds("AlltoAll", (4, 2), S, TWO) == pytest.approx(S / 2 / B2 + L2)


def test_group_placement_follows_mindspore_rank_order():
    """MindSpore's rank is the row-major index over the device matrix, and a group varies one
    axis with the others fixed (DeviceMatrix::GetDevicesAlongDim). On 16 devices with device
    matrix (8, 2): the axis of size 2 (stride 1) holds ranks {0, 1}: one node; the axis of size
    8 (stride 2) holds {0, 2, ..., 14}: 4 in node 0 and 4 in node 1."""
    m = get_hardware("dgx-a100")
    assert m.fanout(2, ((2, 1),)) == (2, 1)
    assert m.fanout(8, ((8, 2),)) == (4, 2)
    assert m.fanout(8, ((8, 8),)) == (1, 8)
    assert m.fanout(16) == (8, 2)
    # two axes of (2, 2, 4) with the middle one fixed: {0,1,2,3} + {0, 8}: 4 per node, 2 nodes
    assert m.fanout(8, ((2, 8), (4, 1))) == (4, 2)
    assert m.with_devices_per_node(4).fanout(8, ((8, 2),)) == (2, 4)


def mlp_graph():
    """x (512, 256) fp32 -> MatMul w (256, 1024) -> Reshape -> Add bias."""
    t = {
        "x": TensorInfo("x", (512, 256), "float32", "input", consumers=[0]),
        "w": TensorInfo("w", (256, 1024), "float32", "parameter", consumers=[0]),
        "h": TensorInfo("h", (512, 1024), "float32", producer=0, consumers=[1]),
        "r": TensorInfo("r", (512, 1024), "float32", producer=1, consumers=[2]),
        "b": TensorInfo("b", (1024,), "float32", "parameter", consumers=[2]),
        "y": TensorInfo("y", (512, 1024), "float32", producer=2),
    }
    ops = [OpNode(0, "MatMul", ["x", "w"], ["h"], {"transpose_a": False, "transpose_b": False},
                  "w.matmul"),
           OpNode(1, "Reshape", ["h"], ["r"], {}, ""),
           OpNode(2, "Add", ["r", "b"], ["y"], {}, "add")]
    return OpGraph(ops, t, ["x"], ["y"], "mlp")


def test_grad_sync_crosses_nodes_when_the_replicas_do():
    """MatMul ((16, 1), (1, 1)) on 16 devices of dgx-a100: w replicated on all 16, its gradient
    AllReduce spans the two nodes hierarchically; ((2, 1), (1, 8)) leaves w's replicas on the
    axis of size 2 (stride 8: ranks {0, 8}): one device per node, a ring over InfiniBand."""
    g = mlp_graph()
    cm = CostModel(g, 16, "dgx-a100")
    nbytes = 256 * 1024 * 4
    (sync,) = cm.check(g.ops[0], ((16, 1), (1, 1))).collectives
    nv, ib = (300e9, 8e-6), (25e9, 15e-6)
    want = 2 * (7 / 8 * nbytes / nv[0] + nv[1]) + nbytes / 8 / ib[0] + ib[1]
    assert cm.collective_seconds(sync) == pytest.approx(want)
    (sync,) = cm.check(g.ops[0], ((2, 1), (1, 8))).collectives
    assert sync.group == 2
    assert cm.collective_seconds(sync) == pytest.approx(nbytes / 8 / ib[0] + ib[1])


def test_elementwise_is_memory_bound_and_reshape_is_free():
    """Add of a (512, 1024) fp32 tensor and a (1024,) bias cut 8-way on the rows, on
    atlas-800t-a2: forward reads 64·1024·4 + 1024·4 bytes and writes 64·1024·4 over 1.6 TB/s;
    its 64·1024 FLOPs on the vector unit (313/16 TFLOP/s) take far less. One 10 us launch
    forward; backward one launch per input with a gradient (the activation and the bias)."""
    g = mlp_graph()
    cm = CostModel(g, 8, "atlas-800t-a2")
    c = cm.check(g.ops[2], ((8, 1), (1,)))
    a, b = 64 * 1024 * 4, 1024 * 4
    fwd = 10e-6 + (a + b + a) / 1.6e12
    bwd = 2 * 10e-6 + max(float(c.flops_bwd) / (313e12 / 16), (a + (a + b) + (a + b)) / 1.6e12)
    assert cm.compute_seconds(c) == pytest.approx((fwd, bwd))
    # Reshape: a nop node in MindSpore's kernel graph: no launch, no bytes
    for option in cm.options(g.ops[1]):
        assert cm.compute_seconds(option) == (0.0, 0.0)


def test_roofline_by_hand():
    """A 4096³ bf16 MatMul on dgx-h100: 2·4096³ FLOPs / 989 TFLOP/s = 139 us against
    3·4096²·2 bytes / 3.35 TB/s = 30 us: compute-bound; plus one 4 us launch."""
    h100 = PRESETS["dgx-h100"]
    n = 4096
    nbytes, _, launches, _ = traffic("MatMul", [n * n * 2, n * n * 2], [n * n * 2], [False, True])
    assert nbytes == 3 * n * n * 2
    got = kernel_seconds(2 * n ** 3, nbytes, launches, "cube", h100)
    assert got == pytest.approx(4e-6 + 2 * n ** 3 / 989e12)


def test_wave_quantization_by_hand():
    """dgx-a100: 108 SMs, one 256x128 output tile each (NVIDIA's GEMM guide §3.2).
    A 2048 x 5400 output: 8 x ceil(5400/128) = 8 x 43 = 344 tiles, ceil(344/108) = 4 waves of
    108·256·128 outputs for 2048·5400 useful ones; 4096 x 5400 (a batch of two 2048 x 5400):
    688 tiles, 7 waves; under one wave (4 tiles) no factor (smaller tiles, not modelled); the
    Ascend preset has none."""
    a100 = PRESETS["dgx-a100"]
    wave = 108 * 256 * 128
    assert wave_quantization((2048, 5400), a100) == pytest.approx(4 * wave / (2048 * 5400))
    assert wave_quantization((2, 2048, 5400), a100) == pytest.approx(7 * wave / (4096 * 5400))
    assert wave_quantization((4, 256, 128), a100) == 1.0
    assert wave_quantization((2048, 5400), PRESETS["atlas-800t-a2"]) == 1.0
    # in the cost model: x (4096, 1024) bf16 @ w (1024, 5400) cut ((2, 1), (1, 1)) on 2
    # devices: output slice 2048 x 5400 (4 waves, above); backward only dw = xᵀ·dout (x is a
    # network input): w's slice 1024 x 5400 is 4 x 43 = 172 tiles, 2 waves
    t = {"x": TensorInfo("x", (4096, 1024), "float16", "input", consumers=[0]),
         "w": TensorInfo("w", (1024, 5400), "float16", "parameter", consumers=[0]),
         "h": TensorInfo("h", (4096, 5400), "float16", producer=0)}
    g = OpGraph([OpNode(0, "MatMul", ["x", "w"], ["h"], {"transpose_a": False,
                                                          "transpose_b": False}, "w.matmul")],
                t, ["x"], ["h"], "one")
    cm = CostModel(g, 2, "dgx-a100")
    c = cm.check(g.ops[0], ((2, 1), (1, 1)))
    assert c.quantization_fwd == pytest.approx(4 * wave / (2048 * 5400))
    assert c.quantization_bwd == pytest.approx(2 * wave / (1024 * 5400))
    flops = 2 * 2048 * 1024 * 5400
    nbytes = (2048 * 1024 + 1024 * 5400 + 2048 * 5400) * 2
    assert cm.compute_seconds(c)[0] == pytest.approx(
        5e-6 + max(flops * 4 * wave / (2048 * 5400) / 312e12, nbytes / 2.039e12))


def test_hardware_file_and_devices_per_node(tmp_path):
    desc = PRESETS["dgx-a100"].to_dict()
    desc["name"] = "mine"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(desc))
    m = get_hardware(str(path), devices_per_node=4)
    assert m.name == "mine" and m.devices_per_node == 4 and m.cube_flops == 312e12
    assert m.matrix_units == 108 and m.gemm_tile == (256, 128)
    yaml_path = tmp_path / "mine.yaml"
    yaml_path.write_text("cube_flops: 1e14\nvector_flops: 1e13\nhbm_bandwidth: 1.0e+12\n"
                         "memory: 17179869184\nlaunch_latency: 5.0e-6\nlevels:\n"
                         "  - {name: node, count: 4, bandwidth: 5.0e+10, latency: 1.0e-5}\n"
                         "  - {name: cluster, bandwidth: 1.0e+10, latency: 2.0e-5}\n")
    m = get_hardware(str(yaml_path))
    assert m.name == "mine" and m.levels == (Level("node", 4, 5e10, 1e-5),
                                             Level("cluster", None, 1e10, 2e-5))
    bad = dict(desc, cube_flops=-1, speed=3)
    bad["levels"] = [dict(desc["levels"][0], count=0), desc["levels"][1]]
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError) as err:
        get_hardware(str(path))
    lines = str(err.value).splitlines()     # every bad field at once, not the unknown one alone
    assert lines == [f"hardware file {path}:", "  unknown field 'speed'",
                     "  cube_flops must be a positive number, got -1",
                     "  levels[0] (node): count must be a positive integer, got 0"]
    path.write_text(json.dumps(dict(desc, speed=3)))
    with pytest.raises(ValueError) as err:
        get_hardware(str(path))
    assert str(err.value) == f"hardware file {path}: unknown field 'speed'"   # one bad field
    path.write_text(json.dumps(dict(desc, cube_flops=-1, levels=bad["levels"])))
    with pytest.raises(ValueError) as err:
        get_hardware(str(path))
    lines = str(err.value).splitlines()     # several: one line each under the file's name
    assert lines[0] == f"hardware file {path}:"
    assert "  cube_flops must be a positive number, got -1" in lines
    assert "  levels[0] (node): count must be a positive integer, got 0" in lines
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        get_hardware(str(path))
    with pytest.raises(ValueError, match="single level"):
        Machine("one", 1.0, 1.0, 1.0, 1.0, 1.0, (Level("node", None, 1.0, 1.0),)
                ).with_devices_per_node(2)


def test_grad_sync_schedule_against_a_hand_built_timeline():
    """Four operators in backward order, backward 3, 1, 2, 4 s (ends at 3, 4, 6, 10); gradients
    of 40, 30, 0 and 50 MB with syncs of 5, 2, 0, 1 s; buckets of 64 MB: {0} (40 + 30 > 64),
    {1} (30 + 50 > 64), {3}. Communication stream by hand: bucket {0} ready at 3, runs 3..8;
    {1} ready at 4, waits for the stream, runs 8..10; {3} ready at 10, runs 10..11. The
    backward ends at 10: 1 s exposed."""
    from smsg_ms.cost.overlap import fusion_buckets, grad_sync_schedule

    mb = 2**20
    grads = [40 * mb, 30 * mb, 0, 50 * mb]
    assert fusion_buckets(grads) == [[0], [1], [3]]
    assert grad_sync_schedule([3, 1, 2, 4], [5, 2, 0, 1], grads) == 1.0
    # with 100 MB buckets (40 + 30 fit, + 50 does not): {0, 1} ready at 4, runs 4..11; {3}
    # ready at 10, waits, runs 11..12: 2 s
    assert fusion_buckets(grads, 100 * mb) == [[0, 1], [3]]
    assert grad_sync_schedule([3, 1, 2, 4], [5, 2, 0, 1], grads, 100 * mb) == 2.0
    # a long backward after the syncs hides them all but the last bucket's
    assert grad_sync_schedule([1, 1, 1, 20], [5, 2, 0, 1], grads) == 1.0


def test_search_rule_never_undercounts_the_steady_state():
    """Identical layers of two operators (backward 2 s and 1 s, syncs 3 s and 0.5 s): in the
    steady state each layer's syncs (3.5 s) run beside the next layer's backward (3 s): 0.5 s
    a layer exposed; the per-operator rule gives max(0, 3 − 2) + max(0, 0.5 − 1) = 1 s ≥ 0.5."""
    from smsg_ms.cost.overlap import exposed_grad_sync, grad_sync_schedule

    layers = 50
    per_layer = exposed_grad_sync(3, 2) + exposed_grad_sync(0.5, 1)
    assert per_layer == 1.0
    big = 10 * 2**30   # every sync a bucket of its own
    exact = grad_sync_schedule([2, 1] * layers, [3, 0.5] * layers, [big] * 2 * layers)
    # by hand: the stream falls 0.5 s behind per layer; the first layer's syncs start at 2 s
    # and the stream never idles after: 2 + 3.5·50 − 3·50 = 27 s after the backward's end
    assert exact == pytest.approx(2 + 3.5 * layers - 3 * layers)
    assert per_layer * layers >= exact - 3.5    # all but the last layer's syncs
