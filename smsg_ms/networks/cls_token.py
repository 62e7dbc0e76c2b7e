"""A class token tiled over the batch and put before the tokens, as mindcv ConViT does
(``cls_tokens = ops.tile(self.cls_token, (B, 1, 1))``, then ``ops.concat((cls_tokens, x),
1)``).

``x (batch, tokens, dim)`` → ``h = Dense(dim, dim)(x)`` → ``concat((tile(cls, (batch, 1, 1)),
h), 1)`` with a trained ``cls (1, 1, dim)`` → ``ReLU`` → mean over the tokens → ``Dense(dim,
classes)``. The Tile's batch cut splits its copies (``tile_info.cc``): the token stays whole on
every device and its gradient is AllReduced over all of them.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, tokens: int = 8, dim: int = 32, classes: int = 4):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cls = Parameter(ms.Tensor(np.zeros((1, 1, dim), np.float32)), name="cls")
            self.fc = nn.Dense(dim, dim)
            self.head = nn.Dense(dim, classes)

        def construct(self, x):
            h = self.fc(x)
            h = ops.concat((ops.tile(self.cls, (h.shape[0], 1, 1)), h), 1)
            return self.head(ops.relu(h).mean(axis=1))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),)}
