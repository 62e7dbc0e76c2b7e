"""A network whose batch axis is declared dynamic: ``y = ReLU(MatMul(x, w))``, ``x (batch,
hidden)``, ``w (hidden, hidden)``, with ``net.set_inputs(Tensor(shape=[None, hidden]))`` (or
``[Symbol(divisor=divisor), hidden]`` when ``divisor`` > 0), as a user who trains on batches of
varying size writes it. Paths: ``matmul``, ``relu``."""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, hidden: int = 16, divisor: int = 0):
    """``(net, inputs)``: the example input is ``batch`` rows; the declared one is dynamic."""
    import mindspore as ms
    from mindspore import Parameter, Tensor, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(Tensor(np.ones((hidden, hidden), np.float32)), name="w")
            self.matmul = ops.MatMul()
            self.relu = ops.ReLU()

        def construct(self, x):
            return self.relu(self.matmul(x, self.w))

    net = Net()
    rows = ms.Symbol(divisor=divisor) if divisor > 0 else None
    net.set_inputs(Tensor(shape=[rows, hidden], dtype=ms.float32))
    return net, (Tensor(np.ones((batch, hidden), np.float32)),)
