"""Stage borders inside a block whose output is a Reshape's: the block's trailing cells run with
the next block.

MindSpore refuses a pipeline stage border on a Reshape's output ("Reshape op can't be a
border", ``PipelineTransformer::CreateOpInfo``, ``frontend/parallel/pipeline_transformer/
pipeline_transformer.cc``). A block that ends with a cell whose output is one (mindcv Swin:
``layers.i`` = its transformer blocks, then ``downsample``, a ``PatchMerging`` whose
``reduction`` is an ``nn.Dense`` on a 3-D input: Reshape → MatMul → Reshape) could not end a
stage. Its *tail* (the shortest run of its trailing cells after which the tensor it sends on
is no Reshape's output: Swin's ``downsample``) runs with the next block instead: the border
falls before the tail (Swin: on the last transformer block's residual ``Add``).

MindSpore gives a stage per cell (``Cell.pipeline_stage``; ``PipelineTransformer::Coloring``
colors the calls of a staged cell's graph): a cell nested in a staged cell with another stage
is refused ("node_stage: 1 must be smaller than user_node_stage: 0"), so a block with a tail
is not staged itself; each of its cells (*units*: its child cells, a ``CellList``'s elements,
which have no graph of their own) takes the stage of the block it runs with, and the block's
graph, which then only calls staged cells, is colored by them. Checked in the dry-run
(``tests/test_border_tails.py``). A block with operators of its own (outside its units) is
never split: those would be unstaged.

Units come from each operator's primitive path (``layers.0.downsample.reduction.matmul``) or,
for a functional call, which has none, from its scope (``Default/layers-CellList/
0-BasicLayer/downsample-PatchMerging/Reshape-op3``). A split is kept only when, with the tail
moved to the next block, no tensor the block sends on is a Reshape's output and no operator
left in the block reads the tail; otherwise the block keeps its border refused, as before.
"""
from __future__ import annotations

from ..graph.model import OpGraph


def _unit(rest: list[str], primitive: bool) -> tuple[str, ...] | None:
    """The unit of a path inside a block (components after the block's name): the child cell,
    or the element of a child ``CellList`` (a digit after it); ``None`` for the block's own
    operator (a primitive attribute of the block, or a scope ending at the block)."""
    cells = rest[:-1] if primitive else rest        # a primitive path ends with the attribute
    if not cells:
        return None
    if len(cells) >= 2 and cells[1].isdigit():
        return tuple(cells[:2])
    return tuple(cells[:1])


def _scope_cells(scope: str) -> list[str]:
    """Cell attribute names along a scope: ``Default/layers-CellList/0-BasicLayer/Add-op1`` →
    ``["layers", "0"]`` (the first part, the network, and the last, the operator, dropped)."""
    return [p.partition("-")[0] for p in scope.split("/")[1:-1]]


def unit_of(op, block_name: str) -> tuple[str, ...] | None:
    """The unit of ``block_name`` (``layers.0``) that ``op`` runs in (``("downsample",)``,
    ``("blocks", "1")``), ``None`` when it is not found inside one of the block's cells."""
    want = block_name.split(".")
    if op.prim_path:
        comps = op.prim_path.split(".")
        if comps[:len(want)] == want:
            return _unit(comps[len(want):], True)
        return None
    comps = _scope_cells(op.scope or "")
    for k in range(len(comps) - len(want) + 1):
        if comps[k:k + len(want)] == want:
            return _unit(comps[k + len(want):], False)
    return None


def _crossing_reshape(graph: OpGraph, block: dict[int, int], sent: set, i: int) -> bool:
    """Whether a tensor from block ``i`` or earlier reaches a block after ``i`` as a Reshape's
    output (``stages.reshape_borders`` for one border)."""
    for op in graph.ops:
        if op.type != "Reshape" or block[op.id] > i:
            continue
        for name in op.outputs:
            if name in sent and any(block[c] > i for c in graph.tensors[name].consumers):
                return True
    return False


def split_block(graph: OpGraph, names: list[str], block: dict[int, int], sent: set,
                i: int, current: dict[int, int] | None = None):
    """``({unit: block index it runs with}, ids of the operators moved)`` for block ``i``
    whose border is a Reshape's output, its tail moved to block ``i + 1``; ``None`` when no
    tail makes the border valid. ``block``: the chain index of every operator by name;
    ``current``: the same with the earlier blocks' tails moved (default ``block``).

    Units are read from the primitive paths. The tail is a suffix of the block's operators
    (graph order: topological, a cell's operators together): from the first position after
    the last operator of a kept unit such that no tensor crossing into the suffix is a
    Reshape's output and the kept part reads nothing of it; the functional calls between
    the kept units and the tail go to the tail when they reshuffle one activation just before
    it (Swin: ``PatchMerging``'s reshape, transpose, reshape), to the kept part otherwise (the
    last block's residual ``Add``), as MindSpore runs them; other starts are tried after.
    A scope naming the block's own construct (a functional call there), or a primitive of the
    block itself, means the block is not split."""
    if i + 1 >= len(names):
        return None
    current = block if current is None else current
    ops = [op for op in graph.ops if block[op.id] == i]
    units: list = []
    for op in ops:
        u = unit_of(op, names[i])
        inside = u is not None or (op.prim_path or "").startswith(names[i] + ".")
        if not op.prim_path and u is None and _scope_inside(op.scope or "", names[i]):
            return None                             # a functional call of the block itself
        if op.prim_path and inside and u is None:
            return None                             # a primitive of the block itself
        units.append(u if op.prim_path else None)
        if op.prim_path and not inside:
            units[-1] = "foreign"
    order = list(dict.fromkeys(u for u in units if u not in (None, "foreign")))
    for cut in range(len(order) - 1, 0, -1):       # shortest tail first
        tail = set(order[cut:])
        last_kept = max(k for k, u in enumerate(units) if u is not None and u not in tail)
        first_tail = min(k for k, u in enumerate(units) if u in tail)
        if last_kept > first_tail or any(u is not None and u not in tail
                                         for u in units[first_tail:]):
            continue
        lead = first_tail       # the tail's own functional reshuffling of its input
        while lead - 1 > last_kept and _reshuffle(graph, ops[lead - 1]):
            lead -= 1
        for start in [lead] + [k for k in range(last_kept + 1, first_tail + 1) if k != lead]:
            moved_ids = {op.id for op in ops[start:]}
            kept = {op.id for op in ops[:start]}
            if any(c in kept for m in moved_ids for name in graph.ops[m].outputs
                   for c in graph.tensors[name].consumers):
                continue                            # the block reads its own tail
            trial = dict(current)
            trial.update((m, i + 1) for m in moved_ids)
            if not _crossing_reshape(graph, trial, sent, i):
                return {u: (i + 1 if u in tail else i) for u in order}, moved_ids
    return None


def _reshuffle(graph: OpGraph, op) -> bool:
    """A functional call of one activation (``ops.reshape``, ``ops.transpose`` ...), as a cell
    starts with on its input (Swin's ``PatchMerging``: reshape, transpose, reshape)."""
    acts = [n for n in op.inputs if graph.tensors[n].kind == "activation"]
    return not op.prim_path and len(acts) == 1


def _scope_inside(scope: str, block_name: str) -> bool:
    """Whether ``scope`` ends in the construct of ``block_name`` itself (not one of its cells)."""
    comps, want = _scope_cells(scope), block_name.split(".")
    return len(comps) >= len(want) and comps[-len(want):] == want


def tails(graph: OpGraph, names: list[str], block: dict[int, int], sent: set,
          refused) -> dict[int, tuple[dict, set]]:
    """``{block index: ({unit: block index it runs with}, moved operator ids)}`` of every
    block after which a stage may end only with its tail moved (:func:`split_block`), in block
    order. ``sent``: the tensors computed from trained weights (``stages.weight_dependent``);
    ``refused``: the blocks after which no stage may end, by name (``stages.reshape_borders``)."""
    out, current = {}, block
    for i in sorted(refused):
        split = split_block(graph, names, block, sent, i, current)
        if split is not None:
            out[i] = split
            current = moved(block, out)
    return out


def moved(block: dict[int, int], found: dict) -> dict:
    """``block`` with every tail's operators in the block they run with."""
    out = dict(block)
    for i, (_, ids) in found.items():
        out.update((m, i + 1) for m in ids)
    return out


def split_record(names: list[str], found: dict) -> dict[str, dict[str, str]]:
    """The plan record's ``split_blocks``: ``{block: {unit cell path: block it runs with}}``
    (:func:`smsg_ms.integration.pipeline.mark_cells` stages and recomputes the units instead
    of the block)."""
    return {names[i]: {".".join((names[i],) + u): names[j] for u, j in split.items()}
            for i, (split, _) in sorted(found.items())}


__all__ = ["moved", "split_block", "split_record", "tails", "unit_of"]
