"""Cost evaluations per second: the cost model's numeric path vs sympy substitution.

Run: ``python scripts/bench_cost.py``. Reports, for one MatMul and for every operator of one
LLaMA-style decoder layer (built by hand, no MindSpore), how many (operator, strategy) costs per
second ``CostModel.check`` computes (plain arithmetic, no sympy) and how many the same amounts
evaluated by ``sympy.subs`` on :meth:`CostModel.symbolic` reach, and the ratio.
"""
from __future__ import annotations

import time

import sympy

from smsg_ms.cost.model import CostModel
from smsg_ms.graph.model import OpGraph, OpNode, TensorInfo


def layer_graph(tokens=4096, hidden=1024, ffn=2816):
    t, ops = {}, []

    def tensor(name, shape, kind="activation"):
        t[name] = TensorInfo(name, shape, "float16", kind)
        return name

    x = tensor("x", (tokens, hidden), "input")
    g = tensor("g", (hidden,), "parameter")
    specs = [("RmsNorm", [x, g], [("n", (tokens, hidden)), ("r", (tokens, 1))], {})]
    for w in ("wq", "wk", "wv", "wo"):
        tensor(w, (hidden, hidden), "parameter")
    for w, shape in (("w1", (hidden, ffn)), ("w3", (hidden, ffn)), ("w2", (ffn, hidden))):
        tensor(w, shape, "parameter")
    specs += [("MatMul", ["n", "wq"], [("q", (tokens, hidden))], {}),
              ("MatMul", ["n", "wk"], [("k", (tokens, hidden))], {}),
              ("Softmax", ["q"], [("p", (tokens, hidden))], {"axis": [-1]}),
              ("MatMul", ["p", "wo"], [("o", (tokens, hidden))], {}),
              ("Add", ["x", "o"], [("h", (tokens, hidden))], {}),
              ("MatMul", ["h", "w1"], [("a", (tokens, ffn))], {}),
              ("SiLU", ["a"], [("s", (tokens, ffn))], {}),
              ("MatMul", ["h", "w3"], [("b", (tokens, ffn))], {}),
              ("Mul", ["s", "b"], [("m", (tokens, ffn))], {}),
              ("MatMul", ["m", "w2"], [("y", (tokens, hidden))], {})]
    for i, (typ, ins, outs, attrs) in enumerate(specs):
        for name, shape in outs:
            tensor(name, shape)
        ops.append(OpNode(i, typ, list(ins), [n for n, _ in outs], attrs, f"op{i}"))
    return OpGraph(ops, t, [x], ["y"], "layer")


def numeric_rate(model, pairs, seconds=1.0):
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for op, strat in pairs:
            c = model.check(op, strat)
            model.seconds(c)
        n += len(pairs)
    return n / (time.perf_counter() - t0)


def sympy_rate(model, pairs, seconds=1.0):
    prepared = []
    for op, strat in pairs:
        spec = model.spec(op)
        expr = model.symbolic(op, strat)
        values = {sympy.Symbol("D", positive=True, integer=True): model.devices}
        cuts = dict(zip([ch for x in spec.inputs if x for ch in x],
                        [c for part in strat for c in part]))
        for ch, size in spec.sizes.items():
            values[sympy.Symbol(ch, positive=True, integer=True)] = size
            values[sympy.Symbol(f"c_{ch}", positive=True, integer=True)] = cuts.get(ch, 1)
        prepared.append((list(expr.values()), values))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for exprs, values in prepared:
            [e.subs(values) if hasattr(e, "subs") else e for e in exprs]
        n += len(prepared)
    return n / (time.perf_counter() - t0)


def main():
    g = layer_graph()
    model = CostModel(g, 8)
    matmul = [(g.ops[1], o.strategy) for o in model.options(g.ops[1])]
    layer = [(op, o.strategy) for op in g.ops for o in model.options(op)]
    for name, pairs in (("MatMul", matmul), ("transformer layer", layer)):
        fast, slow = numeric_rate(model, pairs), sympy_rate(model, pairs)
        print(f"{name:18s} {len(pairs):4d} strategies  numeric {fast:10.0f}/s  "
              f"sympy subs {slow:8.0f}/s  ratio {fast / slow:6.1f}x")


if __name__ == "__main__":
    main()
