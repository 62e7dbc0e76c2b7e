"""Blocks that split, concatenate and stack their activations around a residual, then a
last-position head, as users write them with ``ops.split`` / ``ops.concat`` / ``ops.stack``
and tensor indexing (every one a functional call: no strategy can be set on it).

Per block, on ``x`` ``(batch, tokens, dim)``: ``x1, x2 = ops.split(x, dim // 2, axis=-1)``,
``y = ops.concat((Dense(x1), relu(Dense(x2))), -1)``, ``z = ops.stack((y, x)).sum(0)``,
``x + Dense(z)``. Head: ``x[:, -1, :]`` (a StridedSlice with ``shrink_axis_mask``) plus
``x[:, :1, :].squeeze(1)`` (StridedSlice, Squeeze), then a Dense to ``classes``. The blocks are
``blocks.0`` ... ``blocks.{n-1}``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, tokens: int = 4, dim: int = 32, blocks: int = 4, classes: int = 8):
    import mindspore as ms
    from mindspore import nn, ops

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(dim // 2, dim // 2)
            self.b = nn.Dense(dim // 2, dim // 2)
            self.mix = nn.Dense(dim, dim)

        def construct(self, x):
            x1, x2 = ops.split(x, dim // 2, axis=-1)
            y = ops.concat((self.a(x1), ops.relu(self.b(x2))), axis=-1)
            z = ops.stack((y, x), axis=0).sum(axis=0)
            return x + self.mix(z)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block() for _ in range(blocks)])
            self.head = nn.Dense(dim, classes)

        def construct(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x[:, -1, :] + x[:, :1, :].squeeze(1))

    x = ms.Tensor(np.ones((batch, tokens, dim), np.float32))
    return {"net": Net(), "inputs": (x,)}
