"""mindformers' MoE token permute in small: a ``Morph`` whose ``fn`` reshapes each device's
slice to one row, read by ordinary primitives at the world size's data-parallel degree.

``x (batch, seq, hidden)`` → ReLU → Morph ``permute`` (``fn``: ``Reshape(x, (1, -1, hidden))``
of the slice; ``infer_shape``: ``(dp, batch·seq/dp, hidden)``, the global shape) → Mul by
``w (hidden,)`` (the router's gate, in small) → ``Reshape(scores, (dp, -1))`` → Softmax. ``dp`` is the world size the network is built for
(:func:`smsg_ms.networks.world.world_size`), as mindformers' ``MoELayer`` and ``TopKRouter``
read ``data_parallel`` (``transformer/moe/moe_layer.py`` ``local_reshape_permute``,
``router.py`` ``reshape(scores, (self.dp, -1, E))``). The Morph's layouts over ``(dp, tp) =
(world size, 1)``: input ``("dp", "None", "None")``, output ``("dp", "None", "None")``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, seq: int = 8, hidden: int = 32):
    """``{"net", "inputs"}``; primitive paths ``relu``, ``permute`` (its ``fn``'s ``flat``),
    ``score``, ``rows``, ``softmax``."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812
    from mindspore.parallel import Layout

    from .world import world_size

    dp = world_size()

    def infer_dtype(x):
        return x

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.relu = P.ReLU()
            self.permute = P.Morph(self.permute_fn, self.permute_shape, infer_dtype)
            self.permute.add_prim_attr("self_define_shard", True)
            layout = Layout((dp, 1), ("dp", "tp"))
            self.permute.shard(in_strategy=(layout("dp", "None", "None"),),
                               out_strategy=(layout("dp", "None", "None"),))
            self.w = Parameter(ms.Tensor(np.ones((hidden,), np.float32)), name="w")
            self.score = P.Mul()
            self.flat = P.Reshape()
            self.rows = P.Reshape()
            self.softmax = P.Softmax()

        def permute_fn(self, x):
            return self.flat(x, (1, -1, hidden))

        def permute_shape(self, x):
            return (dp, x[0] * x[1] // dp, x[-1])

        def construct(self, x):
            tokens = self.permute(self.relu(x))
            return self.softmax(self.rows(self.score(tokens, self.w), (dp, -1)))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, seq, hidden), np.float32)),)}
