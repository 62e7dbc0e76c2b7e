"""Blocks masking an activation with ``ops.where(mask, ops.zeros_like(y), gelu(y))`` under a
broadcast mask, as users write a masked block; or, with ``zeros="shape"``, with
``ops.zeros(y.shape, y.dtype)``; with ``zeros="mint"``, with ``mint.zeros_like(y)`` (a
``ZerosLikeExt``, not folded: an operator in the capture too, gathered per block, whose
output carries no gradient).

``x (batch, tokens, dim)``, ``mask (1, tokens, 1)`` bool; per block ``y = Dense(x)``,
``x + ops.where(mask, zeros, gelu(y))``; head ``Dense(x.mean(axis=1))`` to 4 classes. The
blocks are ``blocks.0`` ... ``blocks.{n-1}``.

The capture sees both zero tensors as constants; MindSpore's parallel pass sees
``zeros_like``'s ``ZerosLike`` still as an operator and redistributes its output into the
Select (one AllGather for all blocks, :mod:`smsg_ms.planner.zeros_like`), while ``ops.zeros``
is a constant already (none). Not recognised (the fold keeps the user's variable name): a
``ops.ZerosLike()`` primitive held by the cell, whose AllGather the plan misses.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, tokens: int = 8, dim: int = 32, blocks: int = 2,
          zeros: str = "like"):
    """``{"net", "inputs"}`` (float32 ``x``, bool ``mask``); ``zeros``: ``"like"``
    (``ops.zeros_like(y)``), ``"shape"`` (``ops.zeros(y.shape, y.dtype)``) or ``"mint"``
    (``mint.zeros_like(y)``)."""
    import mindspore as ms
    from mindspore import mint, nn, ops

    if zeros not in ("like", "shape", "mint"):
        raise ValueError(f"zeros must be 'like', 'shape' or 'mint', not {zeros!r}")

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)

        def construct(self, x, mask):
            y = self.fc(x)
            if zeros == "like":
                z = ops.zeros_like(y)
            elif zeros == "mint":
                z = mint.zeros_like(y)
            else:
                z = ops.zeros(y.shape, y.dtype)
            return x + ops.where(mask, z, ops.gelu(y))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block() for _ in range(blocks)])
            self.head = nn.Dense(dim, 4)

        def construct(self, x, mask):
            for block in self.blocks:
                x = block(x, mask)
            return self.head(x.mean(axis=1))

    mask = np.zeros((1, tokens, 1), np.bool_)
    mask[0, -2:, 0] = True
    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),
                                     ms.Tensor(mask))}
