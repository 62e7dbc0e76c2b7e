"""A chain of identical layers followed by one multi-token-prediction layer of another structure
(DeepSeek-V3's pattern in mindformers: ``model.decoder.layers.i`` then ``model.mtp.layers.0``,
which ``num_hidden_layers`` does not count and which runs on the last pipeline stage).

``x (batch, width) → layers.0 … layers.{L-1} → mtp.layers.0``, an MSE loss against labels
``(batch, width)``; each layer
``h → matmul(w_i) → relu → + h``; the MTP layer ``h → matmul(u) → mul(h) → matmul(v) → + h``
(two weights, a product: not the layers' structure).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, width: int = 32, layers: int = 4):
    """Shapes: ``x`` and labels ``(batch, width)`` float32; weights ``(width, width)``
    float32."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    def weight(name):
        return Parameter(ms.Tensor(np.full((width, width), 0.01, np.float32)), name=name)

    class Layer(nn.Cell):
        def __init__(self, i):
            super().__init__()
            self.mm, self.relu, self.add = ops.MatMul(), ops.ReLU(), ops.Add()
            self.w = weight(f"w{i}")

        def construct(self, h):
            return self.add(self.relu(self.mm(h, self.w)), h)

    class MtpLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mm1, self.mm2, self.mul, self.add = (ops.MatMul(), ops.MatMul(), ops.Mul(),
                                                      ops.Add())
            self.u, self.v = weight("mtp_u"), weight("mtp_v")

        def construct(self, h):
            return self.add(self.mm2(self.mul(self.mm1(h, self.u), h), self.v), h)

    class Mtp(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([MtpLayer()])

        def construct(self, h):
            return self.layers[0](h)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Layer(i) for i in range(layers)])
            self.mtp = Mtp()

        def construct(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.mtp(x)

    x = ms.Tensor(np.ones((batch, width), np.float32))
    y = ms.Tensor(np.zeros((batch, width), np.float32))
    return {"net": Net(), "inputs": (x,), "loss": nn.MSELoss(), "labels": (y,)}
