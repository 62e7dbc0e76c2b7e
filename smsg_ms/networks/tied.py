"""A weight read by two primitives: the embedding table tied to the output head (GPT-2's layout).

``tokens (n,) int32 → Gather(table) → MatMul(w) → ReLU → MatMul(·, table, transpose_b)`` gives
logits ``(n, vocab)`` for an MSE loss. MindSpore gives a parameter one layout whatever the number
of its users ("multiple users, but the TensorInfo are different" otherwise), one gradient
synchronisation and one copy in memory: the network is the regression case of a shared parameter.
"""
from __future__ import annotations

import numpy as np


def build(tokens: int = 128, vocab: int = 512, hidden: int = 256):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Tied(nn.Cell):
        def __init__(self):
            super().__init__()
            self.table = Parameter(ms.Tensor(np.zeros((vocab, hidden), np.float32)),
                                   name="table")
            self.w = Parameter(ms.Tensor(np.zeros((hidden, hidden), np.float32)), name="w")
            self.gather = ops.Gather()
            self.proj = ops.MatMul()
            self.relu = ops.ReLU()
            self.head = ops.MatMul(transpose_b=True)

        def construct(self, ids):
            h = self.relu(self.proj(self.gather(self.table, ids, 0), self.w))
            return self.head(h, self.table)

    ids = ms.Tensor(np.zeros((tokens,), np.int32))
    y = ms.Tensor(np.zeros((tokens, vocab), np.float32))
    return {"net": Tied(), "inputs": (ids,), "loss": nn.MSELoss(), "labels": (y,)}
