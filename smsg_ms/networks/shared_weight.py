"""A weight read by two primitives that lay it out with their own device matrices:
``h = MatMul(x, w)`` and ``g = Mul(z, w)``, ``y = h + ReduceSum(g, 0)`` for an MSE loss
(``x (rows, k)``, ``z (k, n)``, ``w (k, n)``, float32).

MindSpore gives a parameter one layout whatever the number of its users and compares the
users' layouts by the ranks along each dimension's cutting axis (``IsSameTensorLayout``,
``frontend/parallel/step_parallel_utils.cc``), not by their cuts: on 8 devices the MatMul
``((2, 1), (1, 4))`` (device matrix ``(2, 1, 4)``: ``w``'s columns over stride 1) and the Mul
``((1, 4), (1, 4))`` (``(1, 4)`` plus 2 replicas on the right: columns over stride 2) cut
``w`` alike, ``(1, 4)``, over other ranks, and the compile fails ("has multiple users, but
the TensorInfo are different"); with the MatMul ``((1, 1), (1, 4))`` (``(1, 1, 4)`` plus 2
replicas on the right) the ranks agree and it compiles.
"""
from __future__ import annotations

import numpy as np


def build(rows: int = 8, k: int = 16, n: int = 32):
    """``{"net", "inputs", "loss", "labels"}`` of the network above."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.ones((k, n), np.float32)), name="w")
            self.mm = ops.MatMul()
            self.scale = ops.Mul()
            self.sum = ops.ReduceSum()
            self.add = ops.Add()

        def construct(self, x, z):
            return self.add(self.mm(x, self.w), self.sum(self.scale(z, self.w), 0))

    inputs = (ms.Tensor(np.ones((rows, k), np.float32)), ms.Tensor(np.ones((k, n), np.float32)))
    return {"net": Net(), "inputs": inputs, "loss": nn.MSELoss(),
            "labels": (ms.Tensor(np.zeros((rows, n), np.float32)),)}
