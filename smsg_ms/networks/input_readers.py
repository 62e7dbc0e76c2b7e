"""A data input read by two primitives: ``x → MatMul(w1)`` and ``x → MatMul(w2ᵀ)``, summed.

``x (batch, width)`` float32; labels ``(batch, width)`` for an MSE loss. The two readers may take
``x`` in different layouts; MindSpore's data set gives ``x`` one layout (``dataset_strategy``,
one cut dimension at most) and redistributes into every reader that needs another: the
regression case of :mod:`smsg_ms.planner.data_inputs`.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 64, width: int = 256):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class TwoReaders(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w1 = Parameter(ms.Tensor(np.zeros((width, width), np.float32)), name="w1")
            self.w2 = Parameter(ms.Tensor(np.zeros((width, width), np.float32)), name="w2")
            self.mm1 = ops.MatMul()
            # w2 stored (out, in) as Dense keeps it: the two weights' gradients are different
            # expressions (x^T·g and g^T·x); with both plain, MindSpore computes x^T·g once for
            # both (common subexpression) and inserts one gradient AllReduce under data parallel
            self.mm2 = ops.MatMul(transpose_b=True)
            self.add = ops.Add()

        def construct(self, x):
            return self.add(self.mm1(x, self.w1), self.mm2(x, self.w2))

    x = ms.Tensor(np.zeros((batch, width), np.float32))
    y = ms.Tensor(np.zeros((batch, width), np.float32))
    return {"net": TwoReaders(), "inputs": (x,), "loss": nn.MSELoss(), "labels": (y,)}
