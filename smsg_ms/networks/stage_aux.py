"""A chain of blocks that add an auxiliary loss into the returned loss, as mindformers' MoE
routers add their load-balancing loss (``extra_loss``) and its training step sums it into the
loss: the auxiliary terms' gradient is a constant.

Block ``layers.{i}``: ``h = ReLU(x @ w_i)`` (MatMul, ``w_i (hidden, hidden)``, the batch cut
``dp`` ways by the network's own ``shard()``, ``dp`` = world size / pipeline stages as in
:mod:`.world_blocks`), ``aux' = aux +
0.01 · mean(h)`` (ReduceMean over every axis, kept ``(1, 1)``; Mul by a constant; Add); it
returns ``(h, aux')``. The network returns ``mean(x_L) + aux_L`` (``(1, 1)``, its own loss), so
both means have a constant gradient. With the batch cut each mean is a forward ``AllReduce``;
MindSpore keeps their backward ``AllReduce``, one stage or pipelined, except that the CSE after
autodiff merges those of equal gradient expressions: the blocks' (one coefficient, 0.01) are one
per stage and micro-batch (one stage: 2 of 3; ``docs/networks.md``, "Constant gradients in a
pipeline"; the ``(1, 1)`` loss keeps them on one stage too, unlike mindformers' rank-0 losses,
and the prediction merges them per stage, :mod:`smsg_ms.planner.constant_gradients`). ``coefficients`` sets each
block's coefficient. ``two_sums``: two accumulators ``(a, b)``, block ``i`` returning
``(h, b, a + c_i · mean(h))`` and the network ``mean(x_L) + a_L + b_L``, so that two auxiliary
sums cross a stage border, their gradients equal expressions on the later stage but two
``Receive`` s on the earlier one.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, hidden: int = 32, layers: int = 2,
          coefficients: tuple | list | None = None, two_sums: bool = False):
    """``{"net", "inputs"}``: input ``x (batch, hidden)`` float32; ``coefficients``: block
    ``i``'s auxiliary coefficient (default 0.01 each; one per layer, else ``ValueError``);
    primitive paths
    ``layers.{i}.matmul``, ``layers.{i}.relu``, ``layers.{i}.aux_mean``,
    ``layers.{i}.aux_scale``, ``layers.{i}.aux_add``; ``out_mean``, ``add`` (and ``add2``
    with ``two_sums``)."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    from .world import world_size

    coefficients = [0.01] * layers if coefficients is None else [float(c) for c in coefficients]
    if len(coefficients) != layers:
        raise ValueError(f"stage_aux: {len(coefficients)} coefficients for {layers} layers")
    dp = max(world_size() // int(ms.get_auto_parallel_context("pipeline_stages")), 1)

    class Block(nn.Cell):
        def __init__(self, i: int):
            super().__init__()
            self.coefficient = coefficients[i]
            self.w = Parameter(ms.Tensor(np.full((hidden, hidden), 0.01, np.float32)),
                               name=f"w{i}")
            self.matmul = P.MatMul().shard(((dp, 1), (1, 1)))
            self.relu = P.ReLU().shard(((dp, 1),))
            self.aux_mean = P.ReduceMean(keep_dims=True).shard(((dp, 1),))
            self.aux_scale = P.Mul()
            self.aux_add = P.Add()

        def construct(self, x, aux, *other):
            h = self.relu(self.matmul(x, self.w))
            aux = self.aux_add(aux, self.aux_scale(self.aux_mean(h, (0, 1)), self.coefficient))
            if other:       # two_sums: (h, b, a')
                return h, other[0], aux
            return h, aux

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Block(i) for i in range(layers)])
            self.zero = ms.Tensor(np.zeros((1, 1), np.float32))
            self.out_mean = P.ReduceMean(keep_dims=True).shard(((dp, 1),))
            self.add = P.Add()
            self.add2 = P.Add()

        def construct(self, x):
            aux = self.zero
            if two_sums:
                other = self.zero
                for block in self.layers:
                    x, aux, other = block(x, aux, other)
                return self.add2(self.add(self.out_mean(x, (0, 1)), aux), other)
            for block in self.layers:
                x, aux = block(x, aux)
            return self.add(self.out_mean(x, (0, 1)), aux)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, hidden), np.float32)),)}
