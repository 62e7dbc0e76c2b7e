"""``smsg-ms graph`` end to end in a subprocess: the operator table and the warning about operator
types the cost model does not know. Expected counts are read off the network defined here."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NETWORK = '''
import numpy as np
import mindspore as ms
from mindspore import nn, ops


class Net(nn.Cell):
    def __init__(self, width):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(np.zeros((width, width), np.float32)), name="w1")
        self.w2 = ms.Parameter(ms.Tensor(np.zeros((width, width), np.float32)), name="w2")
        self.first = ops.MatMul()
        self.second = ops.MatMul()
        self.relu = ops.ReLU()
        self.cumsum = ops.CumSum()
        self.sort = ops.Sort(axis=-1)

    def construct(self, x):
        y = self.relu(self.first(x, self.w1))
        y = self.cumsum(y, 1)
        y, _ = self.sort(y)
        return self.second(y, self.w2)


def build(batch=4, width=8):
    return Net(width), (ms.Tensor(np.zeros((batch, width), np.float32)),)
'''


def test_graph_command_lists_counts_and_unknown_operators(tmp_path):
    (tmp_path / "cumnet.py").write_text(NETWORK)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    exe = shutil.which("smsg-ms")
    cmd = [exe] if exe else [sys.executable, "-m", "smsg_ms.cli"]
    proc = subprocess.run(cmd + ["graph", "cumnet:build", "--batch", "3"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    # the definition above: two MatMul primitives, one each of ReLU, CumSum, Sort
    rows = dict(re.findall(r"│ (\w+)\s+│\s+(\d+) │", out))
    assert rows == {"MatMul": "2", "ReLU": "1", "CumSum": "1", "Sort": "1"}
    assert "cumnet: 5 operators" in out
    # two width×width fp32 weights, width 8 by default
    assert "parameters: 2 tensors, 128 elements, 512 bytes" in out
    # no cost family declares Sort (MatMul, ReLU and, since expert parallel's router, CumSum
    # have one: cost/operators/routing.py)
    (line,) = [ln for ln in out.splitlines() if "unknown to the cost model" in ln]
    assert "1 operator of 1 type unknown" in line and "Sort ×1" in line and "CumSum" not in line
    assert "MatMul" not in line and "ReLU" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) in (["cumnet.py"],
                                                          ["__pycache__", "cumnet.py"])
