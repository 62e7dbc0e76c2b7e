"""A network that returns its own loss, as mindformers' MoE models do: a data loss, an
auxiliary loss with a constant gradient and a statistic only ``AssignAdd`` reads, each a
reduction of the batch-cut activation (a forward ``AllReduce`` each).

``h = ReLU(x @ w)`` (``x (batch, hidden)`` cut on the batch, ``w (hidden, hidden)``);
``loss = sum(h²) / (sum(|x|) + 1) + 0.01 · mean(h)`` returned as a ``(1,)`` tensor;
``load += mean(h, 0)`` (a ``Parameter`` updated by ``AssignAdd``, not trained). The gradient
of ``sum(h²)`` is ``1 / (sum(|x|) + 1)``, data; of ``mean(h)`` the constant 0.01; ``mean(h,
0)`` gets none. Layouts are the network's own ``shard()`` strategies (batch cut ``dp``).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 64, hidden: int = 32, dp: int = 8):
    """``{"net", "inputs"}`` (float32); paths ``mm``, ``relu``, ``square``, ``numerator``,
    ``absolute``, ``denominator``, ``div``, ``aux_mean``, ``aux_scale``, ``load_mean``,
    ``assign_add``."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.full((hidden, hidden), 0.01, np.float32)),
                               name="w")
            self.load = Parameter(ms.Tensor(np.zeros((hidden,), np.float32)), name="load",
                                  requires_grad=False)
            self.mm = P.MatMul().shard(((dp, 1), (1, 1)))
            self.relu = P.ReLU().shard(((dp, 1),))
            self.square = P.Square().shard(((dp, 1),))
            self.numerator = P.ReduceSum().shard(((dp, 1),))
            self.absolute = P.Abs().shard(((dp, 1),))
            self.denominator = P.ReduceSum().shard(((dp, 1),))
            self.div = P.Div()
            self.aux_mean = P.ReduceMean().shard(((dp, 1),))
            self.aux_scale = P.Mul()
            self.load_mean = P.ReduceMean().shard(((dp, 1),))
            self.assign_add = P.AssignAdd()
            self.reshape = P.Reshape()

        def construct(self, x):
            h = self.relu(self.mm(x, self.w))
            self.assign_add(self.load, self.load_mean(h, 0))
            loss = self.div(self.numerator(self.square(h)),
                            self.denominator(self.absolute(x)) + 1.0)
            loss = loss + self.aux_scale(self.aux_mean(h), 0.01)
            return self.reshape(loss, (1,))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, hidden), np.float32)),)}
