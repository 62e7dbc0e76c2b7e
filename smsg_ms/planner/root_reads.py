"""Parameters read outside the staged cells of a pipeline, and the gradients a stage drops.

A decoder whose head is a functional call on the network's root, ``ops.matmul(x,
self.emb.embedding_table.T)``, reads the embedding table on the last stage, but MindSpore 2.10
gives a parameter the stages of its readers in staged cells only
(``PipelineTransformer::ParameterColoring``, ``pipeline_transformer.cc``: the stages of the
parameter's ``Load`` users that carry one, a call of a staged cell, or lie in a staged
sub-graph, other than the root and main graphs): the embedding's stage. The last stage reads
its own copy, sends and receives nothing for it (``HandleSharedParameter`` acts on parameters
of two stages or more), and keeps no gradient of it: the backward collectives of the tensors
computed from the table alone there (the ReduceScatter transposing the forward AllGather of
``tableᵀ``) are not inserted. Observed in the dry-run (:mod:`smsg_ms.networks.tied_root`,
``tests/test_pipeline_tied_root.py``; a held-out GQA decoder, docs/networks.md).

Which cell a functional call runs in is not in the capture (its scope is that of the first
cell that used the same functional primitive: the GQA decoder's root ``Transpose`` is scoped
``layers-CellList/0-Block/att-Attn``), so the rule goes by what the write-back stages: the
repeated blocks, and the cells outside them named by a primitive path
(:func:`smsg_ms.planner.param_only.shared_parameter_cells`, ``first_stage_cells``): a reader
before the first block's first or after the last block's last operator of a primitive path,
without a cell's primitive path itself (a functional call, a primitive of the root), is in
none of them (:func:`loose_reads`).
"""
from __future__ import annotations

from ..graph.mindir import cell_path_of_scope
from ..graph.model import OpGraph
from .param_only import holds_block, in_block


def loose_reads(graph: OpGraph, names: list[str]) -> set[tuple[int, str]]:
    """``(op id, parameter)`` for the reads of a trained parameter of no repeated block (its
    name's prefix: ``emb.embedding_table``) by an operator no staged cell holds: before the
    first or after the last operator whose primitive path lies in a repeated block of
    ``names`` (the chain, :func:`smsg_ms.planner.stages.chain_blocks`: ``layers.0``, ...),
    with no primitive path of a cell (none, or a root primitive's ``lm_head``). A block's own
    weights are read in its cell: never loose."""
    at = [k for k, op in enumerate(graph.ops) if op.prim_path and in_block(op.prim_path, names)]
    if not at:
        return set()
    lo, hi = at[0], at[-1]
    out = set()
    for k, op in enumerate(graph.ops):
        if lo <= k <= hi or (op.prim_path and "." in op.prim_path):
            continue
        for name in op.inputs:
            t = graph.tensors[name]
            if (t.kind == "parameter" and t.requires_grad and not in_block(name, names)
                    and not in_side_cell(op.scope or "", names)):
                out.add((op.id, name))
    return out


def in_side_cell(scope: str, names: list[str]) -> bool:
    """Whether an operator of ``scope`` runs in a cell outside the repeated blocks ``names``
    that holds none of them: its scope's cell chain is not empty (the root), does not lie in a
    block and is not a container of one. mindformers DeepSeek-V3's ``Embedding`` primitive,
    called functionally in ``VocabParallelEmbedding`` and so without a primitive path, has the
    scope ``.../embedding-LanguageModelEmbedding/word_embeddings-VocabParallelEmbedding/
    Embedding-op0``; that cell is staged (by the network, as mindformers stages its embedding,
    or by the write-back) and MindSpore gives the parameter its stage (dry-run: the table is
    sent to the stage of the MTP block that reads it again). A root call's scope is the root's
    or, when a block made the same functional call first, that block's (the GQA decoder's
    ``Transpose`` of the table): both loose."""
    cells = cell_path_of_scope(scope) if scope else ""
    if not cells or in_block(cells, names):
        return False
    return not holds_block(cells, names)



def parameter_stages(graph: OpGraph, stage_of_op: dict[int, int],
                     names: list[str]) -> dict[str, set[int]]:
    """``{trained parameter: stages of its readers in staged cells}`` (direct readers, a Cast
    included, less the :func:`loose_reads`; ``stage_of_op``: op id → pipeline stage; ``names``:
    the chain's blocks), every trained parameter a key."""
    out: dict[str, set[int]] = {}
    loose = loose_reads(graph, names)
    for name, t in graph.tensors.items():
        if t.kind == "parameter" and t.requires_grad:
            out[name] = {stage_of_op[i] for i in t.consumers if (i, name) not in loose}
    return out


def weights_behind(graph: OpGraph, name: str) -> set[str] | None:
    """The trained parameters tensor ``name`` is computed from, or ``None`` when a data input
    (or an activation of unknown origin) reaches it; constants and frozen parameters ignored."""
    out: set[str] = set()
    todo, seen = [name], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        t = graph.tensors[n]
        if t.kind == "parameter":
            if t.requires_grad:
                out.add(n)
            continue
        if t.kind == "constant":
            continue
        if t.producer is None:
            return None
        todo.extend(graph.ops[t.producer].inputs)
    return out


def dropped_gradients(graph: OpGraph, stage_of_op: dict[int, int], stages: int,
                      tensors: set[str], names: list[str]) -> dict[str, list[int]]:
    """The record's ``gradient_dropped``: ``{tensor: [stages]}`` for the ``tensors`` (those
    with a backward collective) computed from trained parameters alone, each of which has a
    reader inside a cell, listing the stages none of those readers runs on (where the
    tensor's gradient is dead), sorted; ``names``: the chain's blocks; ``{}`` where none
    is."""
    owned = parameter_stages(graph, stage_of_op, names)
    out: dict[str, list[int]] = {}
    for name in sorted(tensors):
        if name not in graph.tensors:
            continue
        behind = weights_behind(graph, name)
        if not behind or any(not owned[p] for p in behind):
            continue
        keep = set().union(*(owned[p] for p in behind))
        dead = [s for s in range(stages) if s not in keep]
        if dead:
            out[name] = dead
    return out


__all__ = ["dropped_gradients", "in_side_cell", "loose_reads", "parameter_stages", "weights_behind"]
