"""Blocks gated by a trained weight reshaped in ``construct`` (mindcv ConViT's
``gating_param``), for pipelined plans: a stage of 4 devices cuts the weight, 8 leave it whole.

``x (batch, heads, tokens, dim)``; per block ``x + gate(Dense(dim, dim)(x))`` with
``gate(h) = (1 - g) · h + g · relu(h)``, ``g = sigmoid(reshape(param, (1, -1, 1, 1)))``,
``param (heads,)`` in the block's ``gate`` cell; with ``tile``, first ``x + tile(cls, (batch,
heads, 1, 1))`` of a trained ``cls (1, 1, tokens, dim)`` (ConViT's ``cls_token``); head
``Dense(x.mean(axis=(1, 2)))`` to ``classes``. The blocks are ``blocks.0`` ...

The ``gate`` cell comes after the Dense so that a stage's first parameter is a Dense weight:
MindSpore 2.10's pipeline split hangs its ``Receive`` on the stage's first parameter, and a
Reshape reading that parameter then takes the received activation's layout ("from shape size
must be equal to to shape size", a MindSpore limitation).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, heads: int = 4, tokens: int = 8, dim: int = 16, classes: int = 4,
          blocks: int = 2, tile: bool = False):
    """``{"net", "inputs"}`` (float32 ``x``)."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Gate(nn.Cell):
        def __init__(self):
            super().__init__()
            self.param = Parameter(ms.Tensor(np.ones((heads,), np.float32)), name="param")

        def construct(self, h):
            g = ops.sigmoid(ops.reshape(self.param, (1, -1, 1, 1)))
            return (1.0 - g) * h + g * ops.relu(h)

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)
            self.gate = Gate()

        def construct(self, x):
            return x + self.gate(self.fc(x))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block() for _ in range(blocks)])
            self.head = nn.Dense(dim, classes)
            self.cls = Parameter(ms.Tensor(np.ones((1, 1, tokens, dim), np.float32)),
                                 name="cls")

        def construct(self, x):
            if tile:
                x = x + ops.tile(self.cls, (x.shape[0], heads, 1, 1))
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(axis=(1, 2)))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, heads, tokens, dim), np.float32)),)}
