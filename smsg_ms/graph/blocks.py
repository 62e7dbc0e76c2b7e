"""Repeated blocks: identical layers of a network, found by a structural hash.

A *block* is the run of forward operators whose primitive path starts with
``<container>.<index>.`` — e.g. ``layers.3.`` or ``model.layers.3.`` — plus the functional calls
(no path) enclosed between two of its operators. Two blocks are *identical* when their operator sequences agree in type,
attributes, input/output shapes and dtypes, and primitive paths with the layer index removed. The
search plans one block of a group and reuses the plan for all (design.md, "repeated blocks by
squaring").
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .model import OpGraph, OpNode, sorted_json

_INDEXED = re.compile(r"^(?P<prefix>(?:[A-Za-z_][\w]*\.)*?[A-Za-z_]\w*)\.(?P<index>\d+)(?:\.|$)")


@dataclass(frozen=True)
class Block:
    """One repeated cell: ``prefix`` (``layers.3``), ``container`` (``layers``), ``index`` (3),
    ``op_ids`` (its operators, graph order) and ``signature`` (structural SHA-256)."""

    prefix: str
    container: str
    index: int
    op_ids: tuple[int, ...]
    signature: str


@dataclass(frozen=True)
class BlockGroup:
    """Blocks with equal signatures, in index order; ``blocks[0]`` is the representative."""

    container: str
    signature: str
    blocks: tuple[Block, ...]

    @property
    def prefixes(self) -> list[str]:
        return [b.prefix for b in self.blocks]


def block_prefix(path: str) -> tuple[str, int] | None:
    """``model.layers.3.attention.wq`` → ``("model.layers", 3)``; ``None`` without an index."""
    m = _INDEXED.match(path)
    return (m.group("prefix"), int(m.group("index"))) if m else None


def _signature(graph: OpGraph, ops: list[OpNode], prefix: str) -> str:
    h = hashlib.sha256()
    local = {}  # tensor name → position inside the block, so edges are compared too
    for pos, op in enumerate(ops):
        ins = []
        for name in op.inputs:
            t = graph.tensors[name]
            kind = t.kind if t.kind in ("parameter", "constant") else "data"
            ins.append([list(t.shape), t.dtype, kind, local.get(name)])
        outs = []
        for k, name in enumerate(op.outputs):
            t = graph.tensors[name]
            outs.append([list(t.shape), t.dtype])
            local[name] = (pos, k)
        rel = (op.prim_path or "")[len(prefix):] if op.prim_path else None
        h.update(sorted_json([op.type, op.attrs, rel, op.call_index, ins, outs]).encode())
    return h.hexdigest()


def find_blocks(graph: OpGraph, signed: bool = True) -> list[Block]:
    """All indexed cells (``<container>.<i>``) among forward operators, outermost index only.

    ``signed=False`` skips the structural hash (``signature`` is then ``""``): membership only.

    Returns:
        Blocks sorted by container then index; ``op_ids`` in graph order.
    """
    forward = [op for op in graph.ops if op.phase == "forward"]
    keys = [block_prefix(op.prim_path.rpartition(".")[0]) if op.prim_path else None
            for op in forward]
    # A functional call (no primitive path) joins a block only when the nearest operators with a
    # path on both sides are in that block: scopes of functional calls are unreliable (MindSpore
    # gives the calls of every reused cell the scope of its first instance).
    prev: list = []
    last = None
    for op, key in zip(forward, keys):
        last = key if op.prim_path else last
        prev.append(last)
    nxt: list = [None] * len(forward)
    last = None
    for i in range(len(forward) - 1, -1, -1):
        last = keys[i] if forward[i].prim_path else last
        nxt[i] = last
    members: dict[tuple[str, int], list[OpNode]] = {}
    for i, op in enumerate(forward):
        key = keys[i] if op.prim_path else (prev[i] if prev[i] == nxt[i] else None)
        if key:
            members.setdefault(key, []).append(op)
    blocks = []
    for (container, index), ops in sorted(members.items()):
        prefix = f"{container}.{index}"
        blocks.append(Block(prefix, container, index, tuple(o.id for o in ops),
                            _signature(graph, ops, prefix + ".") if signed else ""))
    return blocks


def group_blocks(graph: OpGraph, min_size: int = 2) -> list[BlockGroup]:
    """Groups of identical blocks (at least ``min_size`` each), by container then first index.

    A block that differs (another shape, another operator) is left out of its neighbours' group;
    it forms its own group only if ``min_size`` is 1.
    """
    by_key: dict[tuple[str, str], list[Block]] = {}
    for b in find_blocks(graph):
        by_key.setdefault((b.container, b.signature), []).append(b)
    groups = [BlockGroup(c, s, tuple(bs)) for (c, s), bs in by_key.items() if len(bs) >= min_size]
    return sorted(groups, key=lambda g: (g.container, g.blocks[0].index))


def spread_depend_inputs(graph: OpGraph) -> None:
    """Give the operators of every block of one container the union of the
    :attr:`~smsg_ms.graph.model.OpNode.depend_inputs` of their counterparts in the container's
    other blocks (same primitive path below the block, call index, type and input count; in
    place).

    MindSpore's auto-monad puts a ``Depend`` on the values a cell uses after a side-effecting
    call (mindformers' ``Morph`` of ``linear_qkv``) in every instance of the cell, and the
    parallel compile keeps them all; the one-device capture keeps only some (TeleChat3: those of
    ``layers.0``, whose other layers also lose a Reshape, so their structural signatures
    differ). Identical code, identical ``Depend``\\ s.
    """
    by_role: dict[tuple, list[OpNode]] = {}
    for b in find_blocks(graph, signed=False):
        for i in b.op_ids:
            op = graph.ops[i]
            if op.prim_path:
                rel = op.prim_path[len(b.prefix) + 1:]
                by_role.setdefault((b.container, rel, op.call_index, op.type, len(op.inputs)),
                                   []).append(op)
    for ops in by_role.values():
        union = sorted({i for op in ops for i in op.depend_inputs})
        if union:
            for op in ops:
                op.depend_inputs = list(union)
