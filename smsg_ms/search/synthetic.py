"""Synthetic search problems shaped like a decoder-only transformer (for tests and benchmarks).

One layer (``LAYER`` below, 25 variables): RMSNorm → Q/K/V projections (+ rotary on Q, K) →
scores → softmax → context → output projection → residual add → RMSNorm → gate/up projections →
SiLU → multiply → down projection → residual add, plus casts/reshapes. Costs and matrices are random
(seeded numpy ``Generator``); all layers share the same numbers, so they are identical blocks.
"""
from __future__ import annotations

import numpy as np

from .problem import Edge, SearchProblem, Variable

#: (name, inputs as offsets into the layer; -1 is the layer's input)
LAYER = [
    ("norm1", [-1]), ("cast1", [0]), ("q", [1]), ("k", [1]), ("v", [1]),
    ("rope_q", [2]), ("rope_k", [3]), ("reshape_q", [5]), ("reshape_k", [6]), ("reshape_v", [4]),
    ("scores", [7, 8]), ("scale", [10]), ("softmax", [11]), ("context", [12, 9]),
    ("reshape_o", [13]), ("o_proj", [14]), ("add1", [-1, 15]), ("norm2", [16]), ("gate", [17]),
    ("up", [17]), ("silu", [18]), ("mul", [20, 19]), ("down", [21]), ("cast2", [22]),
    ("add2", [16, 23]),
]


def _variable(rng, name, m, tie_rate):
    cost = rng.uniform(0.5, 2.0, m)
    if tie_rate and m > 1:
        cost = np.round(cost * 2) / 2  # coarse values: many exact ties
    mem = rng.integers(1, 8, m).astype(float) * 2.0 ** 20
    return Variable(name, [], [f"s{i}" for i in range(m)], cost, mem)


def _matrix(rng, m, n, inf_rate, tie_rate):
    mat = rng.uniform(0.0, 1.0, (m, n))
    if tie_rate:
        mat = np.round(mat * 2) / 2
    k = min(m, n)
    mat[np.arange(k), np.arange(k)] = 0.0  # same layout: no redistribution
    if inf_rate:
        mask = rng.random((m, n)) < inf_rate
        mask[np.arange(k), np.arange(k)] = False
        mat[mask] = np.inf
    return mat


def transformer_problem(layers: int, options, seed: int = 0, *, head: bool = True,
                        inf_rate: float = 0.0, tie_rate: float = 0.0):
    """A problem of ``layers`` identical layers between an embedding and an LM head.

    Args:
        layers: number of layers (blocks).
        options: option count of each layer variable (int, or a list cycled over ``LAYER``).
        seed: random seed (numbers of one layer; every layer reuses them).
        head: add embedding (first) and final norm + head + loss (last) variables.
    Returns:
        ``(problem, repeated)``: repeated = ``[[block_0, block_1, ...]]`` (variable indices).
    """
    rng = np.random.default_rng(seed)
    opts = [options] * len(LAYER) if isinstance(options, int) else list(options)
    sizes = [opts[i % len(opts)] for i in range(len(LAYER))]
    layer_vars = [_variable(rng, n, m, tie_rate) for (n, _), m in zip(LAYER, sizes)]
    in_size = sizes[-1]
    layer_edges = []
    for i, (_, ins) in enumerate(LAYER):
        for j in ins:
            src = in_size if j == -1 else sizes[j]
            layer_edges.append((j, i, _matrix(rng, src, sizes[i], inf_rate, tie_rate)))
    variables, edges, blocks = [], [], []
    prev = None
    if head:
        variables.append(_variable(rng, "embedding", in_size, tie_rate))
        prev = 0
    for layer in range(layers):
        base = len(variables)
        for v in layer_vars:
            variables.append(Variable(f"layers.{layer}.{v.name}", [], list(v.keys), v.cost.copy(),
                                      v.memory.copy()))
        for j, i, mat in layer_edges:
            if j == -1 and prev is None:
                continue
            edges.append(Edge(prev if j == -1 else base + j, base + i, mat.copy()))
        blocks.append(list(range(base, base + len(LAYER))))
        prev = base + len(LAYER) - 1
    if head:
        for name, m in (("final_norm", in_size), ("lm_head", max(1, in_size // 2)), ("loss", 1)):
            variables.append(_variable(rng, name, m, tie_rate))
            v = len(variables) - 1
            edges.append(Edge(prev, v, _matrix(rng, len(variables[prev].keys), m, 0.0, tie_rate)))
            prev = v
    return SearchProblem(variables, edges), [blocks]
