"""``ops.where`` with a broadcast mask between two activations, and a LayerNorm over the last
two axes, as users write a masked block.

``x (batch, tokens, dim)``, ``mask (1, tokens, 1)`` bool → ``h = Dense(x)`` →
``ops.where(mask, h, relu(h))`` (one ``Select`` of three inputs broadcast together) →
``LayerNorm((tokens, dim), begin_norm_axis=1)`` → mean over the tokens → ``Dense(dim,
classes)``. MindSpore's ``SelectInfo`` (``ops_info/select_info.cc``) lays the three inputs out
alike; without a strategy its batch default cuts none of them here (the mask's first
dimension is 1, ``GenerateBatchStrategiesWithCheck`` takes the gcd).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, tokens: int = 8, dim: int = 32, classes: int = 4):
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)
            self.norm = nn.LayerNorm((tokens, dim), begin_norm_axis=1, begin_params_axis=1)
            self.head = nn.Dense(dim, classes)

        def construct(self, x, mask):
            h = self.fc(x)
            return self.head(self.norm(ops.where(mask, h, ops.relu(h))).mean(axis=1))

    mask = np.zeros((1, tokens, 1), np.bool_)
    mask[0, -2:, 0] = True
    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),
                                     ms.Tensor(mask))}
