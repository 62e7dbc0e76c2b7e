"""Graph capture: operators, tensors, paths, training graph, and bad input.

Expected counts and shapes are derived here from the network definitions in smsg_ms/networks/.
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from smsg_ms.graph.capture import CaptureError, capture, capture_network, capture_training_graph
from smsg_ms.graph.mindir import PLUMBING, _primitive_path, cell_path_of_scope
from smsg_ms.graph.model import OpGraph
from smsg_ms.networks import NetworkSpecError

LLAMA = dict(layers=2, batch=2, seq=16, hidden=64, heads=4, ffn=96, vocab=100)


@pytest.fixture(scope="module")
def llama(captured):
    return captured("llama", **LLAMA)


@functools.lru_cache(maxsize=None)
def _training():
    return capture_training_graph("llama", **LLAMA)


def test_llama_matmuls_paths_and_weight_shapes(llama):
    h, f, v, layers = LLAMA["hidden"], LLAMA["ffn"], LLAMA["vocab"], LLAMA["layers"]
    tokens = LLAMA["batch"] * LLAMA["seq"]
    mm = {op.prim_path: op for op in llama.ops if op.type == "MatMul"}
    # per layer wq, wk, wv, wo, w1, w3, w2, plus lm_head
    assert len([op for op in llama.ops if op.type == "MatMul"]) == 7 * layers + 1
    expected = {"attention.wq": (h, h), "attention.wk": (h, h), "attention.wv": (h, h),
                "attention.wo": (h, h), "feed_forward.w1": (h, f), "feed_forward.w3": (h, f),
                "feed_forward.w2": (f, h)}
    for i in range(layers):
        for name, w_shape in expected.items():
            op = mm[f"layers.{i}.{name}.matmul"]
            x, w = (llama.tensors[t] for t in op.inputs)
            assert w.kind == "parameter" and w.shape == w_shape
            assert x.kind == "activation" and x.shape == (tokens, w_shape[0])
            assert llama.tensors[op.outputs[0]].shape == (tokens, w_shape[1])
            assert op.attrs["transpose_a"] is False and op.attrs["transpose_b"] is False
    assert llama.tensors[mm["lm_head.matmul"].outputs[0]].shape == (tokens, v)


def test_attributes_axes_and_transpose_flags(llama):
    by_path = llama.by_path()
    qk = by_path["layers.0.attention.qk"][0]
    assert qk.type == "BatchMatMul" and qk.attrs["transpose_b"] is True
    assert by_path["layers.0.attention.pv"][0].attrs["transpose_b"] is False
    assert by_path["layers.0.attention.softmax"][0].attrs["axis"] in (-1, [-1])
    assert by_path["layers.0.attention.merge_transpose"][0].attrs["dims"] == [0, 2, 1, 3]
    heads = LLAMA["heads"]
    assert by_path["layers.0.attention.reshape"][0].attrs["shape"] == [
        LLAMA["batch"], LLAMA["seq"], heads, LLAMA["hidden"] // heads]


def test_call_index_counts_calls_of_one_primitive(llama):
    # split_heads uses the same reshape/transpose for q, k and v: three calls each
    calls = llama.by_path()["layers.1.attention.reshape"]
    assert [op.call_index for op in calls] == [0, 1, 2]
    assert [op.label for op in calls][1] == "layers.1.attention.reshape#1"


def test_tensors_inputs_parameters_and_edges(llama):
    assert len(llama.inputs) == 1
    ids = llama.tensors[llama.inputs[0]]
    assert ids.kind == "input" and ids.shape == (LLAMA["batch"], LLAMA["seq"])
    assert ids.dtype == "int32"
    # embedding, per layer 2 norms + 7 linears, final norm, lm_head
    assert len(llama.parameters()) == 1 + 9 * LLAMA["layers"] + 2
    for op in llama.ops:
        assert op.type not in PLUMBING
        for t in op.inputs:
            assert op.id in llama.tensors[t].consumers
        for t in op.outputs:
            assert llama.tensors[t].producer == op.id
    for src, dst, _, _ in llama.iter_edges():
        assert src < dst  # topological order


def test_json_round_trip_is_identical(llama):
    again = OpGraph.from_json(llama.to_json())
    assert again.to_json() == llama.to_json()
    assert again.fingerprint() == llama.fingerprint()


def test_scope_to_cell_path():
    scope = "Default/network-_WithLoss/network-Net/layers-CellList/3-Layer/wq-Linear/MatMul-op0"
    assert cell_path_of_scope(scope, wrappers=2) == "layers.3.wq"
    assert cell_path_of_scope("Gradients/" + scope, wrappers=2) == "layers.3.wq"


def test_primitive_path_recovered_from_scope_when_tag_lost(caplog):
    import logging

    hints = {"block": {"MatMul": ["block.first", "block.second"]}, "fc": {"MatMul": ["fc.mm"]}}
    warnings: list[str] = []
    assert _primitive_path(None, "MatMul", "Default/fc-Dense/MatMul-op0", hints, warnings) == \
        "fc.mm"
    # two candidates: the op index of the scope picks one, said in a debug line (routine for a
    # cell with several MatMuls), not as a capture warning
    with caplog.at_level(logging.DEBUG, logger="smsg_ms.graph.mindir"):
        got = _primitive_path(None, "MatMul", "Default/block-Two/MatMul-op1", hints, warnings)
    assert got == "block.second" and warnings == []
    assert "assumed block.second (call order)" in caplog.text
    # a wrong tag (MindSpore merged equal primitives) is corrected by the cell
    assert _primitive_path("fc.mm", "MatMul", "Default/block-Two/MatMul-op0", hints, []) == \
        "block.first"


def test_two_matmuls_in_one_cell_keep_their_paths(captured):
    g = captured("smsg_ms.networks.probes:two_matmuls", batch=8, hidden=16)
    mm = [op for op in g.ops if op.type == "MatMul"]
    # construct: second(second(first(x, w1), w2), w2)
    assert [(op.prim_path, op.call_index, op.attrs["transpose_b"]) for op in mm] == [
        ("block.first", 0, False), ("block.second", 0, True), ("block.second", 1, True)]


def test_training_graph_has_backward_and_optimizer(llama):
    tc = _training()
    g, layers = tc.graph, LLAMA["layers"]
    phases = Counter((op.type, op.phase) for op in g.ops)
    n_mm = 7 * layers + 1
    assert phases[("MatMul", "forward")] == n_mm
    # every MatMul's input depends on the trained embedding: dx and dW per MatMul
    assert phases[("MatMul", "backward")] == 2 * n_mm
    # two BatchMatMuls per layer forward, two gradients each
    assert phases[("BatchMatMul", "forward")] == 2 * layers
    assert phases[("BatchMatMul", "backward")] == 4 * layers
    assert phases[("ApplyMomentum", "optimizer")] == 1 + 9 * layers + 2
    assert all(op.prim_path is None for op in g.ops if op.phase != "forward")
    assert {op.prim_path for op in g.ops if op.type == "MatMul" and op.phase == "forward"} == \
        {op.prim_path for op in llama.ops if op.type == "MatMul"}
    assert tc.collectives == []  # one device: nothing to communicate


# ---- bad input -----------------------------------------------------------------------------

def _cells():
    import mindspore as ms
    from mindspore import nn, ops

    class Linear(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(np.ones((4, 4), np.float32)), name="w")
            self.mm = ops.MatMul()

        def construct(self, x):
            return self.mm(x, self.w)

    class Branchy(Linear):
        def __init__(self):
            super().__init__()
            self.relu, self.sum = ops.ReLU(), ops.ReduceSum()

        def construct(self, x):
            y = self.mm(x, self.w)
            if self.sum(y) > 0:
                y = self.relu(y)
            return y

    class Broken(nn.Cell):
        def construct(self, x):
            return undefined_function(x)  # noqa: F821

    return Linear, Branchy, Broken


def test_wrong_input_rank_is_one_clear_error_and_leaves_no_files(tmp_path, monkeypatch):
    import mindspore as ms
    monkeypatch.chdir(tmp_path)
    linear, _, _ = _cells()
    with pytest.raises(CaptureError, match="could not compile Linear.*MatMul") as err:
        capture(linear(), ms.Tensor(np.ones((2, 2, 4), np.float32)))
    assert "C++ Call Stack" not in str(err.value)
    # MindSpore writes rank_0/om/analyze_fail.ir on a failed compile: not in the user's folder
    assert list(tmp_path.iterdir()) == []


def test_construct_that_does_not_compile_is_a_capture_error():
    import mindspore as ms
    _, _, broken = _cells()
    with pytest.raises(CaptureError, match="Broken.*NameError.*undefined_function"):
        capture(broken(), ms.Tensor(np.ones((2, 4), np.float32)))


def test_tensor_dependent_branch_is_a_warning_naming_the_op():
    import mindspore as ms
    _, branchy, _ = _cells()
    g = capture(branchy(), ms.Tensor(np.ones((2, 4), np.float32)))
    assert any("control flow" in w and "Switch" in w for w in g.warnings)
    assert [op.prim_path for op in g.ops if op.type == "MatMul"] == ["mm"]
    # the comparison `> 0` is a functional call: costed, never sharded
    greater = [op for op in g.ops if op.type == "Greater"]
    assert greater and not greater[0].shardable and greater[0].label.startswith("Greater@")


def test_dynamic_dims_become_symbolic_and_are_listed():
    import mindspore as ms
    linear, _, _ = _cells()
    g = capture(linear(), ms.Tensor(shape=[None, 4], dtype=ms.float32))
    (mm,) = g.ops
    x, out = g.tensors[mm.inputs[0]], g.tensors[mm.outputs[0]]
    assert isinstance(x.shape[0], str) and x.shape[1] == 4
    assert isinstance(out.shape[0], str) and out.numel is None
    assert any("dynamic" in w and "'mm'" in w for w in g.warnings)


def test_spec_function_that_raises_names_its_message():
    with pytest.raises(CaptureError, match="failing.*no such width: 3"):
        capture_network("smsg_ms.networks.probes:failing", width=3)


def test_unknown_spec_and_option_are_refused():
    with pytest.raises(CaptureError, match="unknown network 'nope'"):
        capture_network("nope")
    with pytest.raises(CaptureError, match="takes no option colour"):
        capture_network("mlp", colour=1)


def test_network_spec_error_in_process():
    from smsg_ms.networks import build_network
    with pytest.raises(NetworkSpecError, match="no such width: 7"):
        build_network("smsg_ms.networks.probes:failing", width=7)


def test_capture_records_what_training_calls():
    """Capture runs the network in training mode, as the training step does: nn.BatchNorm2d is
    recorded as its ``bn_train`` primitive (``is_training`` True, its input 5), never the eval
    ``bn_infer``, and nn.Dropout is present (skipped in eval mode). Both capture paths: the child
    process (``capture_network``) and a live cell (``capture``)."""
    from smsg_ms.networks import build_network

    child = capture_network("smsg_ms.networks.probes:conv_bn_dropout")
    built = build_network("smsg_ms.networks.probes:conv_bn_dropout")
    live = capture(built.net, *built.inputs)
    for graph in (child, live):
        kinds = {op.type: op for op in graph.ops}
        assert sorted(kinds) == ["BatchNorm", "Conv2D", "Dropout"]
        assert kinds["BatchNorm"].prim_path == "bn.bn_train"
        assert kinds["BatchNorm"].attrs["input5"] is True
        assert kinds["Dropout"].prim_path == "drop.dropout"


def test_closure_variable_order_in_node_names_is_canonical():
    """MindSpore lists a node's closure variables (after ``$``) in an order that varies between
    runs; both orders must give one tensor name, or plans stop being byte-identical."""
    from smsg_ms.graph.mindir import _canonical_name

    assert _canonical_name("CNode_116$v$h:118") == _canonical_name("CNode_116$h$v:118")
    assert _canonical_name("CNode_116$v$h:118") == "CNode_116$h$v:118"
    assert _canonical_name("CNode_9$h:3") == "CNode_9$h:3"
    assert _canonical_name("x:4") == "x:4"
