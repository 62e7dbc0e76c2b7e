"""Blocks that apply their weight as ``F.linear`` does, ``x @ w.T + b`` with a functional
``ops.transpose(w, (1, 0))`` (as ``nn.MultiheadAttention``'s output projection), then a
residual. Input ``x`` ``(batch, dim)`` float32; blocks ``blocks.0`` ... ``blocks.{n-1}``.

MindSpore's batch-parallel default of that strategy-less Transpose cuts its only input, the
trained ``w``, on its first dimension (``OperatorInfo::ReComputeBatchSplitFlagList``), so ``w``
has no gradient AllReduce and the matmul behind it gathers it.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, dim: int = 64, blocks: int = 2):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    from .chain import chain

    class Linear(nn.Cell):
        def __init__(self, tag: int):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.full((dim, dim), 0.01, np.float32)), name=f"w{tag}")
            self.b = Parameter(ms.Tensor(np.zeros((dim,), np.float32)), name=f"b{tag}")

        def construct(self, x):
            return x + ops.tanh(ops.matmul(x, ops.transpose(self.w, (1, 0))) + self.b)

    x = ms.Tensor(np.ones((batch, dim), np.float32))
    return {"net": chain([Linear(i) for i in range(blocks)]), "inputs": (x,)}
