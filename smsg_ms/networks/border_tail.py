"""Blocks that end with a downsampling cell whose output is a Reshape's, as mindcv's Swin
(``BasicLayer``: its transformer blocks, then ``PatchMerging``, whose ``reduction`` is an
``nn.Dense`` on a 3-D input: Reshape → MatMul → Reshape), cut down to the pattern that decides
where a pipeline stage may end.

``layers.{i}`` (``i < layers``) holds ``blocks`` (an ``nn.CellList`` of one residual block,
``x + Dense(x)``, which ends with an ``Add``) and, but for the last, ``downsample`` (an
``nn.Dense(dim, dim)`` on ``x (batch, tokens, dim)``, so its output is a Reshape's). MindSpore
refuses a stage border on a Reshape's output ("Reshape op can't be a border",
``frontend/parallel/pipeline/pipeline_transformer.cc``), so no stage may end after
``layers.{i}`` as a whole; it may end inside it, before ``downsample``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 4, dim: int = 32, layers: int = 4):
    """``{"net", "inputs"}``; ``x (batch, tokens, dim)`` float32."""
    import mindspore as ms
    from mindspore import nn, ops

    class Residual(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(dim, dim)
            self.add = ops.Add()

        def construct(self, x):
            return self.add(x, self.dense(x))

    class Layer(nn.Cell):
        def __init__(self, last: bool):
            super().__init__()
            self.blocks = nn.CellList([Residual()])
            self.downsample = None if last else nn.Dense(dim, dim)

        def construct(self, x):
            for blk in self.blocks:
                x = blk(x)
            if self.downsample is not None:
                x = self.downsample(x)
            return x

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Layer(i == layers - 1) for i in range(layers)])

        def construct(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),)}
