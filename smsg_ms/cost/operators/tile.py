"""Tile: ``y = Tile(x, multiples)``, each dimension ``i`` of ``x`` repeated ``multiples[i]``
times (``x (s_0, ...)`` → ``y (s_0·m_0, ...)``, elements).

MindSpore's rule (``frontend/parallel/ops_info/tile_info.cc``, ``TileInfo``): the strategy has
one cut per dimension; where ``multiples[i] > 1`` the cut splits the *copies* (it must divide
``m_i``: ``CheckStrategy`` checks the strategy against ``multiples[i]`` there and against the
input's size elsewhere) and ``x``'s dimension ``i`` stays whole (``InferTensorMap``:
``MAP_NONE``), each device tiling ``m_i / cut`` copies (``slice_multiples_``,
``UpdateMultiples``); where ``multiples[i] = 1`` the cut splits ``x``'s dimension as a batch
letter. The device matrix is the strategy, the output is cut by it on every dimension; no
forward collective (``TileInfo`` declares none), so a cut input dimension under a multiple is
gathered by the redistribution before it.

Declared with one letter per dimension, sized ``m_i`` under a multiple (the strategy's value and
divisibility) with the output's size ``s_i·m_i`` (:attr:`Einsum.output_sizes`), and listed in
:attr:`Einsum.whole_in_inputs` (the input keeps that dimension whole). No FLOPs (a copy).
"""
from __future__ import annotations

from .base import Einsum
from .letters import Letters

TYPES = ("Tile",)


def multiples_of(attrs) -> tuple[int, ...] | None:
    """The constant ``multiples`` of a captured Tile, or ``None`` when not a tuple of ints."""
    value = attrs.get("multiples", attrs.get("input1"))
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, int) for m in value):
        return None
    return tuple(value)


def describe(op, in_shapes, out_shapes) -> Einsum | None:
    """``None`` when the multiples are not constant or longer than ``x``'s rank (MindSpore
    first expands ``x``; that case keeps the batch-parallel default)."""
    x, y = tuple(in_shapes[0]), tuple(out_shapes[0])
    multiples = multiples_of(op.attrs)
    if multiples is None or len(multiples) != len(x) or len(y) != len(x):
        return None
    lt = Letters()
    letters, whole, out_sizes, in_sizes = "", "", {}, {}
    for size, m, out in zip(x, multiples, y):
        ch = lt.new(m if m != 1 else size)
        letters += ch
        if m != 1:
            whole += ch
            out_sizes[ch] = out
            in_sizes[ch] = size
    return Einsum("tile", [letters] + [None] * (len(in_shapes) - 1), [letters], lt.sizes,
                  order=letters, output_sizes=out_sizes, whole_in_inputs=whole,
                  input_sizes={0: in_sizes} if in_sizes else {})
