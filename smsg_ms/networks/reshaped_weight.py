"""A trained weight reshaped in ``construct`` before its use, as mindcv ConViT's gated
positional attention does (``gating = ops.reshape(self.gating_param, (1, -1, 1, 1))``).

``x (batch, heads, tokens, dim)`` → ``h = Dense(dim, dim)(x)`` → ``g = sigmoid(reshape(gate,
(1, heads, 1, 1)))`` with a trained ``gate (heads,)`` → ``(1 - g) · h + g · relu(h)`` → mean
over heads and tokens → ``Dense(dim, classes)``, the product first scaled by a trained ``scale
(heads,)`` expanded to ``(heads, 1, 1)`` (mindcv PoolFormer's layer scale, ``self.layer_scale.
expand_dims(-1).expand_dims(-1) * x``). The Reshape is the gate's first reader: in MindSpore's
compile its gradient AllReduce is inserted there. Neither ``g`` nor the expanded ``scale`` has
its split flag on in the products (first dimension 1 once expanded to 4 dimensions), so the
batch-parallel default cuts the activation's batch and keeps them whole.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, heads: int = 4, tokens: int = 8, dim: int = 16, classes: int = 4):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gate = Parameter(ms.Tensor(np.ones((heads,), np.float32)), name="gate")
            self.scale = Parameter(ms.Tensor(np.ones((heads,), np.float32)), name="scale")
            self.fc = nn.Dense(dim, dim)
            self.head = nn.Dense(dim, classes)

        def construct(self, x):
            h = self.fc(x)
            g = ops.sigmoid(ops.reshape(self.gate, (1, -1, 1, 1)))
            y = (1.0 - g) * h + g * ops.relu(h)
            y = self.scale.expand_dims(-1).expand_dims(-1) * y
            return self.head(y.mean(axis=(1, 2)))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, heads, tokens, dim), np.float32)),)}
