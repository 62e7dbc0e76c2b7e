"""A sequence classifier on ``nn.LSTM`` (batch first) and a Dense on its last step's output,
as users write one. Input ``x`` ``(batch, steps, features)`` float32, output ``(batch,
classes)``. MindSpore 2.10's parallel compile of its training graph fails on 8 devices (CPU
dry-run) with or without strategies, and in ``data_parallel`` mode too ("split_size's length
must be equal with dimIndex", a ``SplitWithSize`` of the gradient graph): ``check`` names the
cell in its one line."""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, steps: int = 12, features: int = 32, hidden: int = 32,
          classes: int = 4):
    import mindspore as ms
    from mindspore import nn

    class LSTMClassifier(nn.Cell):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(features, hidden, batch_first=True)
            self.fc = nn.Dense(hidden, classes)

        def construct(self, x):
            y, _ = self.lstm(x)
            return self.fc(y[:, -1, :])

    x = ms.Tensor(np.zeros((batch, steps, features), np.float32))
    return {"net": LSTMClassifier(), "inputs": (x,)}


def build_gru(batch: int = 8, steps: int = 3, features: int = 8, hidden: int = 8):
    """``nn.GRU`` alone (batch first), input ``x`` ``(batch, steps, features)``, output its
    sequence ``(batch, steps, hidden)``. Its ``_DynamicRNNBase`` gets the four weights once as
    arguments and reads each in every unrolled step (functional MatMul and Add): MindSpore
    gives each read its own gradient AllReduce (:func:`smsg_ms.cost.shared_parameters.
    synced_per_reader`)."""
    import mindspore as ms
    from mindspore import nn

    class GRUNet(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(features, hidden, batch_first=True)

        def construct(self, x):
            return self.gru(x)[0]

    x = ms.Tensor(np.zeros((batch, steps, features), np.float32))
    return {"net": GRUNet(), "inputs": (x,)}


def build_loop(batch: int = 8, steps: int = 3, width: int = 8):
    """The control of :func:`build_gru`: a loop of ``steps`` functional matmuls, each reading
    its weight as ``self.w`` (one Load per read), ``x`` ``(batch, width)`` → same shape;
    MindSpore shares one gradient AllReduce among the reads."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Loop(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.zeros((width, width), np.float32)), name="w")

        def construct(self, x):
            for _ in range(steps):
                x = ops.tanh(ops.matmul(x, self.w))
            return x

    x = ms.Tensor(np.zeros((batch, width), np.float32))
    return {"net": Loop(), "inputs": (x,)}
