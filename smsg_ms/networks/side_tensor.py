"""A chain of blocks that pass a side tensor beside the activation, as mindformers' MoE layers
pass the router's auxiliary loss (``extra_loss``) from layer to layer.

Block ``layers.{i}``: ``y = x @ w_i`` (MatMul, ``w_i (hidden, hidden)``), ``aux' = aux +
mean(y², axis 0)`` (Square, ReduceMean, Add: a ``(hidden,)`` vector computed from the block's
weight; a scalar side tensor is not used: MindSpore 2.10's pipeline compile fails on one, as
on any scalar crossing a stage), ``x' =
ReLU(y)``; it returns ``(x', aux')``. The network returns ``x_L + aux_L`` (``aux_L``
broadcast over the batch) with ``all_losses=True``, or ``x_L`` alone with
``all_losses=False``: then ``aux`` still crosses every block boundary forward, but nothing
reads it and its gradient is a constant (the mindformers Qwen3-MoE case, whose training loss
is the LM loss alone).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, hidden: int = 32, layers: int = 2, all_losses: bool = True):
    """``{"net", "inputs"}``: input ``x (batch, hidden)`` float32; primitive paths
    ``layers.{i}.matmul``, ``layers.{i}.square``, ``layers.{i}.mean``, ``layers.{i}.add``,
    ``layers.{i}.relu``; ``add`` (the sum of the two outputs, ``all_losses`` only)."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    class Block(nn.Cell):
        def __init__(self, i: int):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.full((hidden, hidden), 0.01, np.float32)),
                               name=f"w{i}")
            self.matmul = P.MatMul()
            self.square = P.Square()
            self.mean = P.ReduceMean()
            self.axis = (0,)
            self.add = P.Add()
            self.relu = P.ReLU()

        def construct(self, x, aux):
            y = self.matmul(x, self.w)
            return self.relu(y), self.add(aux, self.mean(self.square(y), self.axis))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Block(i) for i in range(layers)])
            self.zero = ms.Tensor(np.zeros((hidden,), np.float32))
            self.add = P.Add()

        def construct(self, x):
            aux = self.zero
            for block in self.layers:
                x, aux = block(x, aux)
            if all_losses:
                return self.add(x, aux)
            return x

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, hidden), np.float32)),)}
