"""Neutral measures: ring volumes, FLOPs on per-device shapes, collective matching (no MindSpore)."""
from __future__ import annotations

import pytest

from smsg_ms.compare import measures
from smsg_ms.compare.hardware import NeutralHardware, get_neutral_hardware
from smsg_ms.compare.runner import match_collectives, spearman


def test_ring_volumes_by_hand():
    # AllReduce of 1 MB over 4 devices: reduce-scatter then all-gather, each 3/4 MB sent.
    assert measures.ring_bytes("AllReduce", 4, 1_000_000) == pytest.approx(1_500_000)
    assert measures.ring_bytes("AllGather", 8, 800) == pytest.approx(700)
    assert measures.ring_bytes("AlltoAll", 2, 100) == pytest.approx(50)
    assert measures.ring_bytes("AllReduce", 1, 100) == 0
    with pytest.raises(ValueError, match="unknown collective kind 'Foo'"):
        measures.ring_bytes("Foo", 2, 1)


def test_allgather_whole_tensor_is_group_times_input():
    c = {"type": "AllGather", "in_shape": [4, 8], "dtype": "float16", "group_size": 4,
         "pass": "forward"}
    assert measures.whole_bytes(c) == 4 * 8 * 2 * 4
    # per device: (g-1)/g * S = 3/4 * 256 = 192 = the 3 slices it receives
    assert measures.collective_bytes([c])["forward"] == {"AllGather": 192.0}


def test_matmul_flops_independent_of_transpose():
    # x (16, 32) @ w^T with w (64, 32): out (16, 64); 2*m*k*n = 2*16*32*64
    expect = 2 * 16 * 32 * 64
    for a in ([16, 32], [32, 16]):  # transpose_a either way holds m*k elements
        op = {"type": "MatMul", "in_shapes": [a, [64, 32]], "out_shape": [16, 64],
              "pass": "forward"}
        assert measures.op_flops(op) == expect
    bmm = {"type": "BatchMatMul", "in_shapes": [[2, 4, 16, 8], [2, 4, 8, 16]],
           "out_shape": [2, 4, 16, 16], "pass": "forward"}
    assert measures.op_flops(bmm) == 2 * 2 * 4 * 16 * 8 * 16


def test_conv_flops_by_hand():
    # 3x3 conv, 16 -> 32 channels, output 1 x 32 x 8 x 8: each output = 16*9 MACs
    op = {"type": "Conv2D", "in_shapes": [[1, 16, 8, 8], [32, 16, 3, 3]],
          "out_shape": [1, 32, 8, 8]}
    assert measures.op_flops(op) == 2 * (32 * 8 * 8) * 16 * 9
    dx = {"type": "Conv2DBackpropInput", "in_shapes": [[1, 32, 8, 8], [32, 16, 3, 3]],
          "out_shape": [1, 16, 8, 8]}
    dw = {"type": "Conv2DBackpropFilter", "in_shapes": [[1, 32, 8, 8], [1, 16, 8, 8]],
          "out_shape": [32, 16, 3, 3]}
    assert measures.op_flops(dx) == measures.op_flops(dw) == measures.op_flops(op)


def test_step_seconds_formula():
    hw = NeutralHardware("toy", peak_flops=1e12, bandwidth=1e9, latency=1e-5)
    assert measures.step_seconds(2e12, 3e9, 4, hw) == pytest.approx(2 + 3 + 4e-5)


def test_unknown_hardware_names_known_presets():
    with pytest.raises(ValueError, match="unknown hardware 'tpu'.*a100"):
        get_neutral_hardware("tpu")


def test_match_collectives_multiset():
    pred = [{"kind": "AllReduce", "group": 4, "phase": "forward"},
            {"kind": "AllReduce", "group": 4, "phase": "forward"},
            {"kind": "AllGather", "group": 2, "phase": "backward"}]
    ins = [{"type": "AllReduce", "group_size": 4, "pass": "forward", "grad_sync": False},
           {"type": "AllReduce", "group_size": 8, "pass": "backward", "grad_sync": True}]
    m = match_collectives(pred, ins)
    assert (m["predicted"], m["inserted"], m["matched"]) == (3, 2, 1)
    assert m["unpredicted"] == ["AllReduce g=8 grad_sync x1"]


def test_spearman_needs_three_rows():
    def row(p, n):
        return {"ok": True, "smsg_score": {"step_seconds": p}, "measures": {"step_seconds": n}}
    assert spearman([row(1, 2), row(2, 3)]) is None
    assert spearman([row(1, 30), row(2, 20), row(3, 10)]) == pytest.approx(-1.0)
