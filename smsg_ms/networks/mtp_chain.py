"""A chain of identical layers followed by one multi-token-prediction layer of another structure
(DeepSeek-V3's pattern in mindformers: ``model.decoder.layers.i`` then ``model.mtp.layers.0``,
which ``num_hidden_layers`` does not count and which runs on the last pipeline stage).

``x (batch, width) → layers.0 … layers.{L-1} → mtp.layers.0``, an MSE loss against labels
``(batch, width)``; each layer
``h → matmul(w_i) → relu → + h``; the MTP layer ``h → matmul(u) → mul(h) → matmul(v) → + h``
(two weights, a product: not the layers' structure).

``aux=True`` adds DeepSeek-V3's loss pattern: each layer also returns its ReLU output, which the
layer's own ``aux_mean`` (a ReduceMean to a scalar, path ``layers.i.aux_mean.mean``) reads only after the
MTP layer has run (mindformers' router auxiliary losses appear after the MTP layer in MindSpore's
graph order); the MTP layer ends with a Reshape to ``(batch·width,)`` (``mtp.layers.0.reshape``),
read by the loss; the network returns that plus the sum of the scalars, against labels
``(batch·width,)``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, width: int = 32, layers: int = 4, aux: bool = False):
    """Shapes: ``x`` and labels ``(batch, width)`` float32 (``aux``: labels ``(batch·width,)``);
    weights ``(width, width)`` float32."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    def weight(name):
        return Parameter(ms.Tensor(np.full((width, width), 0.01, np.float32)), name=name)

    class AuxMean(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mean = ops.ReduceMean()

        def construct(self, y):
            return self.mean(y)

    class Layer(nn.Cell):
        def __init__(self, i):
            super().__init__()
            self.mm, self.relu, self.add = ops.MatMul(), ops.ReLU(), ops.Add()
            self.w = weight(f"w{i}")
            self.aux_mean = AuxMean()

        def construct(self, h):
            y = self.relu(self.mm(h, self.w))
            return (self.add(y, h), y) if aux else self.add(y, h)

    class MtpLayer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mm1, self.mm2, self.mul, self.add = (ops.MatMul(), ops.MatMul(), ops.Mul(),
                                                      ops.Add())
            self.u, self.v = weight("mtp_u"), weight("mtp_v")
            self.reshape = ops.Reshape()

        def construct(self, h):
            out = self.add(self.mm2(self.mul(self.mm1(h, self.u), h), self.v), h)
            return self.reshape(out, (batch * width,)) if aux else out

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
            if not aux:
                for layer in self.layers:
                    x = layer(x)
                return self.mtp(x)
            sides = []
            for layer in self.layers:
                x, y = layer(x)
                sides.append(y)
            out = self.mtp(x)
            total = self.layers[0].aux_mean(sides[0])
            for i in range(1, layers):
                total = total + self.layers[i].aux_mean(sides[i])
            return out + total

    x = ms.Tensor(np.ones((batch, width), np.float32))
    y = ms.Tensor(np.zeros((batch * width,) if aux else (batch, width), np.float32))
    return {"net": Net(), "inputs": (x,), "loss": nn.MSELoss(), "labels": (y,)}
