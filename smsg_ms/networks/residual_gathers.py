"""A residual ``Add`` whose two inputs are both redistributed the same way: Qwen3-MoE's first
residual built for 8 devices (the embeddings and the attention's dropout output, each
gathered from a sequence cut to a batch cut), in small.

``a = x * w1``, ``b = x * w2`` (``x``, ``w1``, ``w2 (seq, batch, width)``, cut ``dp`` on
``seq``); ``c = a + b`` cut ``dp`` on ``batch`` (each input: an AllGather on ``seq``, then the
slice on ``batch``); returns ``c * c``. The Add's bprop gives both inputs the same ``dout``, so
their two backward redistributions (a ReduceScatter each) compute the same thing.

With ``inplace``: ``a``, ``b`` cut ``dp`` on ``batch`` and ``c = a; c += b`` (an
``InplaceAddExt`` without strategy, mindcv Res2Net's ``out += identity``), whose batch-parallel
default cuts ``seq``: both inputs are gathered on ``batch`` and sliced on ``seq`` alike; the
square is cut on ``seq`` too.
"""
from __future__ import annotations

import numpy as np


def build(seq: int = 64, batch: int = 16, width: int = 8, dp: int = 8, inplace: bool = False):
    """``{"net", "inputs"}`` (float32); paths ``mul1``, ``mul2``, ``add``, ``square``."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            shape = (seq, batch, width)
            self.w1 = Parameter(ms.Tensor(np.full(shape, 0.01, np.float32)), name="w1")
            self.w2 = Parameter(ms.Tensor(np.full(shape, 0.02, np.float32)), name="w2")
            cut = ((1, dp, 1), (1, dp, 1)) if inplace else ((dp, 1, 1), (dp, 1, 1))
            self.mul1 = P.Mul().shard(cut)
            self.mul2 = P.Mul().shard(cut)
            self.add = P.Add().shard(((1, dp, 1), (1, dp, 1)))
            back = ((dp, 1, 1), (dp, 1, 1)) if inplace else ((1, dp, 1), (1, dp, 1))
            self.square = P.Mul().shard(back)

        def construct(self, x):
            if inplace:
                c = self.mul1(x, self.w1)
                c += self.mul2(x, self.w2)
            else:
                c = self.add(self.mul1(x, self.w1), self.mul2(x, self.w2))
            return self.square(c, c)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((seq, batch, width), np.float32)),)}
