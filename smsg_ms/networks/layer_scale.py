"""Blocks with a layer scale written as a functional product, weight first, as in mindcv's
ConvNeXt (``Block.construct``: ``x = self.gamma_ * x``), cut down to the pattern that decides
its collectives.

Per block: ``h = Dense(x)`` of ``x`` ``(batch, dim)`` (a primitive a plan can shard), then
``gamma * h`` with a trained ``gamma`` ``(dim,)`` *first* (a functional call: no strategy can
be set on it), then the residual ``x + ...``. The blocks are ``blocks.0`` ... ``blocks.{n-1}``
so a pipelined plan can cut them into stages.

MindSpore's batch-parallel default of that product leaves the weight whole and cuts the
activation's first dimension (``GenerateBatchStrategiesBySplitFlag``); a functional call inside
a block runs on that block's pipeline stage, and so does its weight's gradient AllReduce.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, dim: int = 32, blocks: int = 4):
    import mindspore as ms
    from mindspore import Parameter, nn

    class Block(nn.Cell):
        def __init__(self, tag: int):
            super().__init__()
            self.dense = nn.Dense(dim, dim)
            self.gamma = Parameter(ms.Tensor(np.full((dim,), 0.5, np.float32)),
                                   name=f"gamma{tag}")

        def construct(self, x):
            return x + self.gamma * self.dense(x)

    class LayerScale(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block(i) for i in range(blocks)])

        def construct(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    x = ms.Tensor(np.ones((batch, dim), np.float32))
    return {"net": LayerScale(), "inputs": (x,)}
