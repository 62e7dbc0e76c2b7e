"""Gathers along an axis other than 0, of activations (not of a weight table): a ``Gather``
primitive whose indices are a data input, and a functional ``ops.gather`` with constant
indices (no strategy can be set on it).

``x (batch, heads, tokens, dim)``, ``idx (picks,)`` int32 → ``BatchMatMul(x, w)`` with ``w
(1, heads, dim, dim)`` broadcast over the batch → ``Gather(·, idx, 2)`` ``(batch, heads, picks,
dim)`` → mean over heads → ``(batch, picks, dim)`` → ``ops.gather(·, keep, 2)`` with the
constant ``keep = [0, 2, 4, ...]`` (``dim // 2`` of them) → mean over axis 1 →
``Dense(dim // 2, classes)``.

MindSpore's ``GatherInfo`` (``ops_info/gather_info.cc``): on an axis other than 0 with that
axis uncut (``NormalImpl``) the output is ``table[:axis] + indices + table[axis+1:]``, cut as
those; without a strategy the table is whole and the indices' first dimension cut
(``GenerateBatchStrategies``).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, heads: int = 4, tokens: int = 8, dim: int = 16, picks: int = 4,
          classes: int = 4):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.full((1, heads, dim, dim), 0.01, np.float32)),
                               name="w")
            self.bmm = ops.BatchMatMul()
            self.gather = ops.Gather()
            self.keep = ms.Tensor(np.arange(0, dim, 2, dtype=np.int32))
            self.head = nn.Dense(dim // 2, classes)

        def construct(self, x, idx):
            y = self.gather(self.bmm(x, self.w), idx, 2).mean(axis=1)
            return self.head(ops.gather(y, self.keep, 2).mean(axis=1))

    idx = ms.Tensor(np.arange(0, 2 * picks, 2, dtype=np.int32))
    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, heads, tokens, dim), np.float32)),
                                     idx)}
