"""Window attention with a relative-position bias, as in mindcv's Swin (``WindowAttention``,
``RelativeBias``), cut down to the pattern that decides its collectives.

Per block ``i`` with ``heads[i]`` heads: ``q = Dense(x)`` of ``x`` ``(batch, tokens, dim)``,
reshaped and transposed to ``(batch, heads, tokens, head_dim)``, ``attn = BatchMatMul(q, qᵀ)``
``(batch, heads, tokens, tokens)``, plus the bias ``(1, heads, tokens, tokens)`` made by
*functional* calls (no strategy can be set on them): ``matmul(index, table)`` with a fixed
one-hot ``index`` ``(tokens², table_rows)`` and a trained ``table`` ``(table_rows, heads)``,
``reshape``, ``transpose``, ``expand_dims``; then Softmax and a mean over the last two axes.
The blocks run in parallel on ``x``; their outputs ``(batch, heads[i])`` are concatenated.

MindSpore gives the functional calls its batch-parallel default: ``expand_dims`` of
``(heads, tokens, tokens)`` cuts the heads ``gcd(heads, devices)``-way, and the Add of the
bias to the batch-parallel attention gathers them back (AllGather forward, ReduceScatter
backward), as on Swin-T's 6, 12 and 24 heads.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 9, dim: int = 24, heads: tuple = (3, 6, 12),
          table_rows: int = 5, chain: bool = False, stem: bool = False):
    """``chain=True``: the blocks in sequence, block ``i`` returning
    ``x * mean(softmax(attn), (1, 3))[..., None]`` ``(batch, tokens, dim)`` (so a pipelined
    plan can cut them into stages). ``stem=True``: a trained ``Dense(dim, dim)`` cell ``stem``
    outside the blocks runs on ``x`` before them (Swin's patch embedding)."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    rng = np.random.default_rng(0)
    index = np.eye(table_rows, dtype=np.float32)[rng.integers(0, table_rows, tokens * tokens)]

    class Block(nn.Cell):
        def __init__(self, h: int, tag: int):
            super().__init__()
            self.h = h
            self.q = nn.Dense(dim, dim)
            self.bmm = ops.BatchMatMul(transpose_b=True)
            self.softmax = nn.Softmax(axis=-1)
            self.mean = ops.ReduceMean()
            self.index = Parameter(ms.Tensor(index), name=f"index{tag}", requires_grad=False)
            self.table = Parameter(ms.Tensor(rng.standard_normal((table_rows, h), np.float32)),
                                   name=f"table{tag}")

        def bias(self):
            out = ops.matmul(self.index, self.table)
            out = ops.reshape(out, (tokens, tokens, -1))
            out = ops.transpose(out, (2, 0, 1))
            return ops.expand_dims(out, 0)

        def construct(self, x):
            q = ops.reshape(self.q(x), (batch, tokens, self.h, dim // self.h))
            q = ops.transpose(q, (0, 2, 1, 3))
            attn = self.bmm(q, q) + self.bias()
            if chain:
                return x * ops.expand_dims(self.mean(self.softmax(attn), (1, 3)), 2)
            return self.mean(self.softmax(attn), (2, 3))

    class WindowBias(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block(h, i) for i, h in enumerate(heads)])
            self.concat = ops.Concat(axis=1)
            self.stem = nn.Dense(dim, dim) if stem else None

        def construct(self, x):
            if self.stem is not None:
                x = self.stem(x)
            if chain:
                for b in self.blocks:
                    x = b(x)
                return x
            return self.concat([b(x) for b in self.blocks])

    x = ms.Tensor(np.ones((batch, tokens, dim), np.float32))
    return {"net": WindowBias(), "inputs": (x,)}
