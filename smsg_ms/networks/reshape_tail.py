"""Blocks of two containers in turn, as mindcv PiT writes them (``transformers.i`` and
``pools.i``): a reused block whose construct opens and ends with functional calls.

:func:`build`: ``x (batch, dim, side, side)``, ``cls (batch, 1, dim)`` float32 → ``mix.0``,
``pool.0``, ``mix.1``, ``pool.1``, ``mix.2`` → the image part ``(batch, dim, side, side)``.
A ``mix`` block (class ``Mix``, reused: its functional calls all carry
``mix-CellList/0-Mix``'s scope) concatenates ``cls`` before the tokens ``(batch, side², dim)``
of ``x``, runs ``units.0`` … (each ``t + relu(Dense(t))``, ending with an Add), then slices
``cls = t[:, :1]`` and ``x = t[:, 1:]``, transposed and reshaped back to ``(batch, dim, side,
side)`` (a Reshape's output), and returns both. A ``pool`` block (class ``Pool``) returns
``(Conv2d(x), Dense(cls))``. MindSpore's graph order puts a block's trailing slices and
reshape between the next ``pool``'s operators, and its opening reshape, transpose and concat
after them.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, dim: int = 16, side: int = 4, blocks: int = 3, units: int = 2):
    """``{"net", "inputs"}`` of the network above (float32)."""
    import mindspore as ms
    from mindspore import nn, ops

    class Unit(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)

        def construct(self, t):
            return t + ops.relu(self.fc(t))

    class Mix(nn.Cell):
        def __init__(self):
            super().__init__()
            self.units = nn.CellList([Unit() for _ in range(units)])

        def construct(self, x, cls):
            b, c, h, w = x.shape
            t = ops.transpose(ops.reshape(x, (b, c, h * w)), (0, 2, 1))
            t = ops.concat((cls, t), axis=1)
            for unit in self.units:
                t = unit(t)
            cls = t[:, :1]
            x = ops.transpose(t[:, 1:], (0, 2, 1))
            return ops.reshape(x, (b, c, h, w)), cls

    class Pool(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(dim, dim, 3, pad_mode="same", has_bias=True)
            self.fc = nn.Dense(dim, dim)

        def construct(self, x, cls):
            return self.conv(x), self.fc(cls)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mix = nn.CellList([Mix() for _ in range(blocks)])
            self.pool = nn.CellList([Pool() for _ in range(blocks - 1)])

        def construct(self, x, cls):
            for i in range(len(self.pool)):
                x, cls = self.mix[i](x, cls)
                x, cls = self.pool[i](x, cls)
            return self.mix[len(self.pool)](x, cls)[0]

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, dim, side, side), np.float32)),
                                     ms.Tensor(np.ones((batch, 1, dim), np.float32)))}
