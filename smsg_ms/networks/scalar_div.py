"""A tensor divided by a Python scalar in a network's ``construct`` (``x / 2.0``), which
MindSpore compiles to ``Divs``: a primitive without an ``OperatorInfo``, laid out all or
nothing (:mod:`smsg_ms.cost.no_operator_info`); ``x + 1.0`` compiles to ``Add`` (an
``OperatorInfo``, the batch-parallel default with a gcd).

``y = MatMul(ReLU(x) / 2.0 + 1.0, w)``: ``x (batch, k)``, ``w (k, n)``. With ``batch`` 4 on 8
devices the ``Divs`` keeps ``x`` whole (``StandAloneInfo``), not cut 4-way.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 4, k: int = 32, n: int = 64):
    """``{"net", "inputs"}`` of the network above (float32); paths ``relu``, ``mm``."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.relu = ops.ReLU()
            self.mm = ops.MatMul()
            self.w = Parameter(ms.Tensor(np.ones((k, n), np.float32)), name="w")

        def construct(self, x):
            return self.mm(self.relu(x) / 2.0 + 1.0, self.w)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, k), np.float32)),)}
