"""Write a pipeline plan back the MindSpore way, and predict the Send/Receive it makes MindSpore insert.

The ``Plan.pipeline`` record (:meth:`smsg_ms.search.pipeline.PipelinePlan.as_plan_dict`) holds
``stages``, ``micro_batches``, ``stage_of_block`` (cell path → stage), ``recompute`` (cell path →
bool) and ``optimizer_sharding``. MindSpore 2.10 wants (``shared/docs/mindspore-dryrun.md``, section
"Pipeline parallel in the dry-run"):

1. ``set_auto_parallel_context(pipeline_stages=P, enable_parallel_optimizer=...)`` before the network
   is built (:func:`pipeline_context`);
2. ``cell.pipeline_stage = s`` on the blocks, non-decreasing along the data flow, every stage used;
   ``cell.recompute()`` on the recomputed blocks, ``Primitive.recompute()`` on the selective
   primitives of the ``selective_recompute`` blocks (:func:`mark_cells`);
3. ``nn.PipelineCell(net_with_loss, micro)`` with micro >= P, then
   ``ms.amp.build_train_network(pipe, opt, level="O0")`` (gradient accumulation; a plain
   ``TrainOneStepCell`` fails) (:func:`pipeline_train_cell`). One stage with ``micro > 1``
   micro-batches (gradient accumulation without stages) is
   ``build_train_network(mindspore.parallel.nn.GradAccumulation(net_with_loss, micro), opt)``
   (checked in the dry-run: forward/backward collectives once per micro-batch, gradient
   synchronisation once per step); the ``grad_accumulation_step`` context is deprecated in 2.10
   and refuses values above 1.

Only these functions import MindSpore, and only when called.
"""
from __future__ import annotations

from typing import Any


class PipelineWriteBackError(ValueError):
    """A pipeline record that MindSpore would refuse (names the culprit)."""


def check_pipeline(pipeline: dict, devices: int) -> None:
    """Raise :class:`PipelineWriteBackError` on a record MindSpore would refuse.

    Checks: ``stages`` divides ``devices``; ``micro_batches >= stages``; stages of the blocks (in
    the record's order) never decrease and use every stage.
    """
    p, m = int(pipeline["stages"]), int(pipeline["micro_batches"])
    if p < 1 or devices % p:
        raise PipelineWriteBackError(f"pipeline stages {p} does not divide {devices} devices")
    if m < p:
        raise PipelineWriteBackError(f"micro_batches {m} < stages {p}: MindSpore requires "
                                     "micro >= stages")
    stages = list(pipeline.get("stage_of_block", {}).values())
    v = int(pipeline.get("virtual_stages", 1))
    if p > 1:
        chunks = chunk_of_blocks(stages, p) if v > 1 else stages
        if any(b < a for a, b in zip(chunks, chunks[1:])):
            raise PipelineWriteBackError("stage_of_block decreases along the chain: "
                                         f"{stages}")
        if v > 1 and sorted(set(chunks)) != list(range(p * v)):
            raise PipelineWriteBackError(
                f"stage_of_block {stages} is not {v} rounds of stages 0..{p - 1} "
                f"(interleaved pipeline with {v} virtual stages)")
        if sorted(set(stages)) != list(range(p)):
            raise PipelineWriteBackError(f"stage_of_block uses stages {sorted(set(stages))}, "
                                         f"expected every stage 0..{p - 1}")


def chunk_of_blocks(stage_of_block: list[int], stages: int) -> list[int]:
    """Model chunk (virtual stage ``c``, held by stage ``c mod p``) of every block of an
    interleaved pipeline, in chain order: a new round starts where the stage goes back down
    (mindformers' ``pp_ids``: chunk ``c`` of the chain on stage ``c mod p``)."""
    out, rnd = [], 0
    for i, s in enumerate(stage_of_block):
        if i and s < stage_of_block[i - 1]:
            rnd += 1
        out.append(rnd * stages + int(s))
    return out


def pipeline_context(pipeline: dict | None) -> dict[str, Any]:
    """Keyword arguments for ``mindspore.set_auto_parallel_context`` (set before building)."""
    if not pipeline:
        return {}
    ctx: dict[str, Any] = {"enable_parallel_optimizer": bool(pipeline.get("optimizer_sharding"))}
    level = pipeline.get("optimizer_level")
    if ctx["enable_parallel_optimizer"] and level and level != "level1":
        ctx["parallel_optimizer_config"] = {"optimizer_level": str(level)}
    if int(pipeline["stages"]) > 1:
        ctx["pipeline_stages"] = int(pipeline["stages"])
        if int(pipeline.get("virtual_stages", 1)) > 1:
            ctx["pipeline_config"] = {"pipeline_interleave": True, "pipeline_scheduler": "1f1b"}
    return ctx


def mark_cells(net, pipeline: dict) -> dict[str, int]:
    """Set ``pipeline_stage`` and ``recompute()`` on the cells of ``net`` named in ``pipeline``.

    A block of the record's ``split_blocks`` (``{block: {cell: block it runs with}}``,
    :mod:`smsg_ms.planner.border_tails`: its tail runs with the next block) is not marked
    itself: each of its cells takes the stage and the recompute of the block it runs with
    (MindSpore refuses a staged cell inside a cell staged otherwise). The cells of
    ``first_stage_cells`` (outside the blocks, reading trained weights before the first block:
    :func:`smsg_ms.planner.param_only.first_stage_cells`) take stage 0; left unstaged, MindSpore
    2.10 computes the first stage's parameter-only tensors once per micro-batch instead of once.
    The cells of ``shared_parameter_cells`` (``{cell: stage}``: outside the blocks, reading a
    parameter read on several stages, :func:`smsg_ms.planner.param_only.shared_parameter_cells`)
    take their stage; left unstaged, MindSpore 2.10 rejects the pipeline. With optimizer
    sharding on, a parameter of ``shared_parameters`` (read on two stages or more) gets
    ``Parameter.parallel_optimizer = False``
    (:data:`smsg_ms.planner.stages.UNSHARDED_WHY`: sharded, MindSpore 2.10 cannot compile it).

    Returns:
        ``{cell path: stage}`` of the marked cells.

    Raises:
        PipelineWriteBackError: a named cell is not in ``net``.
    """
    cells = dict(net.cells_and_names())
    stage_of = pipeline.get("stage_of_block", {})
    recompute = pipeline.get("recompute", {})
    selective = pipeline.get("selective_recompute", [])
    split = pipeline.get("split_blocks", {})
    units = [u for cells_of in split.values() for u in cells_of]
    first = pipeline.get("first_stage_cells", [])
    tied = pipeline.get("shared_parameter_cells", {})
    missing = sorted(n for n in list(stage_of) + list(recompute) + list(selective) + units
                     + list(first) + list(tied) if n not in cells)
    if missing:
        raise PipelineWriteBackError(f"pipeline record names cells the network does not have: "
                                     f"{', '.join(missing[:5])}")
    from ..planner.stages import unsharded_across_stages

    whole = unsharded_across_stages(pipeline.get("shared_parameters"),
                                    bool(pipeline.get("optimizer_sharding")))
    params = {p.name: p for p in net.get_parameters()} if whole else {}
    if any(n not in params for n in whole):
        raise PipelineWriteBackError(
            "pipeline record names parameters the network does not have: "
            + ", ".join(n for n in whole if n not in params))
    for name in whole:          # read on several stages: MindSpore cannot shard it
        params[name].parallel_optimizer = False
    marked = {}
    if int(pipeline["stages"]) > 1:
        for name, stage in stage_of.items():
            for cell, runs_with in split.get(name, {name: name}).items():
                cells[cell].pipeline_stage = int(stage_of[runs_with])
                marked[cell] = int(stage_of[runs_with])
        for cell in first:      # weights read before the first block: stage 0
            cells[cell].pipeline_stage = 0
            marked[cell] = 0
        for cell, stage in tied.items():    # a parameter read on several stages
            cells[cell].pipeline_stage = int(stage)
            marked[cell] = int(stage)
    for name, on in sorted(recompute.items()):
        for cell, runs_with in sorted(split.get(name, {name: name}).items()):
            if recompute.get(runs_with, on) if cell != name else on:
                cells[cell].recompute()
    for name in pipeline.get("selective_recompute", []):
        recompute_selective(cells[name])
    return marked


def recompute_selective(cell) -> list[str]:
    """``Primitive.recompute()`` on the primitives of ``cell`` (its sub-cells included) whose
    kind is one of :data:`smsg_ms.cost.pipeline.SELECTIVE_TYPES`; returns their paths inside
    ``cell`` (sorted). Functional calls have no primitive to mark and stay stored."""
    from mindspore.ops import Primitive

    from ..cost.pipeline import SELECTIVE_TYPES

    done = []
    for path, sub in cell.cells_and_names():
        for attr, value in sorted(vars(sub).items()):
            if isinstance(value, Primitive) and value.name in SELECTIVE_TYPES:
                value.recompute()
                done.append(f"{path}.{attr}" if path else attr)
    return sorted(done)


def needs_shared_graph(pipeline: dict) -> bool:
    """Whether MindSpore 2.10 wants the micro-batch graph shared (``lazy_inline``): an
    interleaved pipeline, or optimizer level 2/3 ("For optimizer level 2/3, only support with
    lazy_inline mode", dry-run with ``GradAccumulation``)."""
    return (int(pipeline.get("virtual_stages", 1)) > 1
            or (bool(pipeline.get("optimizer_sharding"))
                and pipeline.get("optimizer_level") in ("level2", "level3")))


def has_morph(cell) -> bool:
    """Whether ``cell`` or a sub-cell holds a ``Morph`` primitive (``ops.Morph``: mindformers'
    ``parallel_core`` linear and embedding layers)."""
    from mindspore.ops import Primitive

    return any(isinstance(v, Primitive) and v.name == "Morph"
               for _, sub in cell.cells_and_names() for v in vars(sub).values())


def share_micro_batch_graph(cell) -> None:
    """What ``mindspore.lazy_inline`` on the ``__init__`` of the cell ``PipelineCell`` wraps
    does (MindSpore 2.10 ``graph/lazy_inline.py`` sets ``cell_init_args`` after ``__init__``):
    its graph is compiled once and called once per micro-batch (a shared cell, as mindformers'
    models are). MindSpore 2.10 refuses an interleaved pipeline without one
    (``pipeline_interleave.cc``: "Using pipeline parallel with interleave, should enable
    lazy_inline")."""
    if not getattr(cell, "cell_init_args", None):
        cell.cell_init_args = f"lazy_inline_{type(cell).__name__}"


def pipeline_train_cell(net_with_loss, optimizer, pipeline: dict):
    """``build_train_network(PipelineCell(net_with_loss, micro), optimizer, level="O0")`` for more
    than one stage; for one stage and ``micro > 1`` micro-batches the same with
    ``mindspore.parallel.nn.GradAccumulation(net_with_loss, micro)`` (gradient accumulation:
    ``build_train_network`` then yields ``_TrainGradAccuStepCell``); ``TrainOneStepCell``
    otherwise. The result has ``set_train()`` called.

    The micro-batch graph is shared (:func:`share_micro_batch_graph`) where
    :func:`needs_shared_graph` says so, and with more than one micro-batch whenever the network
    holds a ``Morph`` (:func:`has_morph`): unshared, MindSpore 2.10's Morph pass
    (``frontend/optimizer/irpass/morph.cc:143``, ``AddMonadParameterForFuncGraph``) fails on
    the inlined micro-batch copies of ``_TrainGradAccuStepCell`` ("The pointer[abs] is null");
    shared, the Morph is expanded once in the one micro-batch graph (checked in the dry-run:
    ``tests/test_morph_region.py``, mindformers' Qwen3 / TeleChat3)."""
    import mindspore as ms
    from mindspore import nn

    micro = int(pipeline.get("micro_batches", 1))
    if needs_shared_graph(pipeline) or (micro > 1 and has_morph(net_with_loss)):
        share_micro_batch_graph(net_with_loss)
    if int(pipeline["stages"]) > 1:
        pipe = nn.PipelineCell(net_with_loss, micro)
        train = ms.amp.build_train_network(pipe, optimizer, level="O0")
    elif micro > 1:
        from mindspore.parallel.nn import GradAccumulation

        train = ms.amp.build_train_network(GradAccumulation(net_with_loss, micro), optimizer,
                                           level="O0")
    else:
        train = nn.TrainOneStepCell(net_with_loss, optimizer)
    train.set_train(True)
    return train


def predicted_point_to_point(pipeline: dict, boundary_shape: list[int], dtype: str,
                             tensors_per_boundary: int = 1,
                             extra: list[dict] = (),
                             shared: list[dict] = ()) -> dict[int, list[dict]]:
    """Send/Receive MindSpore inserts on each stage under 1F1B, per stage index.

    Per boundary between stage ``s`` and ``s + 1`` (with ``v`` virtual stages: between chunk
    ``c`` on stage ``c mod p`` and chunk ``c + 1``; checked in the dry-run, 2 stages × 2 virtual
    stages), per micro-batch and per tensor crossing it:
    stage ``s`` has one forward Send and one backward Receive (the gradient), stage ``s + 1`` one
    forward Receive and one backward Send; each of shape ``boundary_shape`` (the per-device slice)
    (``shared/docs/mindspore-dryrun.md``). Each side tensor of ``extra`` (``[{"shape",
    "dtype"}]``: the record's ``boundary_extra``, an auxiliary loss passed on beside the
    activation) adds the same four rows at its own slice shape and dtype (checked in the
    dry-run: ``tests/test_pipeline_side_tensor.py``). Each parameter of ``shared`` (``[{"shape",
    "dtype", "stages"}]``: the record's ``shared_parameters``, read on several stages) is sent
    once per step, not per micro-batch, at its per-device slice: the first of its stages has one
    forward Send and one backward Receive (its gradient) per other stage, each other stage one
    forward Receive and one backward Send (MindSpore 2.10
    ``PipelineTransformer::HandleSharedParameter``, ``pipeline_transformer.cc``; checked in the
    dry-run: ``tests/test_pipeline_tied_stages.py``).

    Returns:
        ``{stage: [{"type", "pass", "shape", "dtype", "count"}]}``.
    """
    p, m = int(pipeline["stages"]), int(pipeline["micro_batches"])
    n = m * tensors_per_boundary
    stages = list(pipeline.get("stage_of_block", {}).values())
    v = int(pipeline.get("virtual_stages", 1))
    chunks = max(chunk_of_blocks(stages, p)) + 1 if v > 1 and stages else p
    out: dict[int, list[dict]] = {s: [] for s in range(p)}
    for c in range(chunks - 1):       # chunk boundary c -> c + 1 (stage c mod p -> c + 1 mod p)
        for shape, dt in [(boundary_shape, dtype)] + [(x["shape"], x["dtype"]) for x in extra]:
            _add_pair(out, c % p, (c + 1) % p, shape, dt, n)
    for prm in shared:
        first, *others = prm["stages"]
        for other in others:
            _add_pair(out, first, other, prm["shape"], prm["dtype"], 1)
    return out


def _add_pair(out: dict, sender: int, receiver: int, shape, dtype: str, count: int) -> None:
    """The four rows of one tensor sent from stage ``sender`` to ``receiver`` (its gradient
    back): a forward Send and a backward Receive on the sender, a forward Receive and a
    backward Send on the receiver, ``count`` times each."""
    for stage, kinds in ((sender, (("Send", "forward"), ("Receive", "backward"))),
                         (receiver, (("Receive", "forward"), ("Send", "backward")))):
        for kind, phase in kinds:
            out[stage].append({"type": kind, "pass": phase, "shape": list(shape),
                               "dtype": dtype, "count": count})


def ranks_per_stage(devices: int, stages: int) -> list[int]:
    """One rank of each stage (the first): ``s × devices / stages``."""
    return [s * (devices // stages) for s in range(stages)]
