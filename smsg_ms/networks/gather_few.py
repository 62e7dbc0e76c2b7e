"""A functional ``ops.gather`` of an activation by fewer constant indices than devices: its
table, batch-cut over every device, is taken whole by two AllGathers.

``x (batch, tokens, dim)`` → ``y = relu(Dense(x))`` (batch-cut) → ``head(y.mean(axis=1) +
ops.gather(y, keep, 1).mean(axis=1))`` with the constant ``keep = [0, 2, ...]`` (``picks`` of
them). MindSpore's strategy-less ``Gather`` keeps the table whole and cuts the indices
(``GatherInfo::GenerateBatchStrategies``): ``picks = 2`` on 8 devices cuts them 2 ways, a
device matrix ``[2, 4]`` whose 4 is a repeated calculation. The table's redistribution from
the 8-way batch cut is laid on that matrix (``TensorRedistribution``'s unified device
arrangement, ``tensor_layout/tensor_redistribution.cc``): the batch dimension becomes two
sub-dimensions, each gathered on its own, over 4 devices then over 2 (the dry-run compile).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, tokens: int = 8, dim: int = 32, picks: int = 2, classes: int = 4):
    """``{"net", "inputs"}`` (float32 ``x``); paths ``fc.*``, ``head.*``."""
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(dim, dim)
            self.keep = ms.Tensor(np.arange(0, 2 * picks, 2, dtype=np.int32))
            self.head = nn.Dense(dim, classes)

        def construct(self, x):
            y = ops.relu(self.fc(x))
            return self.head(y.mean(axis=1) + ops.gather(y, self.keep, 1).mean(axis=1))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, tokens, dim), np.float32)),)}
