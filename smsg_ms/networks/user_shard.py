"""A user network that calls ``shard()`` itself: ``y = MatMul(x, w)`` with
``MatMul().shard(((2, 1), (1, 4)))`` (8 devices), ``x (batch, k)``, ``w (k, n)``.

Capture runs on one device, where MindSpore rejects that strategy ("requires 8 devices"); the
capture must drop it and still return the graph (the plan or score sets every strategy).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, k: int = 32, n: int = 64):
    """``(net, inputs)`` dict; the MatMul primitive's path is ``mm``."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mm = ops.MatMul().shard(((2, 1), (1, 4)))
            self.w = Parameter(ms.Tensor(np.ones((k, n), np.float32)), name="w")

        def construct(self, x):
            return self.mm(x, self.w)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, k), np.float32)),)}
