"""Graphs at other batch sizes from two captures (smsg_ms.graph.batch_scale): the oracle is a
fresh capture by MindSpore at that batch size, compared field by field (JSON form)."""
from __future__ import annotations

import copy

import pytest

from smsg_ms.graph.batch_scale import BatchFamily, BatchScaleError, BatchTemplate, rescale_batch

LLAMA = {"layers": 2, "seq": 32, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 96}
MF_LLAMA = {"layers": 2, "seq": 32, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 96}


@pytest.mark.parametrize("spec,net", [("llama", LLAMA), ("mf-llama", MF_LLAMA)])
def test_rescaled_graph_equals_a_fresh_capture(captured, spec, net):
    if spec == "mf-llama":
        pytest.importorskip("mindformers")
    g2, g3 = captured(spec, batch=2, **net), captured(spec, batch=3, **net)
    template = BatchTemplate(g2, 2, g3, 3)
    assert template.shapes and template.attrs is not None
    for b in (2, 3, 8):
        assert template.graph(b).to_json() == captured(spec, batch=b, **net).to_json(), b


def test_batch_family_captures_two_batch_sizes_only(captured):
    calls = []

    def capture(b):
        calls.append(b)
        return captured("llama", batch=b, **LLAMA)

    family = BatchFamily(capture)
    graphs = {b: family(b) for b in (8, 2, 4, 8, 1)}
    assert calls == [8, 2] and family.captures == 2 and family.rescale_error is None
    for b in (4, 1):
        assert graphs[b].to_json() == captured("llama", batch=b, **LLAMA).to_json()


def test_not_proportional_is_refused_naming_the_tensor(captured):
    g2, g3 = captured("llama", batch=2, **LLAMA), captured("llama", batch=3, **LLAMA)
    bad = copy.deepcopy(g3)
    name = bad.inputs[0]
    shape = list(bad.tensors[name].shape)
    shape[0] = 5                                      # 2 -> 5 is not 2 -> 3 scaled
    bad.tensors[name].shape = tuple(shape)
    with pytest.raises(BatchScaleError, match=f"tensor {name} shape"):
        rescale_batch(g2, 2, bad, 3, 4)
    with pytest.raises(BatchScaleError, match="same batch size"):
        BatchTemplate(g2, 2, g2, 2)
    with pytest.raises(BatchScaleError, match="positive integer"):
        rescale_batch(g2, 2, g3, 3, 0)


def test_family_falls_back_to_capturing_when_anchors_do_not_rescale(captured):
    calls = []

    def capture(b):
        calls.append(b)
        g = captured("llama", batch=b, **LLAMA)
        if b == 3:                                   # a structural change between anchors
            g = copy.deepcopy(g)
            g.ops[0].attrs["smsg_test_marker"] = True
        return g

    family = BatchFamily(capture)
    family(2), family(3)
    got = family(4)
    assert calls == [2, 3, 4] and "smsg_test_marker" in family.rescale_error
    assert got.to_json() == captured("llama", batch=4, **LLAMA).to_json()
