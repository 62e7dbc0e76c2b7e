"""A chain of blocks whose shapes depend on the world size they are built for, as
mindformers' ``parallel_core`` MoE routers reshape their scores by ``data_parallel`` =
world size / pipeline stages (``transformer/moe/router.py``: ``reshape(scores, (dp, -1, E))``;
``smsg_ms.networks.families._mcore_llm`` sets ``data_parallel`` so).

Block ``layers.{i}``: ``y = x @ w_i`` (MatMul, ``w_i (hidden, hidden)``), ``rows =
Reshape(y, (dp, -1))``, ``s = Softmax(rows)`` (over each of the ``dp`` rows), ``x' =
ReLU(Reshape(s, (-1, hidden)))`` (a ReLU, not a Reshape, ends the block: MindSpore refuses a
Reshape's output as a stage border). ``dp`` = :func:`smsg_ms.networks.world.world_size` //
the context's ``pipeline_stages``: the devices of one stage, in a capture built for them and
in MindSpore's compile of ``p`` stages on ``n`` devices alike (``n / p``).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, hidden: int = 32, layers: int = 2):
    """``{"net", "inputs"}``: input ``x (batch, hidden)`` float32; primitive paths
    ``layers.{i}.matmul``, ``layers.{i}.rows``, ``layers.{i}.softmax``, ``layers.{i}.back``,
    ``layers.{i}.relu``."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    from .world import world_size

    dp = max(world_size() // int(ms.get_auto_parallel_context("pipeline_stages")), 1)

    class Block(nn.Cell):
        def __init__(self, i: int):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.full((hidden, hidden), 0.01, np.float32)),
                               name=f"w{i}")
            self.matmul = P.MatMul()
            self.rows = P.Reshape()
            self.softmax = P.Softmax()
            self.back = P.Reshape()
            self.relu = P.ReLU()

        def construct(self, x):
            s = self.softmax(self.rows(self.matmul(x, self.w), (dp, -1)))
            return self.relu(self.back(s, (-1, hidden)))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Block(i) for i in range(layers)])

        def construct(self, x):
            for block in self.layers:
                x = block(x)
            return x

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, hidden), np.float32)),)}
