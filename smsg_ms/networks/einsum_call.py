"""``ops.einsum`` in ``construct``, which MindSpore 2.10's parallel compiler cannot lay out
(Einsum has no OperatorInfo and takes its operands as one tuple: "The pointer
[next_distribute_operator] is null" in ``parallel_processer.cc``'s Redistribution, in
semi-auto parallel whatever the strategies). For the capture's error message.

``x (batch, tokens, dim)`` → ``q = einsum("btd,de->bte", x, w)`` → ``einsum("bte,bse->bts",
q, x)`` → mean over the last axis → ``Dense(tokens, 4)``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 4, dim: int = 8):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.ones((dim, dim), np.float32)), name="w")
            self.head = nn.Dense(tokens, 4)

        def construct(self, x):
            q = ops.einsum("btd,de->bte", x, self.w)
            return self.head(ops.einsum("bte,bse->bts", q, x).mean(axis=2))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),)}
