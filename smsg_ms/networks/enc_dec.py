"""An encoder-decoder (T5-like) of blocks whose graph order opens with a decoder block, and a
window-masked attention score, as users write them.

:func:`build`: ``src (batch, seq, dim)``, ``tgt (batch, seq, dim)`` float32 →
``enc.0`` … ``enc.{n-1}`` on ``src`` (``x + o(attention(x))``, one head, then ``x + ff(x)``) →
``dec.0`` … ``dec.{n-1}`` on ``tgt`` (self-attention, then cross-attention reading the
encoder's output, then ``ff``) → ``mean(y²)``-ready output ``(batch, seq, dim)``. A decoder
block's self-attention does not read the encoder, so MindSpore's graph order runs ``dec.0``'s
first operators before ``enc.0``; the chain of blocks (pipeline stages) is ``enc.*`` then
``dec.*``.

:func:`build_where`: causal scores masked by a lower-rank ``ops.where`` condition (refused by
MindSpore's parallel Select).

:func:`build_topk_gather`: a top-2 router's ``gather_elements`` refused by MindSpore.

:func:`build_window`: ``x (batch, seq, dim)`` → one-head scores ``(batch, seq, seq)`` masked
by ``masked_fill(scores, ~((j <= i) & (i - j < window)), -1e9)``, a sliding-window causal mask
``(seq, seq)`` computed in ``construct`` from ``ops.arange`` (LessEqual, Less, LogicalAnd,
LogicalNot) and broadcast over the batch → softmax → ``Dense``.
"""
from __future__ import annotations

import numpy as np


def build(batch: int = 8, seq: int = 8, dim: int = 16, layers: int = 2):
    """``{"net", "inputs"}`` of the encoder-decoder above (float32)."""
    import mindspore as ms
    from mindspore import nn, ops

    class Attn(nn.Cell):
        def __init__(self):
            super().__init__()
            self.q = nn.Dense(dim, dim, has_bias=False)
            self.kv = nn.Dense(dim, 2 * dim, has_bias=False)
            self.o = nn.Dense(dim, dim, has_bias=False)

        def construct(self, x, mem):
            k, v = ops.split(self.kv(mem), dim, axis=-1)
            p = ops.softmax(ops.bmm(self.q(x), k.transpose(0, 2, 1)), -1)
            return self.o(ops.bmm(p, v))

    class Enc(nn.Cell):
        def __init__(self):
            super().__init__()
            self.att = Attn()
            self.ff = nn.Dense(dim, dim)

        def construct(self, x):
            x = x + self.att(x, x)
            return x + ops.relu(self.ff(x))

    class Dec(nn.Cell):
        def __init__(self):
            super().__init__()
            self.self_att = Attn()
            self.cross = Attn()
            self.ff = nn.Dense(dim, dim)

        def construct(self, y, enc):
            y = y + self.self_att(y, y)
            y = y + self.cross(y, enc)
            return y + ops.relu(self.ff(y))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.enc = nn.CellList([Enc() for _ in range(layers)])
            self.dec = nn.CellList([Dec() for _ in range(layers)])

        def construct(self, src, tgt):
            x = src
            for blk in self.enc:
                x = blk(x)
            y = tgt
            for blk in self.dec:
                y = blk(y, x)
            return y

    ones = ms.Tensor(np.ones((batch, seq, dim), np.float32))
    return {"net": Net(), "inputs": (ones, ones)}


def build_window(batch: int = 8, seq: int = 16, dim: int = 16, window: int = 4):
    """``{"net", "inputs"}`` of the window-masked attention above (float32)."""
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Dense(dim, 3 * dim)
            self.o = nn.Dense(dim, dim)

        def construct(self, x):
            q, k, v = ops.split(self.qkv(x), dim, axis=-1)
            s = x.shape[1]
            i = ops.arange(s).view(s, 1)
            j = ops.arange(s).view(1, s)
            allowed = ops.logical_and(j <= i, (i - j) < window)
            sc = ops.masked_fill(ops.bmm(q, k.transpose(0, 2, 1)), ops.logical_not(allowed),
                                 -1e9)
            return self.o(ops.bmm(ops.softmax(sc, -1), v))

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, seq, dim), np.float32)),)}


def build_where(batch: int = 8, seq: int = 8, dim: int = 16):
    """``{"net", "inputs"}``: one-head scores ``(batch, seq, seq)`` causally masked by
    ``ops.where(tril(ones((seq, seq))), scores, full_like(scores, -1e9))``, whose condition
    has a lower rank than the values: MindSpore's parallel Select refuses it
    (``SelectInfo::CheckStrategy``: "all three input shapes are equal")."""
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.qk = nn.Dense(dim, 2 * dim)

        def construct(self, x):
            q, k = ops.split(self.qk(x), dim, axis=-1)
            sc = ops.bmm(q, k.transpose(0, 2, 1))
            causal = ops.tril(ops.ones((seq, seq), ms.bool_))
            return ops.softmax(ops.where(causal, sc, ops.full_like(sc, -1e9)), -1)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((batch, seq, dim), np.float32)),)}


def build_topk_gather(tokens: int = 64, dim: int = 16, experts: int = 4):
    """``{"net", "inputs"}``: a top-2 router, ``probs = softmax(Dense(x))`` ``(tokens,
    experts)``, ``top, idx = topk(probs, 2)``, gates ``tensor_scatter_elements(zeros_like(probs),
    idx, top, axis=1)``, returning ``mean(gather_elements(probs, 1, idx)) + mean(gates · probs)
    + mean(Dense(x))``: MindSpore's parallel compile cuts the GatherD's input by the batch and
    leaves the TopK index whole, with or without strategies (also under semi_auto_parallel's
    own data-parallel default: "For primitive[GatherD], the x shape must be greater than or
    equal to 64, but got 8")."""
    import mindspore as ms
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.router = nn.Dense(dim, experts, has_bias=False)
            self.fc = nn.Dense(dim, dim)

        def construct(self, x):
            probs = ops.softmax(self.router(x), -1)
            top, idx = ops.topk(probs, 2)
            gates = ops.tensor_scatter_elements(ops.zeros_like(probs), idx, top, axis=1)
            return (ops.gather_elements(probs, 1, idx).mean() + (gates * probs).mean()
                    + self.fc(x).mean())

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((tokens, dim), np.float32)),)}
