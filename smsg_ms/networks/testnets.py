"""Small test networks for checking the cost model against MindSpore's compiler.

``build(cases=[...])`` makes one Cell per case (``cases.{i}``) holding a short chain of steps
(``cases.{i}.steps.{j}``, operator attribute ``op``). Each operator input is
``["param", shape]`` (a weight ``w{k}``), ``["state", shape]`` (a weight without gradient, as
BatchNorm's moving mean), ``["act", shape]`` (``pre{k}`` = Add(data, weight), an
activation with a gradient), ``["index", shape, high]`` (an int32 data input) or ``["prev"]``
(the previous step's output). Init keywords in ``init``, primitive attributes in
``prim_attrs`` (``add_prim_attr``, e.g. FlashAttentionScore's ``enable_ring_attention``), trailing constant call arguments in
``args``; ``"pack": true`` passes the inputs as one tuple (Concat). Every case's output is summed to a scalar outside the case cells, so collectives under
scope ``cases-CellList/{i}-Case`` belong to case ``i``. Shapes are global (full_batch).
"""
from __future__ import annotations

import numpy as np


def build(cases: list):
    import mindspore as ms
    from mindspore import Parameter, nn, ops
    from mindspore.common.initializer import initializer

    inputs: list = []

    class Step(nn.Cell):
        def __init__(self, step, tag):
            super().__init__()
            self.op = (getattr(ops, step["type"], None) or getattr(ops.auto_generate, step["type"]))(
                **step.get("init", {}))
            for name, value in step.get("prim_attrs", {}).items():
                self.op.add_prim_attr(name, value)
            self.extra = tuple(tuple(a) if isinstance(a, list) else a
                               for a in step.get("args", []))
            kinds, slots = [], []
            for k, inp in enumerate(step["inputs"]):
                kinds.append(inp[0])
                if inp[0] in ("param", "state"):
                    setattr(self, f"w{k}", Parameter(initializer("normal", inp[1], ms.float32),
                                                     name=f"w{tag}_{k}",
                                                     requires_grad=inp[0] == "param"))
                elif inp[0] == "act":
                    setattr(self, f"w{k}", Parameter(initializer("zeros", inp[1], ms.float32),
                                                     name=f"b{tag}_{k}"))
                    setattr(self, f"pre{k}", ops.Add())
                    inputs.append(ms.Tensor(np.ones(inp[1], np.float32)))
                elif inp[0] == "index":
                    inputs.append(ms.Tensor(np.arange(int(np.prod(inp[1]))).reshape(inp[1])
                                            % inp[2], ms.int32))
                if inp[0] in ("act", "index"):
                    slots.append(len(inputs) - 1)
                else:
                    slots.append(-1)
            self.kinds, self.slots, self.n = tuple(kinds), tuple(slots), len(kinds)
            self.base = 0
            self.pack = bool(step.get("pack", False))  # inputs passed as one tuple (Concat)

        def value(self, k, prev, data):
            kind = self.kinds[k]
            if kind in ("param", "state"):
                return getattr(self, f"w{k}")
            if kind == "act":
                return getattr(self, f"pre{k}")(data[self.slots[k] - self.base],
                                                getattr(self, f"w{k}"))
            if kind == "index":
                return data[self.slots[k] - self.base]
            return prev

        def call(self, args):
            if len(args) == 1:
                return self.op(args[0])
            if len(args) == 2:
                return self.op(args[0], args[1])
            if len(args) == 3:
                return self.op(args[0], args[1], args[2])
            if len(args) == 4:
                return self.op(args[0], args[1], args[2], args[3])
            return self.op(args[0], args[1], args[2], args[3], args[4])

        def construct(self, prev, data):
            args = ()
            for k in range(self.n):
                args = args + (self.value(k, prev, data),)
            if self.pack:
                out = self.op(args)
            else:
                out = self.call(args + self.extra)
            if isinstance(out, tuple):
                return out[0]
            return out

    class Case(nn.Cell):
        def __init__(self, spec, i):
            super().__init__()
            self.base = len(inputs)
            self.steps = nn.CellList([Step(s, f"{i}_{j}") for j, s in enumerate(spec["ops"])])
            for s in self.steps:
                s.base = self.base
            self.end = len(inputs)

        def construct(self, data):
            prev = None
            for step in self.steps:
                prev = step(prev, data)
            return prev

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cases = nn.CellList([Case(c, i) for i, c in enumerate(cases)])
            self.total = ops.ReduceSum()
            self.square = ops.Square()  # a data-dependent loss: its gradient is not a constant

        def construct(self, *data):
            loss = 0
            for case in self.cases:
                loss = loss + self.total(self.square(case(data[case.base:case.end])))
            return loss

    net = Net()
    return {"net": net, "inputs": tuple(inputs)}
