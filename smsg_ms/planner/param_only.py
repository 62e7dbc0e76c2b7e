"""Tensors a pipelined step computes once, not once per micro-batch: those made from
parameters (and, inside the repeated blocks, constants) alone (no data input, no tensor
received from another stage).

MindSpore's pipeline runs the network once per micro-batch (``nn.PipelineCell``); a
computation that reads no micro-batch is the same in every copy and is merged into one, so a
forward redistribution of such a tensor is inserted once per step. Observed in the CPU dry-run
(MindSpore 2.10, ``tests/test_border_tails.py``: :mod:`smsg_ms.networks.window_bias` chained,
the relative-position bias ``matmul(index, table)`` gathered at ``attn + bias``: one forward
AllGather per block and step on both stages, its backward ReduceScatter once per
micro-batch; mindcv Swin's stage 1 likewise).

The merge holds on the first stage only when every operator there that reads a trained weight
runs in a cell with a ``pipeline_stage`` of its own: a trained weight read before the first
block by a cell outside the blocks (mindcv Swin's ``patch_embed``; a ``Dense`` before
:mod:`smsg_ms.networks.window_bias`'s chain) and left unstaged makes MindSpore 2.10 compute the
parameter-only tensors of the first stage once per micro-batch (their forward gathers too);
an unstaged constant op or a frozen weight there does not, nor unstaged weights after the last
block (Swin's ``norm``, ``classifier``). Observed in the dry-run,
``tests/test_border_tails.py``. So the write-back stages those cells on the first stage
(:func:`first_stage_cells`, as mindformers stages its embedding), and the merge holds on every
stage.
"""
from __future__ import annotations

from ..graph.model import OpGraph


def in_block(path: str, blocks: list[str]) -> bool:
    """A primitive path inside one of the repeated blocks (``layers.3.attn.wq`` in ``layers.3``)."""
    return any(path == b or path.startswith(b + ".") for b in blocks)


def holds_block(cell: str, blocks: list[str]) -> bool:
    """A cell that is a repeated block or holds one (the network's ``layers``)."""
    return any(b == cell or b.startswith(cell + ".") for b in blocks)


def parameter_only(graph: OpGraph, blocks: list[str] | None = None) -> list[str]:
    """Names of the activations computed without any data input, sorted: those made from a
    trained parameter (with frozen ones and constants: a weight's transpose, a relative-position
    bias), and, with the repeated ``blocks`` (``layers.0``, ...) given, those made from constants
    alone by an operator of no cell (a functional call: a causal mask
    ``triu(ones((s, s)))`` built in a block's ``construct``, which MindSpore's CSE leaves one
    node for every block) or of a block's cell. Every
    micro-batch's copy of such an operator reads the same inputs, so MindSpore merges them
    (observed in the dry-run: the block-built causal mask's forward AllGather once per stage
    and step with 2 micro-batches, ``tests/test_heldout_patterns.py``). A constants-only tensor
    made outside the blocks is not merged: mindformers' rotary table (``Outer`` of two
    constants, then ``Concat``, in the model before its layers) is gathered once per
    micro-batch in the dry-run (``tests/test_mindformers_families.py``, Qwen3-MoE ``plan 8
    p2``). The line between the two is drawn from these two observations, not from
    MindSpore's source."""
    weights = {n for n, t in graph.tensors.items() if t.kind == "parameter" and t.requires_grad}
    data = set(graph.inputs)
    from_data: set[str] = set(data)
    from_weight: set[str] = set(weights)
    made: set[str] = set()
    for op in graph.ops:                    # topological order
        if any(n in from_data for n in op.inputs):
            from_data.update(op.outputs)
        elif any(n in from_weight for n in op.inputs):
            from_weight.update(op.outputs)
        elif blocks is not None and (op.prim_path is None or in_block(op.prim_path, blocks)):
            made.update(op.outputs)
    return sorted(n for n in (from_weight - weights) | made if n not in from_data)


def first_stage_cells(graph: OpGraph, blocks: list[str]) -> list[str]:
    """Cells outside the repeated blocks whose operators read a trained weight before the first
    block's first operator, by primitive path (``patch_embed.proj.conv2d`` → ``patch_embed.proj``),
    sorted; the network's root (an operator called on the network itself) is never one, nor a
    cell that holds a block, nor one whose weight is read again later (a tied embedding, also
    the head on the last stage). ``blocks``: the chain's block names (``layers.0``, ...).

    Raises nothing; an empty list where no such cell exists."""
    weights = {n for n, t in graph.tensors.items() if t.kind == "parameter" and t.requires_grad}
    out: dict[str, set[str]] = {}
    later: set[str] = set()                 # weights read from the first block on
    started = False
    for op in graph.ops:                    # topological order
        path = op.prim_path or ""
        started = started or in_block(path, blocks)
        read = {n for n in op.inputs if n in weights}
        if started:
            later |= read
            continue
        if "." not in path or not read:
            continue
        cell = path.rsplit(".", 1)[0]
        if not holds_block(cell, blocks):
            out.setdefault(cell, set()).update(read)
    return sorted(c for c, read in out.items() if not read & later)


def shared_parameter_cells(graph: OpGraph, blocks: list[str], shared: set[str],
                           stages: int) -> dict[str, int]:
    """``{cell: stage}`` for the cells outside the repeated blocks that read a parameter of
    ``shared`` (read on several pipeline stages: a tied embedding table), by primitive path as
    :func:`first_stage_cells`: a cell reading it before the first block's first operator on
    stage 0, after the last block's last operator on stage ``stages - 1`` (the embedding and
    the tied head, staged as mindformers stages them). Left unstaged, MindSpore 2.10 rejects
    the pipeline ("can not find the end node of pipeline" on stage 0; dry-run,
    ``tests/test_pipeline_tied_unstaged.py``). An operator called on the network's root (the
    built-in ``gpt``'s ``gather`` and ``lm_head``) has no cell to stage and is never one
    (``Primitive.set_stage`` on it does not help MindSpore 2.10: observed in the dry-run).
    ``{}`` where no such cell exists."""
    out: dict[str, int] = {}
    seen_block = False
    after: dict[str, bool] = {}
    for op in graph.ops:                    # topological order
        path = op.prim_path or ""
        if in_block(path, blocks):
            seen_block = True
            after.clear()                   # not after the last block after all
            continue
        if "." not in path or not shared & set(op.inputs):
            continue
        cell = path.rsplit(".", 1)[0]
        if holds_block(cell, blocks):
            continue
        if not seen_block:
            out[cell] = 0
        else:
            after[cell] = True
    out.update({cell: stages - 1 for cell in after})
    return dict(sorted(out.items()))


__all__ = ["parameter_only", "first_stage_cells", "holds_block", "in_block",
           "shared_parameter_cells"]
