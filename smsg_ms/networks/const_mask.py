"""Decoder blocks whose causal mask is built in ``construct`` from constants alone
(``ops.triu(ops.ones((s, s)), 1)``, as users write it), and a network that returns several
losses.

:func:`build`: ``ids (batch, seq)`` int32 → ``Embedding(vocab, dim)`` + learned positions
``pos (1, seq, dim)`` (added) → ``layers.0`` ... ``layers.{n-1}``, each ``x + o(attention)``
with one-head scores ``(batch, seq, seq)`` minus ``1e4 · triu(ones((seq, seq)), 1)`` → a Dense
head to ``vocab``. The mask reads no data input and no weight: MindSpore computes it once
(the operators of every block and every micro-batch read the same constants).

:func:`build_losses`: ``x (batch, dim)``, ``y (batch,)`` int32 → ``h = relu(Dense(x))``;
returns the tuple ``(cross_entropy(Dense(h), y), mean(Dense(h)²), 0.01·mean(h²))``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 8, dim: int = 16, vocab: int = 32, layers: int = 2):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Dense(dim, 3 * dim)
            self.o = nn.Dense(dim, dim)
            self.bmm = ops.BatchMatMul()
            self.bmmt = ops.BatchMatMul(transpose_b=True)
            self.softmax = nn.Softmax()

        def construct(self, x):
            q, k, v = ops.split(self.qkv(x), dim, axis=-1)
            s = x.shape[1]
            causal = ops.triu(ops.ones((s, s), ms.float32), diagonal=1)
            att = self.softmax(self.bmmt(q, k) - causal * 1e4)
            return x + self.o(self.bmm(att, v))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.pos = Parameter(ms.Tensor(np.zeros((1, seq, dim), np.float32)), name="pos")
            self.layers = nn.CellList([Block() for _ in range(layers)])
            self.head = nn.Dense(dim, vocab, has_bias=False)

        def construct(self, ids):
            x = self.emb(ids) + self.pos
            for block in self.layers:
                x = block(x)
            return self.head(x)

    return {"net": Net(), "inputs": (ms.Tensor(np.zeros((batch, seq), np.int32)),)}


def build_losses(batch: int = 16, dim: int = 32, classes: int = 4):
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.body = nn.Dense(dim, dim)
            self.a = nn.Dense(dim, classes)
            self.b = nn.Dense(dim, 1)

        def construct(self, x, y):
            h = ops.relu(self.body(x))
            return (ops.cross_entropy(self.a(h), y), ops.square(self.b(h)).mean(),
                    (h * h).mean() * 0.01)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, dim), np.float32)),
                                     ms.Tensor(np.zeros((batch,), np.int32)))}
