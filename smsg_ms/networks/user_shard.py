"""A user network that calls ``shard()`` itself: ``y = MatMul(x, w)`` with
``MatMul().shard(((2, 1), (1, 4)))`` (8 devices), ``x (batch, k)``, ``w (k, n)``.

Capture runs on one device, where MindSpore rejects that strategy ("requires 8 devices"); the
capture must drop it and still return the graph (the plan or score sets every strategy).
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 16, k: int = 32, n: int = 64):
    """``(net, inputs)`` dict; the MatMul primitive's path is ``mm``."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mm = ops.MatMul().shard(((2, 1), (1, 4)))
            self.w = Parameter(ms.Tensor(np.ones((k, n), np.float32)), name="w")

        def construct(self, x):
            return self.mm(x, self.w)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, k), np.float32)),)}


def self_defined(batch: int = 16, k: int = 32, n: int = 64):
    """``y = MatMul(ReLU(x), w)`` whose ``ReLU`` (path ``relu``) fixes its own layout as
    mindformers' rotary embedding does: prim attr ``self_define_shard`` and ``shard()`` with
    ``Layout`` objects cutting the batch over every device (MindSpore then accepts no strategy
    for it). ``x (batch, k)``, ``w (k, n)``; the MatMul's path is ``mm``."""
    return _relu_matmul(batch, k, n, None)


def written_for_eight(batch: int = 16, k: int = 32, n: int = 64):
    """:func:`self_defined` with the ReLU's device matrix written by hand for 8 devices,
    ``Layout((8, 1), ("dp", "mp"))`` whatever the run, as mindformers GLM2's ``tile_kv`` writes
    ``Layout((1, 4, 1, 2), ...)``."""
    return _relu_matmul(batch, k, n, 8)


def columns_for_eight(batch: int = 16, k: int = 32, n: int = 64):
    """:func:`self_defined` whose ReLU keeps a layout that cuts the columns of ``x`` 8 ways,
    ``Layout((1, 8), ("dp", "mp"))("None", "mp")``, written for 8 devices (a layout the
    planner would not choose for it: the MatMul after it contracts over the cut columns)."""
    return _relu_matmul(batch, k, n, 8, columns=True)


def _relu_matmul(batch: int, k: int, n: int, devices: int | None, columns: bool = False):
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.parallel import Layout

    if devices is None:
        try:
            from mindspore.communication import get_group_size
            devices = get_group_size()
        except RuntimeError:  # not initialised: a capture in this process, one device
            devices = 1

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            layout = Layout((1, devices) if columns else (devices, 1), ("dp", "mp"))
            cut = layout("None", "mp") if columns else layout("dp", "None")
            self.relu = ops.ReLU().add_prim_attr("self_define_shard", True)
            self.relu.shard(in_strategy=(cut,), out_strategy=(cut,))
            self.mm = ops.MatMul()
            self.w = Parameter(ms.Tensor(np.ones((k, n), np.float32)), name="w")

        def construct(self, x):
            return self.mm(self.relu(x), self.w)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, k), np.float32)),)}


def blocks(batch: int = 16, dim: int = 32, layers: int = 2, own: bool = True):
    """Repeated blocks ``blocks.0`` ... ``blocks.{layers-1}``, each ``x = ReLU(MatMul(x, w))``
    with ``w (dim, dim)`` and, when ``own``, ``MatMul().shard(((2, 1), (1, 4)))`` (8 devices)
    set by the network itself; ``x (batch, dim)``. The MatMuls' paths are ``blocks.{i}.mm``.
    A pipelined plan on 16 devices in 2 stages has 8 devices a stage, where that strategy fits
    (``own=False``: the same network without ``shard()``)."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    from .chain import chain

    class Block(nn.Cell):
        def __init__(self, tag: int):
            super().__init__()
            self.mm = ops.MatMul().shard(((2, 1), (1, 4))) if own else ops.MatMul()
            self.relu = ops.ReLU()
            self.w = Parameter(ms.Tensor(np.full((dim, dim), 0.01, np.float32)), name=f"w{tag}")

        def construct(self, x):
            return self.relu(self.mm(x, self.w))

    return {"net": chain([Block(i) for i in range(layers)]), "inputs": (ms.Tensor(np.ones((batch, dim), np.float32)),)}


def concat_for_eight(batch: int = 16, k: int = 32):
    """``y = Concat((x, x), axis=-1)`` whose Concat (path ``concat``) fixes its own layout
    (``self_define_shard``) with a tuple of ``Layout`` objects over 8 devices,
    ``Layout((8, 1), ("dp", "mp"))("dp", "None")`` for each input and the output, as
    mindformers' multi-token prediction lays out its ``concat`` (``multi_token_prediction.py``)
    at its data-parallel size. ``x (batch, k)``."""
    import mindspore as ms
    from mindspore import nn
    from mindspore.ops.auto_generate import Concat
    from mindspore.parallel import Layout

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            layout = Layout((8, 1), ("dp", "mp"))
            self.concat = Concat(axis=-1).add_prim_attr("self_define_shard", True)
            self.concat.shard(in_strategy=((layout("dp", "None"), layout("dp", "None")),),
                              out_strategy=(layout("dp", "None"),))

        def construct(self, x):
            return self.concat((x, x))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, k), np.float32)),)}
