"""Repeated blocks that cast with their model's ``Cast`` primitive (mindformers GLM2's
pattern: the capture of GLM2 names its blocks' casts ``transformer.cast``, the model's path).

``x (batch, width) → cast (float32) → layers.0 → layers.1 → cast (float16) → sum``; each block
``h → cast (float16) → matmul(w) → cast (float32) → relu → + h`` calls the model's ``Cast``
(one object, tagged by the model's path ``cast``). The block's returned value (the float32
sum, ``(batch, width)``) is what crosses a stage boundary; the float16 matmul output, read by
the block's own cast, is not.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, width: int = 32, layers: int = 2):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Block(nn.Cell):
        def __init__(self, i, cast):
            super().__init__()
            self.cast = cast
            self.mm = ops.MatMul()
            self.relu = ops.ReLU()
            self.add = ops.Add()
            self.w = Parameter(ms.Tensor(np.ones((width, width), np.float16)), name=f"w{i}")

        def construct(self, h):
            y = self.mm(self.cast(h, ms.float16), self.w)
            return self.add(self.relu(self.cast(y, ms.float32)), h)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cast = ops.Cast()
            self.layers = nn.CellList([Block(i, self.cast) for i in range(layers)])
            self.sum = ops.ReduceSum()

        def construct(self, x):
            x = self.cast(x, ms.float32)
            for layer in self.layers:
                x = layer(x)
            return self.sum(self.cast(x, ms.float16))

    x = ms.Tensor(np.ones((batch, width), np.float32))
    return {"net": Net(), "inputs": (x,)}
