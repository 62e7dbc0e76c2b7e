"""A network with a ``Morph`` linear layer whose layout it fixes, as mindformers'
``parallel_core`` models build theirs (``tensor_parallel/layers.py`` ``ColumnParallelLinear``):
``x (seq, batch, hidden)`` → ReLU → Morph(Reshape → MatMul → Reshape, ``w (hidden, out)``) → ReLU.

The Morph carries prim attr ``self_define_shard`` and ``shard()`` with ``Layout`` objects over a
device matrix ``(dp, tp) = (world size, 1)`` (``dp`` read from the initialised communication,
as mindformers sets ``data_parallel`` from its run): input ``("None", "dp", "None")`` (the
batch, dimension 1, cut ``dp`` ways), weight ``("None", "tp")``, output ``("None", "dp",
"tp")``. The ReLUs are ordinary primitives the plan sets.
"""
from __future__ import annotations

import numpy as np


def _world_size() -> int:
    from .world import world_size   # the plan's device count in a capture (1 uninitialised)

    return world_size()


def build(seq: int = 64, batch: int = 16, hidden: int = 32, out: int = 64, layers: int = 0):
    """``{"net", "inputs"}``; primitive paths ``relu``, ``lin.morph``, ``relu2``; with
    ``layers=L``: ``blocks.{i}.relu``, ``blocks.{i}.lin.morph``, ``blocks.{i}.add`` (``i < L``)."""
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812
    from mindspore.parallel import Layout

    from .chain import chain

    def infer_shape(x, w):
        return x[:-1] + [w[-1]] if isinstance(x, list) else x[:-1] + (w[-1],)

    def infer_dtype(x, w):
        return x

    class MorphLinear(nn.Cell):
        def __init__(self, dp: int, out: int = out, tag: str = ""):
            super().__init__()
            self.w = Parameter(ms.Tensor(np.zeros((hidden, out), np.float32)), name=f"w{tag}")
            self.reshape = P.Reshape()
            self.matmul = P.MatMul()
            self.morph = P.Morph(self.forward_func, infer_shape, infer_dtype)
            self.morph.add_prim_attr("self_define_shard", True)
            layout = Layout((dp, 1), ("dp", "tp"))
            self.morph.shard(in_strategy=(layout("None", "dp", "None"), layout("None", "tp")),
                             out_strategy=(layout("None", "dp", "tp"),))

        def forward_func(self, x, w):
            shape = x.shape[:-1] + (w.shape[-1],)
            y = self.matmul(self.reshape(x, (-1, hidden)), w)
            return self.reshape(y, shape)

        def construct(self, x):
            return self.morph(x, self.w)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.relu = P.ReLU()
            self.lin = MorphLinear(_world_size())
            self.relu2 = P.ReLU()

        def construct(self, x):
            return self.relu2(self.lin(self.relu(x)))

    class Block(nn.Cell):
        def __init__(self, i: int):
            super().__init__()
            self.relu = P.ReLU()
            self.lin = MorphLinear(_world_size(), hidden, str(i))
            self.add = P.Add()

        def construct(self, x):
            return self.add(x, self.lin(self.relu(x)))

    net = chain([Block(i) for i in range(layers)]) if layers > 0 else Net()
    return {"net": net, "inputs": (ms.Tensor(np.ones((seq, batch, hidden), np.float32)),)}
