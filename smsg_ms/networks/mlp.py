"""Built-in MLP: ``Dense(d_in, hidden) → ReLU → Dense(hidden, hidden) → ReLU → Dense(hidden, d_out)``.

Inputs: ``x`` of shape ``(batch, d_in)`` float32; labels ``(batch, d_out)`` for an MSE loss.
Every MatMul is a Primitive attribute (``fc1.matmul`` ...), so every strategy can be written back.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 64, d_in: int = 512, hidden: int = 2048, d_out: int = 512,
          dtype: str = "float32"):
    import mindspore as ms
    from mindspore import nn

    class MLP(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(d_in, hidden)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Dense(hidden, hidden)
            self.relu2 = nn.ReLU()
            self.fc3 = nn.Dense(hidden, d_out)

        def construct(self, x):
            return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))

    np_dtype = np.float16 if dtype == "float16" else np.float32
    x = ms.Tensor(np.zeros((batch, d_in), np_dtype))
    y = ms.Tensor(np.zeros((batch, d_out), np_dtype))
    return {"net": MLP(), "inputs": (x,), "loss": nn.MSELoss(), "labels": (y,)}
