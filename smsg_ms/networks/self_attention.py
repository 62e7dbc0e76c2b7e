"""``nn.MultiheadAttention`` as users call it for self-attention (``attn(h, h, h)``, batch
first) behind a Dense, so its input carries a gradient. Input ``x`` ``(batch, tokens,
width)`` float32, output the same shape. MindSpore's attention swaps the batch and token axes
(``swapaxes(0, 1)``) and reads the result in its q, k and v projections: with the batch cut,
that tensor is cut on dimension 1 and each projection gathers it
(:func:`smsg_ms.planner.decisions.gathers_inner_dimension`)."""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, tokens: int = 16, width: int = 64, heads: int = 4):
    import mindspore as ms
    from mindspore import nn

    class SelfAttention(nn.Cell):
        def __init__(self):
            super().__init__()
            self.pre = nn.Dense(width, width)
            self.attn = nn.MultiheadAttention(width, heads, batch_first=True)

        def construct(self, x):
            h = self.pre(x)
            return self.attn(h, h, h)[0]

    x = ms.Tensor(np.zeros((batch, tokens, width), np.float32))
    return {"net": SelfAttention(), "inputs": (x,)}
