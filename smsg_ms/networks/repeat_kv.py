"""Grouped-query attention's ``repeat_kv`` as mindformers GLM2 writes it: the key heads
repeated by a ``Tile`` whose layout the network fixes (prim attr ``self_define_shard``) in
its own device-matrix axis order, ``Layout((1, 4, 1, 2), ("dp", "cp", "rep", "mp"))`` with
the heads on ``mp`` (innermost axis: ranks ``{0, 1}``) and the sequence on ``cp`` (ranks
``{0, 2, 4, 6}``), written for 8 devices.

``y = ReLU(reshape(Tile(reshape(transpose(reshape(x @ w))))))``: ``x (batch, seq, hidden)``,
``w (hidden, kv_heads·head_dim)``, ``y (batch, kv_heads·rep, seq, head_dim)``; the Tile's
path is ``tile_kv``. The same cuts in the order of a strategy of integers (heads over ranks
``{0, 4}``, sequence over ``{0, 1, 2, 3}``) place other slices on each rank: a plan must price
the network's order (:func:`smsg_ms.cost.kept_layout.with_network_order`).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 4, seq: int = 16, hidden: int = 32, kv_heads: int = 2,
          head_dim: int = 16, rep: int = 2):
    """``{"net", "inputs"}`` of the network above (float32)."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.parallel import Layout

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mm = ops.MatMul()
            self.reshape = ops.Reshape()
            self.transpose = ops.Transpose()
            self.tile_kv = ops.Tile()
            self.tile_kv.add_prim_attr("self_define_shard", True)
            layout = Layout((1, 4, 1, 2), ("dp", "cp", "rep", "mp"))
            self.tile_kv.shard((layout("dp", "mp", "None", "cp"),),
                               (layout("dp", "mp", "None", "cp"),))
            self.relu = ops.ReLU()
            self.w = Parameter(ms.Tensor(np.ones((hidden, kv_heads * head_dim), np.float32)),
                               name="w")

        def construct(self, x):
            kv = self.mm(self.reshape(x, (batch * seq, hidden)), self.w)
            kv = self.transpose(self.reshape(kv, (batch, seq, kv_heads, head_dim)), (0, 2, 1, 3))
            kv = self.tile_kv(self.reshape(kv, (batch, kv_heads, 1, seq * head_dim)),
                              (1, 1, rep, 1))
            return self.relu(self.reshape(kv, (batch, kv_heads * rep, seq, head_dim)))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, seq, hidden), np.float32)),)}
