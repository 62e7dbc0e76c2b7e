"""MindSpore 2.10 treats a Cast as no parallel operator: its output keeps its input's layout
and a ``shard()`` on it changes nothing. The planner relies on this (Casts are free
pass-throughs, never written back); this pins the fact with the dry-run compile."""
from __future__ import annotations

import os

import pytest

NET = '''
import numpy as np
import mindspore as ms
from mindspore import nn, ops


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mm = ops.MatMul()
        self.relu = ops.ReLU()
        self.cast = ops.Cast()
        self.relu2 = ops.ReLU()
        self.w = ms.Parameter(ms.Tensor(np.ones((32, 32), np.float32)), name="w")

    def construct(self, x):
        return self.relu2(self.cast(self.relu(self.mm(x, self.w)), ms.float16))


def build(**options):
    return Net(), (ms.Tensor(np.ones((16, 32), np.float32)),)
'''
BASE = {"mm": [[8, 1], [1, 1]], "relu": [[8, 1]], "relu2": [[1, 8]]}


@pytest.fixture(scope="module")
def castnet(tmp_path_factory):
    where = tmp_path_factory.mktemp("castnet")
    (where / "castnet_spec.py").write_text(NET)
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (old, str(where)) if p)
    yield "castnet_spec:build"
    os.environ["PYTHONPATH"] = old


def _collectives(spec, strategies):
    from smsg_ms.dryrun.runner import run_child

    out = run_child({"job": "compile", "spec": spec, "strategies": strategies}, devices=8)
    return sorted((c["type"], c["pass"], c["grad_sync"], c["group_size"], tuple(c["in_shape"]),
                   c["dtype"]) for c in out["collectives"])


def test_a_cast_strategy_changes_no_collective(castnet):
    plain = _collectives(castnet, BASE)
    # the (8,1) → (1,8) move happens after the Cast: in float16
    assert any(c[0] == "AllGather" and c[5] == "float16" for c in plain)
    for cast in ([[1, 8]], [[8, 1]]):
        assert _collectives(castnet, {**BASE, "cast": cast}) == plain
