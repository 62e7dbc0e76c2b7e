"""An embedding table read on the first and the last pipeline stage: GPT-2's tied output head.

``ids (batch,) int32 → embed: Gather(table) → layers.0 … layers.{L-1}: ReLU(x @ w_i) →
head: MatMul(h, table, transpose_b)`` gives logits ``(batch, vocab)``; ``table (vocab,
hidden)``, ``w_i (hidden, hidden)``, float32. With the blocks on 2 stages the embedding runs with
the first stage and the head with the last (the network stages them itself, as mindformers does,
from the context's ``pipeline_stages``): the one parameter ``table`` is read on both.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, vocab: int = 64, hidden: int = 32, layers: int = 2,
          own_stages: bool = True, tied_block: int = -1):
    """``{"net", "inputs"}``: input ``ids (batch,)`` int32; primitive paths ``embed.gather``,
    ``layers.{i}.matmul``, ``layers.{i}.relu``, ``head.matmul``. ``own_stages=False``: the
    embedding and the head are left without a ``pipeline_stage`` (a user's network; the
    write-back stages them: :func:`smsg_ms.planner.param_only.shared_parameter_cells`).
    ``tied_block`` ``i`` (``0 <= i < layers``): block ``i`` reads the table too,
    ``ReLU(((x @ w_i) @ tableᵀ) @ table)`` (primitive paths ``layers.{i}.scores``,
    ``layers.{i}.back``): a parameter read on three stages or more."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    class Embed(nn.Cell):
        def __init__(self, table):
            super().__init__()
            self.table = table
            self.gather = P.Gather()

        def construct(self, ids):
            return self.gather(self.table, ids, 0)

    class Block(nn.Cell):
        def __init__(self, i: int, table=None):
            super().__init__()
            self.table = table
            if table is not None:
                self.scores = P.MatMul(transpose_b=True)
                self.back = P.MatMul()
            self.w = Parameter(ms.Tensor(np.full((hidden, hidden), 0.01, np.float32)),
                               name=f"w{i}")
            self.matmul = P.MatMul()
            self.relu = P.ReLU()

        def construct(self, x):
            x = self.matmul(x, self.w)
            if self.table is not None:
                x = self.back(self.scores(x, self.table), self.table)
            return self.relu(x)

    class Head(nn.Cell):
        def __init__(self, table):
            super().__init__()
            self.table = table
            self.matmul = P.MatMul(transpose_b=True)

        def construct(self, h):
            return self.matmul(h, self.table)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            table = Parameter(ms.Tensor(np.full((vocab, hidden), 0.01, np.float32)),
                              name="table")
            self.embed = Embed(table)
            self.layers = nn.CellList([Block(i, table if i == tied_block else None)
                                       for i in range(layers)])
            self.head = Head(table)
            stages = int(ms.get_auto_parallel_context("pipeline_stages"))
            if stages > 1 and own_stages:   # as mindformers stages its embedding and head
                self.embed.pipeline_stage = 0
                self.head.pipeline_stage = stages - 1

        def construct(self, ids):
            x = self.embed(ids)
            for block in self.layers:
                x = block(x)
            return self.head(x)

    return {"net": Net(), "inputs": (ms.Tensor(np.zeros((batch,), np.int32)),)}
