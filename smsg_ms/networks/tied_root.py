"""A decoder whose output head is a functional call on the network's root reading the input
embedding's table (tied embeddings as users write them: ``ops.matmul(x,
self.emb.embedding_table.T)`` in the top-level ``construct``).

``ids (batch, seq) int32 → emb: nn.Embedding(vocab, hidden) → layers.i: x + ReLU(fc_i(x))
(nn.Dense hidden → hidden, no bias) → logits = x @ tableᵀ (batch, seq, vocab)``; ``table
(vocab, hidden)`` float32. Pipelined, the embedding cell runs on stage 0 (the write-back stages
it: :func:`smsg_ms.planner.param_only.shared_parameter_cells`) and the head, a root operator,
on the last stage. MindSpore 2.10 sends nothing for the table and keeps no gradient of it on
the last stage (:mod:`smsg_ms.planner.root_reads`); ``head="cell"`` puts the head in a cell of
its own (``head.matmul``, ``MatMul(transpose_b=True)``), where MindSpore sends the table
(:mod:`smsg_ms.networks.tied_stages`).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 8, hidden: int = 32, vocab: int = 64, layers: int = 2,
          head: str = "root", swap: bool = False, embed: str = "cell"):
    """``{"net", "inputs"}``: input ``ids (batch, seq)`` int32; primitive paths
    ``emb.gather``, ``layers.{i}.fc.matmul``; ``head``: ``"root"`` (the Transpose and MatMul
    on the root) or ``"cell"``. ``swap``: each block swaps its sequence and hidden axes
    there and back (``.transpose(0, 2, 1)`` twice) before its Dense, so that the root's
    ``Transpose`` of the table carries the first block's scope in the capture (MindSpore
    scopes a functional call by the first cell that made it).

    Raises:
        ValueError: another ``head``.
    """
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.ops import operations as P  # noqa: N812

    if head not in ("root", "cell"):
        raise ValueError(f"head must be 'root' or 'cell', not {head!r}")
    if embed not in ("cell", "functional"):
        raise ValueError(f"embed must be 'cell' or 'functional', not {embed!r}")

    class Emb(nn.Cell):
        def __init__(self):
            super().__init__()
            self.embedding_table = ms.Parameter(
                ms.Tensor(np.zeros((vocab, hidden), np.float32)), name="embedding_table")

        def construct(self, ids):
            return ops.gather(self.embedding_table, ids, 0)

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(hidden, hidden, has_bias=False)

        def construct(self, x):
            h = x.transpose(0, 2, 1).transpose(0, 2, 1) if swap else x
            return x + ops.relu(self.fc(h))

    class Head(nn.Cell):
        def __init__(self, table):
            super().__init__()
            self.table = table
            self.matmul = P.MatMul(transpose_b=True)

        def construct(self, x):
            b, s, h = x.shape
            return self.matmul(x.reshape(b * s, h), self.table)

    class LM(nn.Cell):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, hidden) if embed == "cell" else Emb()
            if embed == "functional" and ms.get_auto_parallel_context("pipeline_stages") > 1:
                self.emb.pipeline_stage = 0
            self.layers = nn.CellList([Block() for _ in range(layers)])
            self.head = Head(self.emb.embedding_table) if head == "cell" else None

        def construct(self, ids):
            x = self.emb(ids)
            for blk in self.layers:
                x = blk(x)
            if self.head is not None:
                return self.head(x)
            return ops.matmul(x, self.emb.embedding_table.T)

    return {"net": LM(), "inputs": (ms.Tensor(np.zeros((batch, seq), np.int32)),)}
