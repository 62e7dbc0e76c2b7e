"""One tensor read by two operators through a redistribution of two AllGathers: only the first
AllGather reads the tensor itself, so MindSpore's ``MergeComm`` can share only that one
(:mod:`smsg_ms.planner.merge_comm`).

``h = x * w0`` cut ``(8, 1)`` (``x``, ``w*``: ``(rows, cols)``); ``r1 = h * w1`` and
``r2 = h * w2`` cut ``(1, 4)`` (each read of ``h``: a 2-way AllGather of ``h``, then a 4-way
one of its output, then the slice); returns ``(r1 + r2)`` squared, cut ``(1, 4)``.
"""
from __future__ import annotations

import numpy as np


def build(rows: int = 64, cols: int = 32):
    """``{"net", "inputs"}`` (float32); paths ``mul0``, ``mul1``, ``mul2``, ``add``,
    ``square``; 8 devices."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    def weight(name, value):
        return Parameter(ms.Tensor(np.full((rows, cols), value, np.float32)), name=name)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w0, self.w1, self.w2 = weight("w0", 0.01), weight("w1", 0.02), weight("w2", 0.03)
            self.mul0 = P.Mul().shard(((8, 1), (8, 1)))
            self.mul1 = P.Mul().shard(((1, 4), (1, 4)))
            self.mul2 = P.Mul().shard(((1, 4), (1, 4)))
            self.add = P.Add().shard(((1, 4), (1, 4)))
            self.square = P.Mul().shard(((1, 4), (1, 4)))

        def construct(self, x):
            h = self.mul0(x, self.w0)
            c = self.add(self.mul1(h, self.w1), self.mul2(h, self.w2))
            return self.square(c, c)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((rows, cols), np.float32)),)}
