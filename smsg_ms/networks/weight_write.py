"""A network whose constructor writes elements of one of its own weights, as mindcv ConViT's
``_initialize_weights`` does (``pos_proj.weight.data[position, 2] = -1``): under MindSpore's
``no_init_parameters`` the weight has no data yet and the element assignment fails with
"The pointer[device_address] is null" (``CreateInputAddressForViewOp``), so the network is
built again with its weights allocated (:mod:`smsg_ms.networks.construction`).

``x (batch, dim)`` → ``Dense(dim, dim)`` (its weight's ``[0, 1]`` set to -1 in the
constructor) → ReLU → ``Dense(dim, classes)``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, dim: int = 32, classes: int = 4):
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)
            self.head = nn.Dense(dim, classes)
            data = self.fc.weight.data
            data[0, 1] = -1
            self.fc.weight.set_data(data)

        def construct(self, x):
            return self.head(ops.relu(self.fc(x)))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, dim), np.float32)),)}
