"""A weight read by a primitive whose layout the network fixes (``self_define_shard``) over
its own device-matrix axis order: ``y = ReLU(Mul(x, w))`` with ``x (rows, cols)`` and the
trained weight ``w (rows, cols)`` both laid ``Layout((2, 2, 2), ("dp", "cp", "mp"))("mp",
"None")``: rows cut 2-way on the innermost axis ``mp`` (ranks ``{0, 1}`` differ in it), the
outer axes ``dp`` and ``cp`` replicas, written for 8 devices (float32).

MindSpore synchronises ``w``'s gradient over the devices holding the same slice: those that
differ only in ``dp`` and ``cp``, rank 0's group ``{0, 2, 4, 6}``. The same cuts in the order
of a strategy of integers (``(2, 1)``, replicas appended on the right) would put the replicas
on ranks ``{0, 1, 2, 3}``: a plan must take the network's order for the weight's gradient
AllReduce (:func:`smsg_ms.cost.kept_layout.network_span`).
"""
from __future__ import annotations

import numpy as np


def build(rows: int = 16, cols: int = 32):
    """``{"net", "inputs"}`` of the network above (float32)."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.parallel import Layout

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.scale = ops.Mul()
            self.scale.add_prim_attr("self_define_shard", True)
            layout = Layout((2, 2, 2), ("dp", "cp", "mp"))
            self.scale.shard((layout("mp", "None"), layout("mp", "None")),
                             (layout("mp", "None"),))
            self.relu = ops.ReLU()
            self.w = Parameter(ms.Tensor(np.ones((rows, cols), np.float32)), name="w")

        def construct(self, x):
            return self.relu(self.scale(x, self.w))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((rows, cols), np.float32)),)}
