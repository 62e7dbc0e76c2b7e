"""Two outputs of one ``Split`` gathered, one of them for two readers: DeepSeek-V3's attention
(``q_nope, q_pe = split(q)``, both gathered, ``q_pe`` read twice by the rotary
``strideslice``) in small, for MindSpore's ``MergeComm`` rule (:mod:`smsg_ms.planner.merge_comm`).

``h = x * w0`` cut ``dp`` on ``seq`` (``x``, ``w0``: ``(seq, batch, 2 * width)``);
``a, b = Split(axis 2)(h)`` on the same cut; ``r1 = b * w1``, ``r2 = b * w2`` cut ``dp`` on
``batch`` (each read of ``b``: an AllGather on ``seq``, then the slice on ``batch``); with
``gather_both``, ``r3 = a * w3`` cut on ``batch`` too (``a`` gathered), else on ``seq`` (``a``
not redistributed). Returns ``(r1 + r2 + r3)`` squared, cut on ``batch``.
"""
from __future__ import annotations

import numpy as np


def build(seq: int = 64, batch: int = 16, width: int = 8, dp: int = 8, gather_both: bool = True):
    """``{"net", "inputs"}`` (float32); paths ``mul0``, ``split``, ``mul1`` ... ``mul3``,
    ``add1``, ``add2``, ``square``."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    seq_cut, batch_cut = (dp, 1, 1), (1, dp, 1)

    def weight(name, shape, value):
        return Parameter(ms.Tensor(np.full(shape, value, np.float32)), name=name)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            half = (seq, batch, width)
            self.w0 = weight("w0", (seq, batch, 2 * width), 0.01)
            self.w1 = weight("w1", half, 0.02)
            self.w2 = weight("w2", half, 0.03)
            self.w3 = weight("w3", half, 0.04)
            self.mul0 = P.Mul().shard((seq_cut, seq_cut))
            self.split = P.Split(axis=2, output_num=2).shard((seq_cut,))
            self.mul1 = P.Mul().shard((batch_cut, batch_cut))
            self.mul2 = P.Mul().shard((batch_cut, batch_cut))
            third = batch_cut if gather_both else seq_cut
            self.mul3 = P.Mul().shard((third, third))
            self.add1 = P.Add().shard((batch_cut, batch_cut))
            self.add2 = P.Add().shard((batch_cut, batch_cut))
            self.square = P.Mul().shard((batch_cut, batch_cut))

        def construct(self, x):
            a, b = self.split(self.mul0(x, self.w0))
            c = self.add2(self.add1(self.mul1(b, self.w1), self.mul2(b, self.w2)),
                          self.mul3(a, self.w3))
            return self.square(c, c)

    x = ms.Tensor(np.ones((seq, batch, 2 * width), np.float32))
    return {"net": Net(), "inputs": (x,)}
