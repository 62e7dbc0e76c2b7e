"""A non-trainable parameter read by an Add and updated in place by an AssignAdd whose
``shard()`` the network sets, as mindformers' MoE router keeps ``fi_accu`` (``router.py``,
``gbs_aux_loss``: ``add_accu(fi_accu, f)`` then ``assignadd(fi_accu, f)``, both
``shard(((1,), (1,)))``).

``x (batch, k) → MatMul(w) → h (batch, e) → ReduceSum(axis 0) → f (e,)``;
``s = Add(acc, f)``, ``AssignAdd(acc, f)`` (strategy ``((1,), (1,))`` set by the network);
the output ``h * s`` (broadcast over rows). MindSpore gives ``acc`` one layout over its users
("multiple users, but the TensorInfo are different" otherwise): the Add must keep ``acc`` whole.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 32, k: int = 64, e: int = 64):
    """``(net, inputs, loss, labels)`` dict; the Add's path is ``add_accu``, the AssignAdd's
    ``assignadd``, the parameter ``acc (e,)``."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.ones((k, e), np.float32)), name="w")
            self.acc = Parameter(ms.Tensor(np.zeros((e,), np.float32)), name="acc",
                                 requires_grad=False)
            self.mm = ops.MatMul()
            self.sum = ops.ReduceSum()
            self.add_accu = ops.Add()
            self.assignadd = ops.AssignAdd().shard(((1,), (1,)))
            self.mul = ops.Mul()

        def construct(self, x):
            h = self.mm(x, self.w)
            f = self.sum(h, 0)
            s = self.add_accu(self.acc, f)
            self.assignadd(self.acc, f)
            return self.mul(h, s)

    x = ms.Tensor(np.ones((batch, k), np.float32))
    y = ms.Tensor(np.zeros((batch, e), np.float32))
    return {"net": Net(), "inputs": (x,), "loss": nn.MSELoss(), "labels": (y,)}
