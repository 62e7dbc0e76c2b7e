"""One primitive called twice, and the same network with two primitives (scoring per call).

``x (batch, width) → relu → matmul(w1) → relu → matmul(w2)``: :func:`shared` calls one ReLU
primitive at both places (ResNet's Bottleneck calls its ``relu`` three times), :func:`distinct`
has ``relu_a`` and ``relu_b``. Their graphs differ only in which primitive each call belongs
to, so any strategies give both the same cost.
"""
from __future__ import annotations

import numpy as np


def _build(two: bool, batch: int, width: int):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.relu_a = ops.ReLU()
            self.relu_b = ops.ReLU() if two else self.relu_a
            self.mm1 = ops.MatMul()
            self.mm2 = ops.MatMul()
            self.w1 = Parameter(ms.Tensor(np.ones((width, width), np.float32)), name="w1")
            self.w2 = Parameter(ms.Tensor(np.ones((width, width), np.float32)), name="w2")

        def construct(self, x):
            return self.mm2(self.relu_b(self.mm1(self.relu_a(x), self.w1)), self.w2)

    x = ms.Tensor(np.ones((batch, width), np.float32))
    return {"net": Net(), "inputs": (x,)}


def shared(batch: int = 64, width: int = 256):
    """One ReLU primitive (``relu_a``) called twice."""
    return _build(False, batch, width)


def distinct(batch: int = 64, width: int = 256):
    """Two ReLU primitives (``relu_a``, ``relu_b``)."""
    return _build(True, batch, width)
