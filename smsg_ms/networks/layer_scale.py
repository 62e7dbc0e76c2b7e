"""Blocks with a layer scale written as a functional product, weight first, as in mindcv's
ConvNeXt (``Block.construct``: ``x = self.gamma_ * x``), cut down to the pattern that decides
its collectives.

Per block: ``h = Dense(x)`` of ``x`` ``(batch, tokens, dim)`` (a primitive a plan can shard;
``nn.Dense`` reshapes a 3-D input to 2-D and back), then ``gamma * h`` with a trained ``gamma``
``(dim,)`` *first* (a functional call: no strategy can be set on it), then the residual
``x + ...``. Block 0 ends with one more Dense (``proj``), so its output is a Reshape's, as a
Swin stage ending with PatchMerging's reduction. The blocks are ``blocks.0`` ...
``blocks.{n-1}`` so a pipelined plan can cut them into stages.

MindSpore's batch-parallel default of that product leaves the weight whole and cuts the
activation's first dimension (``GenerateBatchStrategiesBySplitFlag``); a functional call inside
a block runs on that block's pipeline stage, and so does its weight's gradient AllReduce; a
stage may not end after block 0 ("Reshape op can't be a border").
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 4, dim: int = 32, blocks: int = 4):
    import mindspore as ms
    from mindspore import Parameter, nn

    from .chain import chain

    class Block(nn.Cell):
        def __init__(self, tag: int):
            super().__init__()
            self.dense = nn.Dense(dim, dim)
            self.proj = nn.Dense(dim, dim) if tag == 0 else None
            self.gamma = Parameter(ms.Tensor(np.full((dim,), 0.5, np.float32)),
                                   name=f"gamma{tag}")

        def construct(self, x):
            x = x + self.gamma * self.dense(x)
            if self.proj is not None:
                x = self.proj(x)
            return x

    x = ms.Tensor(np.ones((batch, tokens, dim), np.float32))
    return {"net": chain([Block(i) for i in range(blocks)]), "inputs": (x,)}
