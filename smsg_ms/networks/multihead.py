"""Blocks of ``nn.MultiheadAttention`` as users write them: every operator of the attention is
a functional call (``ops.matmul`` of ``in_proj_weight``, ``split``, ``softmax``), so no
strategy can be set on it, and a reused block's calls all carry the first block's scope.

Per block, on ``x`` ``(batch, tokens, dim)``: ``a, _ = attn(x, x, x)`` (``batch_first``),
``x = LayerNorm(x + a)``, ``x + Dense(x)``. Head: ``Dense(x.mean(axis=1))`` to ``classes``.
The blocks are ``blocks.0`` ... ``blocks.{n-1}``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 16, dim: int = 64, heads: int = 4, blocks: int = 2,
          classes: int = 10):
    import mindspore as ms
    from mindspore import nn

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm = nn.LayerNorm((dim,))
            self.ff = nn.Dense(dim, dim)

        def construct(self, x):
            a, _ = self.attn(x, x, x)
            x = self.norm(x + a)
            return x + self.ff(x)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block() for _ in range(blocks)])
            self.head = nn.Dense(dim, classes)

        def construct(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(axis=1))

    x = ms.Tensor(np.zeros((batch, tokens, dim), np.float32))
    return {"net": Net(), "inputs": (x,)}
