"""Two dense layers whose outputs are added: weights with equal gradient expressions, whose
gradient AllReduces MindSpore's CSE merges (:mod:`smsg_ms.planner.twin_gradients`).

``x``: ``(rows, width)``; ``c = (x @ w1 + b1) + (y @ w2 + b2)`` with ``y = x`` (``same_input``)
or ``y = relu(x)``; ``combine="sub"`` subtracts the second layer instead (``db2 = -dout``);
``biases="added"``: ``c = ((x @ w1 + y @ w2) + b1) + b2``, the biases broadcast by ``Add``s cut
``((2, 4), (4,))`` (``db1 = db2``, ``dout`` summed over the rows).
``w*``: ``(width, out)``, ``b*``: ``(out,)``. MatMuls cut ``((2, 1), (1, 4))`` on 8 devices,
BiasAdds ``((2, 4), (4,))``: every weight and bias replicated 2 ways. Returns ``c`` squared.
With ``same_input`` ``dw1 = dw2 = x^T dc`` and ``db1 = db2``; with ``relu(x)`` only the biases'
gradients are equal; with ``sub`` none.
"""
from __future__ import annotations

import numpy as np


def build(rows: int = 64, width: int = 32, out: int = 16, same_input: bool = False,
          combine: str = "add", biases: str = "biasadd"):
    """``{"net", "inputs"}`` (float32); paths ``relu``, ``mm1``, ``mm2``, ``ba1``, ``ba2``
    (``BiasAdd``; ``Add`` with ``biases="added"``), ``add`` (a ``Sub`` with
    ``combine="sub"``), ``square``; 8 devices.

    Raises:
        ValueError: ``combine`` other than ``"add"`` or ``"sub"``, ``biases`` other than
            ``"biasadd"`` or ``"added"``.
    """
    import mindspore as ms
    from mindspore import Parameter, nn
    from mindspore.ops import operations as P  # noqa: N812

    if combine not in ("add", "sub"):
        raise ValueError(f"combine must be 'add' or 'sub', got {combine!r}")
    if biases not in ("biasadd", "added"):
        raise ValueError(f"biases must be 'biasadd' or 'added', got {biases!r}")

    def param(name, shape, value):
        return Parameter(ms.Tensor(np.full(shape, value, np.float32)), name=name)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = param("w1", (width, out), 0.01), param("w2", (width, out), 0.02)
            self.b1, self.b2 = param("b1", (out,), 0.1), param("b2", (out,), 0.2)
            self.relu = P.ReLU().shard(((2, 1),))
            self.mm1 = P.MatMul().shard(((2, 1), (1, 4)))
            self.mm2 = P.MatMul().shard(((2, 1), (1, 4)))
            bias_op = P.BiasAdd if biases == "biasadd" else P.Add
            self.ba1 = bias_op().shard(((2, 4), (4,)))
            self.ba2 = bias_op().shard(((2, 4), (4,)))
            self.add = (P.Add() if combine == "add" else P.Sub()).shard(((2, 4), (2, 4)))
            self.square = P.Mul().shard(((2, 4), (2, 4)))

        def construct(self, x):
            y = x if same_input else self.relu(x)
            if biases == "added":
                c = self.ba2(self.ba1(self.add(self.mm1(x, self.w1), self.mm2(y, self.w2)),
                                      self.b1), self.b2)
            else:
                c = self.add(self.ba1(self.mm1(x, self.w1), self.b1),
                             self.ba2(self.mm2(y, self.w2), self.b2))
            return self.square(c, c)

    return {"net": Net(), "inputs": (ms.Tensor(np.ones((rows, width), np.float32)),)}
