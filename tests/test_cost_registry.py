"""The operator registry's queries, the Reshape gather rule's one home, and the one
collective-seconds formula (issue #15)."""
from __future__ import annotations

import numpy as np
import pytest

from smsg_ms.cost import operators
from smsg_ms.cost.api import collective_seconds
from smsg_ms.cost.layout import TensorLayout
from smsg_ms.cost.model import CostModel
from smsg_ms.cost.operators import reshape
from smsg_ms.cost.pipeline import Links, ParamSlice
from smsg_ms.graph.model import OpGraph, OpNode, TensorInfo


@pytest.mark.parametrize("op_type, refused, through, own", [
    ("Reshape", True, False, False),     # MindSpore: shard() "goes for nothing"
    ("Cast", False, True, False),        # no OperatorInfo: layout passes through
    ("OneHot", False, False, True),      # strategy over the output: its own rule
    ("MatMul", False, False, False),
    ("NoSuchPrimitive", False, False, False),
])
def test_registry_queries(op_type, refused, through, own):
    assert operators.shard_refused(op_type) is refused
    assert operators.passes_layout_through(op_type) is through
    assert operators.priced_by_own_rule(op_type) is own


def test_every_type_has_one_family():
    seen = {}
    for module in operators.MODULES:
        for op_type in module.TYPES:
            assert op_type not in seen, f"{op_type} in {seen.get(op_type)} and {module.__name__}"
            seen[op_type] = module.__name__
            assert operators.shard_mode(op_type) in operators.SHARD_MODES


def test_passthrough_options_refuse_other_operators():
    t = {"a": TensorInfo("a", (8, 16), "float32", producer=None),
         "b": TensorInfo("b", (8, 16), "float32", producer=0)}
    g = OpGraph([OpNode(0, "ReLU", ["a"], ["b"], {}, "r")], t, ["a"], ["b"])
    with pytest.raises(ValueError, match="not a pass-through"):
        CostModel(g, 8).passthrough_options(g.ops[0])


def _heads_graph():
    """ReLU → Reshape (32, 768) → (32, 12, 64) → ReLU."""
    t = {"x": TensorInfo("x", (32, 768), "float32", producer=None),
         "a": TensorInfo("a", (32, 768), "float32", producer=0),
         "b": TensorInfo("b", (32, 12, 64), "float32", producer=1),
         "c": TensorInfo("c", (32, 12, 64), "float32", producer=2)}
    ops = [OpNode(0, "ReLU", ["x"], ["a"], {}, "r0"), OpNode(1, "Reshape", ["a"], ["b"], {}, "rs"),
           OpNode(2, "ReLU", ["b"], ["c"], {}, "r2")]
    return OpGraph(ops, t, ["x"], ["c"])


def test_edge_destination_is_replicated_where_the_reshape_gathers():
    """768 cut 8 is 1.5 heads per device: MindSpore gathers (D9); cut 4 is 3 heads: it passes."""
    g = _heads_graph()
    relu, rs = g.ops[0], g.ops[1]
    wanted = TensorLayout.from_cuts((4, 1), 8)
    straddles, whole_heads = TensorLayout.from_cuts((1, 8), 8), TensorLayout.from_cuts((1, 4), 8)
    got = reshape.edge_destination(g, relu, rs, "a", straddles, wanted, 8)
    assert got == TensorLayout.replicated(2, 8)
    assert reshape.edge_destination(g, relu, rs, "a", whole_heads, wanted, 8) == wanted
    # out of the Reshape: 12 heads cut 4 are whole heads; cut 8 they are not (12 / 8), so the
    # Reshape's output is gathered first
    heads4, heads8 = TensorLayout.from_cuts((1, 4, 1), 8), TensorLayout.from_cuts((1, 8, 1), 8)
    assert reshape.edge_destination(g, rs, g.ops[2], "b", heads4, heads4, 8) == heads4
    assert reshape.edge_destination(g, rs, g.ops[2], "b", heads4, heads8, 8) == \
        TensorLayout.replicated(3, 8)


def test_through_reshape_block_charges_the_gather():
    g = _heads_graph()
    model = CostModel(g, 8)
    relu, rs, tensor = g.ops[0], g.ops[1], g.tensors["a"]
    src = [TensorLayout.from_cuts((1, 8), 8), TensorLayout.from_cuts((1, 4), 8)]
    dst = [TensorLayout.from_cuts((1, 4), 8)]
    block = reshape.through_reshape_block(model, relu, rs, tensor, src, dst, np.zeros((2, 1)))
    whole = TensorLayout.replicated(2, 8)
    assert block[0, 0] == model.redistribution_seconds(tensor, src[0], whole) > 0
    assert block[1, 0] == 0.0
    untouched = np.zeros((2, 1))
    assert reshape.through_reshape_block(model, relu, g.ops[2], tensor, src, dst,
                                         untouched) is untouched


def test_collective_seconds_is_ring_volume_over_bandwidth_plus_latency():
    # on one level: AllReduce of 8 bytes over 4 devices: 2·3/4·8 = 12 bytes sent; 12 / 2 + 1
    one = ((2.0, 1.0),)
    assert collective_seconds("AllReduce", (4,), 8, one) == 7.0
    assert collective_seconds("AllReduce", (4,), 8, one, synchronisations=2) == 8.0
    assert collective_seconds("AllGather", (1,), 8, one) == 0.0
    got = collective_seconds("AllGather", (np.array([2, 4]),), np.array([8, 8]), one)
    assert got.tolist() == [3.0, 4.0]   # (1/2·8) / 2 + 1, (3/4·8) / 2 + 1


def test_pipeline_grad_sync_uses_the_same_formula():
    links = Links(bandwidth=2.0, latency=1.0)
    param = ParamSlice(elements=2, first_axis=2, replicas=4)
    assert links.grad_sync_seconds(param, 4.0, sharded=False) == 7.0
    assert links.grad_sync_seconds(param, 4.0, sharded=True) == 8.0
    assert links.grad_sync_seconds(ParamSlice(2, 2, 1), 4.0, sharded=False) == 0.0
    # a Send of 8 bytes: 8 / 2 + 1; over its own point-to-point link: 8 / 8 + 1
    assert links.send_seconds(8) == 5.0 and links.send_seconds(0) == 0.0
    assert Links(bandwidth=2.0, latency=1.0, p2p_bandwidth=8.0).send_seconds(8) == 2.0


def test_dense_reads_its_weight_as_out_by_in():
    # mindspore.ops.Dense is x · wᵀ + b with w (out, in): mindformers' MoE router maps 512-wide
    # tokens to 128 expert scores with a (128, 512) fp32 weight. Replicated on 4 devices, its
    # gradient AllReduce moves the whole weight, 128·512·4 = 262,144 bytes (the dry-run's
    # inserted router AllReduce is [128, 512] float32), not 512·512·4 as a (k, n) reading gives
    t = {"x": TensorInfo("x", (1024, 512), "float32", producer=None, kind="input", consumers=[0]),
         "w": TensorInfo("w", (128, 512), "float32", producer=None, kind="parameter",
                         consumers=[0]),
         "y": TensorInfo("y", (1024, 128), "float32", producer=0)}
    g = OpGraph([OpNode(0, "Dense", ["x", "w"], ["y"], {}, "router.linear")], t, ["x"], ["y"])
    model = CostModel(g, 4)
    whole = next(c for c in model.options(g.ops[0]) if c.strategy == ((4, 1), (1, 1)))
    sync = [c for c in whole.collectives if c.phase == "grad_sync"]
    assert [(c.group, c.full_bytes) for c in sync] == [(4, 128 * 512 * 4)]
    assert whole.memory["parameter"] == 128 * 512 * 4
