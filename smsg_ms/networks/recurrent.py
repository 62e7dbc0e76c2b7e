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
