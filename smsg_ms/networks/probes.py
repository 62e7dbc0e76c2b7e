"""Small networks that exercise corner cases of the capture (used by tests and ``smsg-ms graph``).

* :func:`two_matmuls`: one cell holding two ``MatMul`` primitives (different transpose flags) and
  calling one of them twice, the case where a semi-auto compile drops the primitives' tags.
* :func:`uneven_layers`: a stack of MLP blocks whose FFN widths are given per layer, so one layer
  can differ in shape from the others.
* :func:`conv_bn_dropout`: Conv2d → BatchNorm2d → Dropout, cells whose primitive depends on the
  training mode (BatchNorm2d calls ``bn_train`` or ``bn_infer``; Dropout is skipped in eval).
* :func:`tensor_loop`: a ``while`` whose condition is a tensor value, a weight read only inside
  the loop (tensor-valued control flow: MindSpore keeps the loop in the compiled graph).
* :func:`concat_constant`: a ``Concat`` whose input tuple holds a constant (mindformers' MTP
  ``roll_tensor``: a slice of the tokens, then zeros appended).
* :func:`failing`: a spec whose function raises (``ValueError("no such width")``).
"""
from __future__ import annotations

import numpy as np


def two_matmuls(batch: int = 8, hidden: int = 16):
    """``y = (x @ W1) @ W2ᵀ @ W2ᵀ`` in one cell; ``W1, W2`` (hidden, hidden); ``x`` (batch, hidden).

    Primitive paths: ``block.first`` (called once), ``block.second`` (``transpose_b=True``,
    called twice: call indices 0 and 1).
    """
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class TwoMatMuls(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w1 = Parameter(np.zeros((hidden, hidden), np.float32), name="w1")
            self.w2 = Parameter(np.zeros((hidden, hidden), np.float32), name="w2")
            self.first = ops.MatMul()
            self.second = ops.MatMul(transpose_b=True)

        def construct(self, x):
            return self.second(self.second(self.first(x, self.w1), self.w2), self.w2)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.block = TwoMatMuls()

        def construct(self, x):
            return self.block(x)

    return Net(), (ms.Tensor(np.zeros((batch, hidden), np.float32)),)


def uneven_layers(batch: int = 8, hidden: int = 16, widths: tuple = (32, 32, 32, 32)):
    """``len(widths)`` residual MLP blocks ``h + relu(h @ A_i) @ B_i``; ``A_i`` (hidden, widths[i]).

    Paths: ``layers.<i>.up.matmul``, ``layers.<i>.down.matmul``, ``layers.<i>.relu``,
    ``layers.<i>.add``.
    """
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Linear(nn.Cell):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.weight = Parameter(np.zeros((d_in, d_out), np.float32), name="weight")
            self.matmul = ops.MatMul()

        def construct(self, x):
            return self.matmul(x, self.weight)

    class Block(nn.Cell):
        def __init__(self, width):
            super().__init__()
            self.up, self.down = Linear(hidden, width), Linear(width, hidden)
            self.relu, self.add = ops.ReLU(), ops.Add()

        def construct(self, h):
            return self.add(h, self.down(self.relu(self.up(h))))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Block(int(w)) for w in widths])

        def construct(self, h):
            for layer in self.layers:
                h = layer(h)
            return h

    return Net(), (ms.Tensor(np.zeros((batch, hidden), np.float32)),)


def conv_bn_dropout(batch: int = 4, channels: int = 8, image: int = 8, keep: float = 0.5):
    """``Dropout(BatchNorm2d(Conv2d(x)))``, 3×3 'same' convolution ``channels → channels``; ``x``
    ``(batch, channels, image, image)`` float32. Paths: ``conv.conv2d``, ``bn.bn_train`` (training
    mode) or ``bn.bn_infer`` (eval), ``drop.dropout``.
    """
    import mindspore as ms
    from mindspore import nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(channels, channels, 3, pad_mode="same")
            self.bn = nn.BatchNorm2d(channels)
            self.drop = nn.Dropout(p=1.0 - keep)

        def construct(self, x):
            return self.drop(self.bn(self.conv(x)))

    return Net(), (ms.Tensor(np.zeros((batch, channels, image, image), np.float32)),)


def tensor_loop(batch: int = 8, hidden: int = 16):
    """``h = x @ W_in``, then ``while h.sum() < limit: h = h @ W_loop``, then ``h @ W_out``;
    every weight (hidden, hidden), ``x`` (batch, hidden). The loop's condition is a tensor value,
    so the loop (and ``W_loop``, read only in its body) stays control flow in the compiled graph.

    Paths: ``inp``, ``body.matmul`` (the loop's ``MatMul``), ``out``.
    """
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Body(nn.Cell):
        def __init__(self):
            super().__init__()
            self.weight = Parameter(np.ones((hidden, hidden), np.float32), name="w_loop")
            self.matmul = ops.MatMul()

        def construct(self, h):
            return self.matmul(h, self.weight)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w_in = Parameter(np.ones((hidden, hidden), np.float32), name="w_in")
            self.w_out = Parameter(np.ones((hidden, hidden), np.float32), name="w_out")
            self.inp = ops.MatMul()
            self.out = ops.MatMul()
            self.body = Body()
            self.limit = ms.Tensor(1000.0, ms.float32)

        def construct(self, x):
            h = self.inp(x, self.w_in)
            while h.sum() < self.limit:
                h = self.body(h)
            return self.out(h, self.w_out)

    return Net(), (ms.Tensor(np.ones((batch, hidden), np.float32)),)


def concat_constant(batch: int = 8, hidden: int = 16):
    """``y = concat((x[:, 1:], zeros(batch, 1)), axis=-1) @ W``, as mindformers' MTP
    ``roll_tensor`` shifts its labels: ``x`` (batch, hidden), ``W`` (hidden, hidden); the zeros
    are a constant MindSpore folds into the ``Concat``'s input tuple.

    Paths: ``slice``, ``concat``, ``matmul``.
    """
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(np.ones((hidden, hidden), np.float32), name="w")
            self.slice = ops.StridedSlice()
            self.zeros = ops.Zeros()
            self.concat = ops.Concat(axis=-1)
            self.matmul = ops.MatMul()

        def construct(self, x):
            rolled = self.slice(x, (0, 1), (batch, hidden), (1, 1))
            rolled = self.concat((rolled, self.zeros((batch, 1), ms.float32)))
            return self.matmul(rolled, self.w)

    return Net(), (ms.Tensor(np.ones((batch, hidden), np.float32)),)


def failing(width: int = 0):
    """Always raises ``ValueError("no such width: <width>")``."""
    raise ValueError(f"no such width: {width}")
