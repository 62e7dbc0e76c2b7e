"""The stage plan of a pipeline: the operator-level plan of the whole network on one stage's
devices, and what the outer pipeline search reads of it per repeated block.

:func:`layer_costs_of` gives the ``layer_costs(d, b)`` of
:func:`smsg_ms.search.pipeline.plan_pipeline` for one stage solution: the chosen operator costs
summed per repeated block (``layers.i``). Operators before the first block (embedding) are folded
into the first block and those after the last (final norm, head) into the last one: they are not
cells MindSpore can give a stage of their own here (unmarked cells inherit the largest stage of
their inputs; ``shared/docs/mindspore-dryrun.md``), so they always live on the first and last
stage.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass
import math
from math import prod

from ..cost.overlap import exposed_grad_sync
from ..cost.pipeline import SELECTIVE_TYPES, LayerCost, Links, ParamSlice
from ..graph.blocks import block_prefix
from ..graph.model import DTYPE_BYTES, OpGraph
from .border_tails import moved, tails
from .errors import PipelinePlanningError
from .loss import loss_reads
from .variables import chosen_costs, variable_index


def links_of(hardware) -> Links:
    """Communication constants of a machine (:func:`smsg_ms.cost.hardware.get_hardware`):
    gradient synchronisation and the sends between stages placed on its levels
    (:class:`~smsg_ms.cost.pipeline.Links`)."""
    from ..cost.hardware import get_hardware

    hw = get_hardware(hardware)
    return Links(bandwidth=hw.levels[0].bandwidth, latency=hw.levels[0].latency, machine=hw)


def bytes_per_element(graph: OpGraph) -> dict[str, float]:
    """Bytes per trained-parameter element by kind (``parameter``, ``gradient``, ``optimizer``)
    as the operator-level :class:`~smsg_ms.cost.model.CostModel` counts them (Adam): weight and
    gradient in the parameter's dtype (MindSpore AllReduces the gradient in that dtype), two fp32
    moments (8 B). With several dtypes, the element-weighted mean (exact for one dtype). The
    stage plan and the super-step then price gradient synchronisation alike.

    Raises:
        PipelinePlanningError: the graph has no trained parameter.
    """
    from ..cost.model import OPTIMIZER_STATES

    trained = [t for t in graph.parameters() if t.requires_grad and t.numel]
    elements = sum(t.numel for t in trained)
    if not elements:
        raise PipelinePlanningError(f"network {graph.name} has no trained parameter to pipeline")
    size = sum(t.numel * DTYPE_BYTES.get(t.dtype, 4) for t in trained) / elements
    return {"parameter": size, "gradient": size, "optimizer": 4.0 * OPTIMIZER_STATES["adam"]}


def side_container(container: str) -> bool:
    """Whether cells of ``container`` are a side block rather than layers of the chain:
    mindformers' multi-token-prediction block (``GPTModel.mtp``, a ``mtp`` path component:
    ``model.mtp.layers.0``), which reads the decoder's output, the token ids again and the
    embedding and output weights, and which mindformers places on the last pipeline stage
    (``parallel_core/training_graph/base_models/gpt/gpt_model.py``: ``self.mtp.pipeline_stage
    = pipeline_stage - 1``; ``num_hidden_layers`` does not count it). Every other indexed
    container is part of the chain (a ResNet's ``layer1`` … ``layer4`` follow each other)."""
    return "mtp" in container.split(".")


def block_of_ops(graph: OpGraph) -> tuple[list[str], dict[int, int]]:
    """Chain of repeated blocks of ``graph`` and the chain index of every operator
    (:func:`chain_blocks`), the tail of a block that ends with a Reshape's output in the block
    it runs with (:mod:`.border_tails`: Swin's ``downsample`` with the next layer)."""
    names, block = chain_blocks(graph)
    if not any(op.type == "Reshape" for op in graph.ops):
        return names, not_before_inputs(graph, block)
    sent = weight_dependent(graph)
    found = tails(graph, names, block, sent, reshape_borders(graph, block, sent))
    return names, not_before_inputs(graph, moved(block, found) if found else block)


def not_before_inputs(graph: OpGraph, block: dict[int, int]) -> dict[int, int]:
    """``block`` (op id → block index) with every operator moved to the latest block of the
    operators whose outputs it reads, where that is later: MindSpore runs an operator of no
    stage's cell on the largest stage of its inputs (``shared/docs/mindspore-dryrun.md``).
    MindSpore's order can put an operator outside the blocks between two operators of an
    earlier block (mindformers' Qwen3-MoE: the LM loss, ``model.loss``, between the first MoE
    layer's auxiliary-loss operators), which :func:`chain_blocks` alone gives that block.
    An operator computed from parameters and constants alone (the output layer's weight Cast)
    or from data inputs and constants alone (the loss's label mask) then runs with its first
    reader, where that is later: neither tensor is sent between stages (checked in the dry-run
    on Qwen3-MoE, 2 stages: the LM loss's label operators run on the last stage, and the
    head's weight Cast is not sent)."""
    out = dict(block)
    sources: dict[str, frozenset] = {}  # tensor → kinds of the network's tensors it is made of
    for op in graph.ops:
        kinds = frozenset().union(*(sources.get(n, frozenset({graph.tensors[n].kind}))
                                    for n in op.inputs)) & {"input", "parameter"}
        sources.update((n, kinds) for n in op.outputs)
    own = {op.id for op in graph.ops
           if op.outputs and not {"input", "parameter"} <= sources[op.outputs[0]]}
    changed = True
    while changed:                     # one pass when graph.ops is in topological order
        changed = False
        for op in graph.ops:
            latest = max((out[q] for q in (graph.tensors[n].producer for n in op.inputs)
                          if q is not None), default=out[op.id])
            if latest > out[op.id]:
                out[op.id] = latest
                changed = True
    for op in reversed(graph.ops):
        if op.id in own:
            readers = [out[c] for n in op.outputs for c in graph.tensors[n].consumers]
            out[op.id] = max(out[op.id], min(readers, default=out[op.id]))
    return out


def chain_blocks(graph: OpGraph) -> tuple[list[str], dict[int, int]]:
    """Chain of repeated blocks of ``graph`` and the chain index of every operator, by name.

    Operators with an indexed primitive path (``layers.3.attention.wq.matmul``) belong to that
    block, but for a side block's (:func:`side_container`), which belong to the last block with
    the functional calls that follow them, wherever the graph's order puts them (an MTP layer runs
    on the last stage; MindSpore's order puts DeepSeek-V3's router auxiliary losses, operators of
    the decoder layers, after the MTP layer, whose router Reshape then seemed to cross every
    later border); functional calls (no path) to the block of the operator before them; operators before the first block to the first block, and
    after the last block's last indexed operator to the last block. Any other operator (a primitive
    named outside the blocks, or a functional call after one) between two indexed operators of one
    block belongs to that block: a primitive the blocks share with their model is called inside each
    block and runs there (mindformers GLM2: the blocks' casts are captured as ``transformer.cast``,
    scope the model's), so the block's returned value, not an internal tensor such a cast reads,
    crosses a stage boundary. Between two blocks it belongs to the next one (the block that reads
    it: a cast of the block's input); a cast a block applies to its own returned value cannot be
    told from it.

    Returns:
        ``(block names in order, {op id: block index})``.

    Raises:
        PipelinePlanningError: the graph has no indexed block.
    """
    names: list[str] = []
    raw: dict[int, int | None] = {}
    indexed: list[int | None] = []     # block of each operator with an indexed path, in order
    current: int | None = None
    seen_after = False
    side: set[int] = set()      # a side block's operators and the functional calls after them
    in_side = False
    named = {"%s.%d" % bp for bp in (block_prefix(op.prim_path) for op in graph.ops
                                     if op.prim_path) if bp is not None}
    for op in graph.ops:
        bp = block_prefix(op.prim_path) if op.prim_path else parameter_block(graph, op, named)
        if op.prim_path:
            in_side = side_container(op.prim_path)     # model.mtp.layers.0…, model.mtp.reshape
        if in_side:
            side.add(op.id)
        if bp is not None and side_container(bp[0]):
            bp = None   # an MTP layer: a named operator outside the blocks
        if bp is not None:
            name = f"{bp[0]}.{bp[1]}"
            if name not in names:
                names.append(name)
            current = names.index(name)
            seen_after = False
        elif op.prim_path and current is not None:
            seen_after = True
        raw[op.id] = None if seen_after else current
        indexed.append(current if bp is not None else None)
    if not names:
        raise PipelinePlanningError(f"network '{graph.name}' has no repeated blocks "
                                    "(cells named <container>.<index>) to cut into stages: "
                                    "plan it without --pipeline")
    following: list[int | None] = [None] * len(graph.ops)   # block of the next indexed operator
    nxt = None
    for i in range(len(graph.ops) - 1, -1, -1):
        following[i] = nxt
        nxt = indexed[i] if indexed[i] is not None else nxt
    heads = block_heads(graph, raw, indexed, following)
    last, out, previous = len(names) - 1, {}, None
    for i, op in enumerate(graph.ops):
        v = following[i] if i in heads else raw[op.id]
        if v is None and previous is not None:
            v = last if following[i] is None else following[i]
        out[op.id] = last if op.id in side else (0 if v is None else v)
        previous = indexed[i] if indexed[i] is not None else previous
    return data_flow_order(graph, names, scope_container_calls(graph, names, indexed, out))


def scope_container_calls(graph: OpGraph, names: list[str], indexed: list,
                          block: dict[int, int]) -> dict[int, int]:
    """``block`` with each functional call whose scope names another container's cell than
    its block's moved to a block of that container where the data flow agrees: the latest one
    before it in graph order when its latest input is made there, else the next one when that
    block alone reads it. Only calls of a block's own construct count, of a class no other
    container's blocks have.

    A reused cell's functional calls all carry its first instance's scope
    (``transformers-CellList/0-Transformer`` for every Transformer), so the scope cannot
    tell the block, but it does tell the container. mindcv PiT alternates ``transformers.i``
    and ``pools.i``: a Transformer's construct ends with ``x[:, n:]``, a transpose and
    ``ops.reshape`` to ``(B, C, H, W)``, which MindSpore's order puts between ``pools.i``'s
    operators and the fewest-tensors rule (:func:`block_heads`) gave to ``pools.i``; the next
    Transformer's opening reshape, transpose and concat went to ``pools.i`` too. MindSpore runs
    each in the construct that calls it, so :func:`reshape_borders` must see the Transformer's
    trailing Reshape in the Transformer (MindSpore refused the stage border after it: "Reshape
    op can't be a border"). ``indexed``: the block of each operator with an indexed primitive
    path (``None`` otherwise), in graph order; ``block``: op id → chain index."""
    from ..graph.mindir import cell_path_of_scope

    container = [n.rsplit(".", 1)[0] for n in names]
    if len(set(container)) < 2:
        return block
    # the class of each container's elements (``0-Transformer``): a reused class's calls carry
    # its first instance's scope, so a class used in two containers tells neither
    classes: dict[str, set] = {}
    for op in graph.ops:
        bp = block_prefix(op.prim_path) if op.prim_path else None
        element = _element_class(op.scope or "", bp)
        if element is not None:
            classes.setdefault(element, set()).add(bp[0])
    out = dict(block)
    seen: dict[str, int] = {}           # container → latest block of it met so far
    upcoming: list[dict[str, int]] = [{} for _ in graph.ops]
    ahead: dict[str, int] = {}
    for i in range(len(graph.ops) - 1, -1, -1):
        upcoming[i] = dict(ahead)
        if indexed[i] is not None:
            ahead[container[indexed[i]]] = indexed[i]
    target: dict[int, tuple[str, int | None, int | None]] = {}
    for i, op in enumerate(graph.ops):
        if indexed[i] is not None:
            seen[container[indexed[i]]] = indexed[i]
            continue
        if op.prim_path or op.phase != "forward" or not op.scope:
            continue
        path = cell_path_of_scope(op.scope)
        bp = block_prefix(path)
        # only a call of the block's own construct (scope ``mix-CellList/0-Mix/Reshape-op3``)
        # of a class no other container uses: a call inside a sub-cell carries the scope of
        # that sub-cell class's first instance, which may be another container's
        if bp is None or path != "%s.%d" % bp or bp[0] == container[out[op.id]] \
                or bp[0] not in container \
                or classes.get(_element_class(op.scope, bp), set()) != {bp[0]}:
            continue
        target[op.id] = (bp[0], seen.get(bp[0]), upcoming[i].get(bp[0]))
        # MindSpore's scopes of functional calls are not always their construct's (an
        # encoder-decoder's decoder residual Add is scoped to the encoder's class): a call
        # moves only where the data flow agrees, into the block it continues (its latest
        # input made there) ...
        latest = max((out[q] for q in (graph.tensors[n].producer for n in op.inputs)
                      if q is not None), default=-1)
        if target[op.id][1] is not None and latest == target[op.id][1]:
            out[op.id] = latest
            del target[op.id]
    # ... or into the block that alone reads it (the next block's opening reshape)
    for op in reversed(graph.ops):
        if op.id not in target or target[op.id][2] is None:
            continue
        readers = {out[c] for n in op.outputs for c in graph.tensors[n].consumers}
        if readers == {target[op.id][2]}:
            out[op.id] = target[op.id][2]
    return out


def _element_class(scope: str, bp: tuple[str, int] | None) -> str | None:
    """The cell class of block ``bp`` (``("transformers", 1)``) named in ``scope``
    (``Default/transformers-CellList/1-Transformer/...`` → ``"Transformer"``), or ``None``."""
    if bp is None:
        return None
    parts = scope.split("/")
    want = bp[0].split(".")
    names = [p.rsplit("-", 1)[0] for p in parts]
    for k in range(len(parts) - len(want)):
        if names[k:k + len(want)] == want and "-" in parts[k + len(want)]:
            return parts[k + len(want)].split("-", 1)[1]
    return None


def data_flow_order(graph: OpGraph, names: list[str],
                    block: dict[int, int]) -> tuple[list[str], dict[int, int]]:
    """``(names, block)`` with the blocks reordered so that no block reads a tensor of a later
    one, where the graph's order is not such an order already.

    MindSpore's topological order runs a block's first operators as soon as their inputs are
    ready, so a block that reads an earlier block only part-way (a decoder layer's cross-attention
    reads the encoder's output, its self-attention does not) can open the graph: a T5-like
    encoder-decoder's order starts with ``dec.0``'s self-attention, before ``enc.0``. Pipeline
    stages follow the chain: ``dec.0`` on stage 0 and ``enc.1`` on stage 1 make MindSpore refuse
    the plan ("The stage setting is incorrect. PreNode's stage:1 is larger than NextNode's
    stage:0", ``pipeline_transformer.cc``). The chain is then the topological order of the
    blocks' data dependencies (tensors made by one block's operators and read by another's),
    earliest first appearance first among the ready blocks; with a cycle (operators given to
    the wrong block) ``names`` and ``block`` are returned unchanged. ``block``: op id → chain
    index (:func:`chain_blocks`)."""
    n = len(names)
    after: list[set[int]] = [set() for _ in range(n)]   # block → blocks reading its tensors
    before = [0] * n
    for op in graph.ops:
        if op.phase != "forward":
            continue
        for name in op.inputs:
            q = graph.tensors[name].producer
            if q is not None and q in block and block[q] != block[op.id] \
                    and block[op.id] not in after[block[q]]:
                after[block[q]].add(block[op.id])
                before[block[op.id]] += 1
    order: list[int] = []
    ready = sorted(b for b in range(n) if not before[b])
    while ready:
        b = ready.pop(0)
        order.append(b)
        for c in after[b]:
            before[c] -= 1
            if not before[c]:
                ready.append(c)
        ready.sort()
    if len(order) < n or order == list(range(n)):
        return names, block
    index = {b: k for k, b in enumerate(order)}
    return [names[b] for b in order], {i: index[b] for i, b in block.items()}


def parameter_block(graph: OpGraph, op, named: set[str]) -> tuple[str, int] | None:
    """``(container, index)`` of the repeated block whose parameters the functional call ``op``
    reads (``nn.MultiheadAttention``'s ``ops.matmul`` of ``blocks.1.attn.in_proj_weight``):
    a cell's parameters are read in its ``construct``, which runs on that cell's stage
    (``PipelineTransformer``: an operator's stage is the stage of the cell graph it is called
    in). Only blocks in ``named`` (``"container.index"`` of the primitive paths) count.
    ``None`` when it reads none, or parameters of several blocks."""
    found = {block_prefix(n) for n in op.inputs if graph.tensors[n].kind == "parameter"}
    found = {bp for bp in found if bp is not None and "%s.%d" % bp in named}
    return found.pop() if len(found) == 1 else None


def block_heads(graph: OpGraph, raw: dict, indexed: list, following: list) -> set[int]:
    """Positions of the functional calls after a block's last operator that open the next
    block's ``construct`` (``x1, x2 = ops.split(x)`` of the block's input).

    MindSpore runs an operator on the stage of the cell whose ``construct`` calls it
    (``PipelineTransformer``), but a reused cell's functional calls all carry the first
    instance's scope, so the capture cannot tell a block's last calls from the next block's
    first ones. A block's ``construct`` returns its output: between two blocks the border is
    where the fewest tensors cross, latest on a tie (a returned ``x + mix(z)`` crosses alone;
    the ``split`` of it would add its two halves). Each run of functional calls (``raw`` =
    the block before, ``following`` = a later block) is cut there; the calls after the cut
    are returned."""
    last_at = {b: i for i, b in enumerate(indexed) if b is not None}
    last_use: dict[str, int] = {}
    for op in graph.ops:
        for n in op.inputs:
            last_use[n] = op.id
    heads: set[int] = set()
    for b, end in last_at.items():
        run = []
        for i in range(end + 1, len(graph.ops)):
            op = graph.ops[i]
            if raw[op.id] != b or indexed[i] is not None or following[i] in (None, b):
                break
            run.append(i)
        if not run:
            continue
        crossing, best, best_at = 0, 0, 0      # tensors crossing, relative to the run's start
        for k, i in enumerate(run):
            op = graph.ops[i]
            crossing -= sum(1 for n in set(op.inputs) if last_use.get(n) == i
                            and graph.tensors[n].producer is not None)
            crossing += sum(1 for n in op.outputs if last_use.get(n, -1) > i)
            if crossing <= best:
                best, best_at = crossing, k + 1
        heads.update(run[best_at:])
    return heads


def slice_shape(shape, layout) -> tuple[int, ...]:
    """The per-device slice of a tensor of global ``shape`` under ``layout`` (each dimension
    divided by its cut count)."""
    return tuple(int(s) // c for s, c in zip(shape, layout.cuts))


@dataclass
class StageSolution:
    """The operator-level plan of the whole network on one stage's devices."""

    graph: OpGraph
    devices: int
    model: object
    variables: list
    choice: list[int]
    problem: object = None      # the SearchProblem (smsg_ms.search.problem)
    bound: float | None = None  # proven lower bound (s) when solved at a work limit, else None


def stage_cost_model(graph: OpGraph, devices: int, hardware, replace_strategies: bool = False,
                     pipelined: bool = False):
    """The :class:`~smsg_ms.cost.model.CostModel` of a stage plan, as
    :func:`smsg_ms.planner.plan_graph` builds it (``replace_strategies``: plan anew the
    strategies the network's own ``shard()`` sets); ``pipelined``: a stage of two stages or
    more, whose compile keeps the backward ``AllReduce`` of a constant gradient
    (``CostModel``'s ``fold_constant_gradients`` off)."""
    from ..cost.hardware import get_hardware
    from ..cost.model import CostModel
    from .options import EXHAUSTIVE_UP_TO

    return CostModel(graph, devices, get_hardware(hardware),
                     fully_use_devices=devices > EXHAUSTIVE_UP_TO,
                     replace_strategies=replace_strategies,
                     fold_constant_gradients=False if pipelined else None)


def solve_stage(graph: OpGraph, devices: int, hardware, model=None,
                signatures: dict | None = None, effort=None) -> StageSolution:
    """Operator-level optimum of ``graph`` on ``devices`` without a memory limit (the outer search
    checks memory per stage). Same problem as :func:`smsg_ms.planner.plan_graph`. ``model``: a
    :func:`stage_cost_model` of the same graph and devices to reuse (its option cache);
    ``signatures``: :func:`smsg_ms.planner.variables.op_signatures` of ``graph``, when known;
    ``effort``: the work limit of a solve too wide to eliminate (:class:`smsg_ms.search.effort.
    Effort`; ``None``: the search's default)."""
    from ..search import solve
    from .problem import build_problem
    from .variables import repeated_variable_groups

    if model is None:
        model = stage_cost_model(graph, devices, hardware)
    problem, variables = build_problem(graph, model, signatures=signatures)
    extra = {} if effort is None else {"effort": effort}
    solution = solve(problem, repeated=repeated_variable_groups(graph, problem, variables),
                     progress=False, **extra)
    return StageSolution(graph, devices, model, variables, list(solution.choice), problem,
                         solution.bound)


def layer_costs_of(sol: StageSolution, structure: tuple | None = None,
                   pipelined: bool = False) -> list[LayerCost]:
    """Per-block :class:`LayerCost` of a stage solution (one micro-batch, per device).

    Forward/backward seconds: the kernels (launches and roofline,
    :meth:`CostModel.compute_seconds`) and the forward/backward collectives of the chosen
    strategies plus the redistributions into the block's operators (placed on the machine's
    levels, :meth:`CostModel.collective_seconds`, as :meth:`CostModel.breakdown`); gradient
    synchronisation is excluded (the outer search prices it). Activation bytes: Σ ``memory["activation"]``.
    Selective recompute: the forward seconds and activation bytes of the block's operators of
    :data:`~smsg_ms.cost.pipeline.SELECTIVE_TYPES` without forward collectives.
    Parameters: one :class:`ParamSlice` per parameter from the layout its first consumer needs.
    Output bytes: the per-device slices (producer's layout) of the tensors the block produces and
    a later block reads; input bytes: those of the tensors it reads from earlier blocks; with
    more than one, each tensor's bytes too (``output_sizes`` / ``input_sizes``: one Send each).
    ``structure``: ``(block_of_ops(graph), weight_dependent(graph))`` when already known.
    ``pipelined`` (a stage of two stages or more): a parameter read in two blocks or more
    (:func:`shared_parameters`) is kept out of optimizer sharding
    (:func:`unsharded_across_stages`).
    """
    graph, model = sol.graph, sol.model
    (names, block), sent = structure or (block_of_ops(graph), weight_dependent(graph))
    n = len(names)
    fwd, bwd, act, hidden = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    sel_fwd, sel_act = [0.0] * n, [0.0] * n      # the selective-recompute primitives' part
    params: list[dict[str, ParamSlice]] = [dict() for _ in range(n)]
    cost_of = chosen_costs(sol.variables, sol.choice)

    def coll_seconds(colls, i):
        for c in colls:
            if c.phase == "grad_sync":
                continue
            t = model.collective_seconds(c)
            if c.phase == "backward":
                bwd[i] += t
            else:
                fwd[i] += t

    timed: dict[tuple, tuple] = {}

    def redistribution_seconds(tensor, src, dst, i):
        """``coll_seconds`` of a redistribution, its per-collective seconds memoised by what
        they depend on (:meth:`CostModel.redistribution_seconds`' key); added one by one in
        the collectives' order, so the sums are the unmemoised ones bit for bit."""
        a, b = model.normalized(src), model.normalized(dst)
        if a == b:
            return
        key = (tuple(tensor.shape), tensor.dtype, model.carries_gradient(tensor.name), a, b)
        got = timed.get(key)
        if got is None:
            got = timed[key] = tuple(
                (c.phase == "backward", model.collective_seconds(c))
                for c in model.redistribution(tensor, a, b) if c.phase != "grad_sync")
        for backward, t in got:
            if backward:
                bwd[i] += t
            else:
                fwd[i] += t

    for op in graph.ops:
        i, c = block[op.id], cost_of[op.id]
        f, b = model.compute_seconds(c)
        fwd[i] += f
        bwd[i] += b
        sync = sum(model.collective_seconds(x) for x in c.collectives if x.phase == "grad_sync")
        hidden[i] += sync - exposed_grad_sync(sync, b)
        act[i] += float(c.memory.get("activation", 0))
        coll_seconds(c.collectives, i)
        if op.type in SELECTIVE_TYPES and not any(x.phase == "forward" for x in c.collectives):
            sel_fwd[i] += f
            sel_act[i] += float(c.memory.get("activation", 0))
    for src_id, dst_id, tname, idx in graph.iter_edges():
        src_op = graph.ops[src_id]
        src = cost_of[src_id].out_layouts[src_op.outputs.index(tname)]
        dst = cost_of[dst_id].in_layouts[idx]
        if src != dst:
            redistribution_seconds(graph.tensors[tname], src, dst, block[dst_id])
    for read in loss_reads(graph, model.devices, variable_index(sol.variables)):
        src = cost_of[read.producer].out_layouts[read.output]
        redistribution_seconds(read.tensor, src, read.need, block[read.producer])
    for name, (i, prm) in parameter_slices(sol, _known=(block, cost_of)).items():
        params[i][name] = prm
    out_b, in_b = [0.0] * n, [0.0] * n
    out_parts: list[list[float]] = [[] for _ in range(n)]
    in_parts: list[list[float]] = [[] for _ in range(n)]
    for name, (i, j), nbytes in boundary_tensors(sol, _known=(block, cost_of), _sent=sent):
        out_b[i] += nbytes
        in_b[j] += nbytes
        out_parts[i].append(nbytes)
        in_parts[j].append(nbytes)
    shared: list[list[tuple[str, float]]] = [[] for _ in range(n)]
    for name, (at, shape, dtype, nbytes) in shared_parameters(sol, _known=(block, cost_of)).items():
        for i in at:
            shared[i].append((name, nbytes))
            if pipelined and name in params[i]:      # MindSpore cannot shard it: see below
                params[i][name] = dataclasses.replace(params[i][name], parallel_optimizer=False)
    for i in reshape_borders(graph, block, sent):
        out_b[i] = math.inf            # no stage may end there: the cut search avoids it
        out_parts[i] = []
    return [LayerCost(fwd[i], bwd[i], act[i], in_b[i], out_b[i],
                      tuple(params[i][k] for k in sorted(params[i])), names[i], hidden[i],
                      selective_seconds=sel_fwd[i], selective_bytes=sel_act[i],
                      output_sizes=several(out_parts[i]), input_sizes=several(in_parts[i]),
                      shared=tuple(shared[i]))
            for i in range(n)]


def several(sizes: list[float]) -> tuple[float, ...]:
    """``sizes`` as :attr:`LayerCost.output_sizes` keeps them: only when more than one tensor
    crosses (one tensor is its total bytes)."""
    return tuple(sizes) if len(sizes) > 1 else ()


def _blocks_and_costs(sol: StageSolution, known=None) -> tuple[dict, dict]:
    """``({op id: block index}, {op id: chosen OpCost})`` of a stage solution (``known``: the
    pair already computed by the caller)."""
    if known is not None:
        return known
    _, block = block_of_ops(sol.graph)
    return block, chosen_costs(sol.variables, sol.choice)


def parameter_slices(sol: StageSolution, _known=None) -> dict[str, tuple[int, ParamSlice]]:
    """Every parameter of a stage solution as one device holds it: ``{name: (block index,
    ParamSlice)}``, from the layout its first consumer (graph order) needs, in graph order."""
    graph = sol.graph
    block, cost_of = _blocks_and_costs(sol, _known)
    out: dict[str, tuple[int, ParamSlice]] = {}
    for op in graph.ops:
        for idx, name in enumerate(op.inputs):
            t = graph.tensors[name]
            if t.kind == "parameter" and name not in out:
                layout = cost_of[op.id].in_layouts[idx]
                sl = slice_shape(t.shape, layout)
                out[name] = (block[op.id], ParamSlice(int(prod(sl)), int(sl[0]) if sl else 1,
                                                      sol.devices // layout.shards,
                                                      float(t.nbytes or 0),
                                                      t.parallel_optimizer,
                                                      layout.replica_span()))
    return out


def shared_parameters(sol: StageSolution, _known=None, cells_only: bool = True) -> dict[str, tuple]:
    """The trained parameters of a stage solution read in more than one block of the chain (a tied
    embedding table read by the embedding and the output head): ``{name: (block indices
    reading it (sorted tuple), per-device slice shape (list), dtype, slice bytes)}`` in graph
    order, the slice under the layout of its first consumer (MindSpore gives a parameter one
    layout). On two stages, MindSpore Sends it between them once per step
    (:func:`smsg_ms.cost.pipeline.shared_parameter_seconds`). ``{}`` where none is.

    ``cells_only`` (default): a reader no staged cell holds (``ops.matmul(x,
    self.emb.embedding_table.T)`` in the top-level ``construct``:
    :func:`smsg_ms.planner.root_reads.loose_reads`) does not count: MindSpore gives the
    parameter no stage there and sends nothing, the reader reads its stage's own copy
    (checked in the dry-run: :mod:`smsg_ms.networks.tied_root`,
    ``tests/test_pipeline_tied_root.py``). ``cells_only=False``: every reader counts (the
    parameters whose cells a pipeline's write-back stages)."""
    from .root_reads import loose_reads

    graph = sol.graph
    loose = loose_reads(graph, chain_blocks(graph)[0]) if cells_only else set()
    block, cost_of = _blocks_and_costs(sol, _known)
    at: dict[str, set] = {}
    first: dict[str, tuple] = {}
    for op in graph.ops:
        for idx, name in enumerate(op.inputs):
            t = graph.tensors[name]
            if t.kind != "parameter" or not t.requires_grad:
                continue
            at.setdefault(name, set())
            if (op.id, name) not in loose:
                at[name].add(block[op.id])
            if name not in first:
                sl = list(slice_shape(t.shape, cost_of[op.id].in_layouts[idx]))
                whole = int(prod(t.shape)) if t.shape else 1
                first[name] = (sl, t.dtype, float(t.nbytes or 0) * int(prod(sl)) / whole)
    return {name: (tuple(sorted(at[name])),) + first[name] for name in first
            if len(at[name]) > 1}


def optimizer_sharded(sol: StageSolution, unsharded: frozenset = frozenset()) -> dict[str, int]:
    """Parameters MindSpore shards under ``enable_parallel_optimizer`` and their shard count
    (the replicas of the slice: :meth:`ParamSlice.optimizer_shardable`), sorted by name;
    ``unsharded``: names kept whole (:func:`unsharded_across_stages`)."""
    return {name: prm.replicas for name, (_, prm) in sorted(parameter_slices(sol).items())
            if sol.graph.tensors[name].requires_grad and prm.optimizer_shardable()
            and name not in unsharded}


#: why a parameter read on two pipeline stages is kept out of optimizer sharding (plan notes)
UNSHARDED_WHY = (
    "read on two pipeline stages, so MindSpore Sends it from the first to the others "
    "(PipelineTransformer::HandleSharedParameter, pipeline_transformer.cc); the parallel "
    "optimizer inserts its AllGather before every forward reader but a Send or Receive "
    "(InsertParallelOpt, frontend/parallel/parameter_manager.cc), so the Send would carry the "
    "optimizer shard and MindSpore 2.10's compile fails (\"For 'AddN', input shape must be "
    "same\" in _TrainGradAccuStepCell); the write-back sets its Parameter.parallel_optimizer "
    "to False, as mindformers does for its embedding table")


def unsharded_across_stages(shared: list[dict] | None, optimizer_sharding: bool) -> list[str]:
    """Names of the trained parameters read on two stages or more (the record's
    ``shared_parameters``) that a plan with optimizer sharding on keeps whole
    (:data:`UNSHARDED_WHY`; checked in the dry-run,
    ``tests/test_pipeline_tied_unstaged.py``), sorted; ``[]`` without sharding or without
    such parameters. :func:`layer_costs_of` prices every parameter read in two blocks or more
    so on a stage of two stages or more (an upper bound on its memory where the cut keeps its
    readers on one stage)."""
    if not optimizer_sharding or not shared:
        return []
    return sorted(p["name"] for p in shared)


def weight_dependent(graph: OpGraph) -> set[str]:
    """Names of the tensors computed (transitively) from a trained parameter.

    Only these cross a stage boundary as Send/Receive: a tensor computed from the data inputs and
    constants alone (mindformers' causal mask, RoPE tables) is computed again on the stage that
    reads it (observed in the dry-run on mindformers LLaMA: only the hidden state is sent)."""
    out: set[str] = {n for n, t in graph.tensors.items()
                     if t.kind == "parameter" and t.requires_grad}
    size = -1
    while size != len(out):            # one pass when graph.ops is in topological order
        size = len(out)
        for op in graph.ops:
            if any(name in out for name in op.inputs):
                out.update(op.outputs)
    return out


def reshape_borders(graph: OpGraph, block: dict[int, int], sent: set) -> set[int]:
    """Indices of the blocks after which no pipeline stage may end: a tensor computed from
    trained weights (``sent``) crosses that border as the output of a Reshape (a Dense on a 3-D
    input ends with one: Swin's PatchMerging). MindSpore refuses such a stage border ("Reshape
    op can't be a border", ``PipelineTransformer::CreateOpInfo``,
    ``frontend/parallel/pipeline/pipeline_transformer.cc``). ``block``: op id → block index."""
    out: set[int] = set()
    for op in graph.ops:
        if op.type != "Reshape":
            continue
        for name in op.outputs:
            if name in sent:
                last = max((block[c] for c in graph.tensors[name].consumers),
                           default=block[op.id])
                out.update(range(block[op.id], last))
    return out


def boundary_tensors(sol: StageSolution, _known=None, _sent: set | None = None
                     ) -> list[tuple[str, tuple[int, int], float]]:
    """Tensors crossing from one block to the next: ``(name, (producer block, consumer block),
    per-device bytes)`` in graph order; each tensor once, at its first later consumer, with its
    producer's chosen layout; only tensors computed from trained weights
    (:func:`weight_dependent`)."""
    graph = sol.graph
    block, cost_of = _blocks_and_costs(sol, _known)
    sent = _sent if _sent is not None else weight_dependent(graph)
    out = []
    for op in graph.ops:
        for k, name in enumerate(op.outputs):
            if name not in sent:
                continue
            later = sorted({block[c] for c in graph.tensors[name].consumers
                            if block[c] > block[op.id]})
            if later:
                t = graph.tensors[name]
                sl = slice_shape(t.shape, cost_of[op.id].out_layouts[k])
                out.append((name, (block[op.id], later[0]),
                            float(prod(sl) * DTYPE_BYTES.get(t.dtype, 4))))
    return out


def recomputed_on_later_stages(sol: StageSolution, stage_of_block: list[int]
                               ) -> dict[str, list[int]]:
    """Decisions whose forward MindSpore runs again on a later stage: ``{decision name: [stages]}``
    (sorted).

    A tensor not computed from trained weights (:func:`weight_dependent`: mindformers' causal
    mask) is not sent between stages; the stage that reads it computes it again, with the
    operators that produce it from the data inputs (their forward collectives too: observed in
    the dry-run on mindformers LLaMA, the mask's AllGather appears on both stages). Found by
    walking back from every operator of stage ``s`` through producers on earlier stages whose
    outputs are all weight-independent.
    """
    return _recomputed_walk(sol, stage_of_block)[0]


def recomputed_reads(sol: StageSolution, stage_of_block: list[int]) -> dict[str, list[int]]:
    """Tensors that a later stage computes again and reads: ``{tensor name: [stages]}``
    (sorted), the outputs of :func:`recomputed_on_later_stages`'s operators read on those
    stages. A forward redistribution of such a tensor that the plan counts once for all its
    readers (recorded on the first reader, on an earlier stage) runs again on each of these
    stages: MindSpore gathers the recomputed copy where it is read (observed in the dry-run,
    ``tests/test_heldout_patterns.py``: a causal mask built in ``construct``, read by every
    block, gathered once on each of 2 stages)."""
    return _recomputed_walk(sol, stage_of_block)[1]


def _recomputed_walk(sol: StageSolution, stage_of_block: list[int]
                     ) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    graph = sol.graph
    _, block = block_of_ops(graph)
    sent = weight_dependent(graph)
    stage = {op.id: stage_of_block[block[op.id]] for op in graph.ops}
    name_of = {op: sol.variables[vi].name
               for op, (vi, _) in variable_index(sol.variables).items()}
    out: dict[str, set[int]] = {}
    reads: dict[str, set[int]] = {}
    for s in sorted(set(stage_of_block))[1:]:
        todo = [op.id for op in graph.ops if stage[op.id] == s]
        seen: set[int] = set()
        while todo:
            for name in graph.ops[todo.pop()].inputs:
                q = graph.tensors[name].producer
                if (q is None or stage[q] >= s
                        or any(o in sent for o in graph.ops[q].outputs)):
                    continue
                reads.setdefault(name, set()).add(s)
                if q in seen:
                    continue
                seen.add(q)
                todo.append(q)
                out.setdefault(name_of[q], set()).add(s)
    return ({k: sorted(v) for k, v in sorted(out.items())},
            {k: sorted(v) for k, v in sorted(reads.items())})


def boundary_slice(sol: StageSolution, boundary: int) -> tuple[list[int], str]:
    """Per-device slice shape and dtype of the (first) tensor computed from trained weights that
    crosses from block ``boundary`` to a later block, under the producer's layout: what MindSpore
    Sends between stages (the first of :func:`crossing_slices`)."""
    return crossing_slices(sol, boundary)[0]


def crossing_slices(sol: StageSolution, boundary: int) -> list[tuple[list[int], str]]:
    """Per-device slice shape and dtype of every tensor computed from trained weights
    (:func:`weight_dependent`) that a stage ending after block ``boundary`` passes on: produced
    in a block up to ``boundary``, read by a later one, under the producer's layout. First the
    main one (the first such output of block ``boundary`` itself, the activation), then the
    side tensors in graph order (mindformers' MoE layers pass the router's auxiliary loss
    ``extra_loss`` from layer to layer beside the hidden state). MindSpore inserts a Send and
    a Receive for each (checked in the dry-run: ``tests/test_pipeline_side_tensor.py``).

    Raises:
        PipelinePlanningError: block ``boundary`` passes no tensor to a later block.
    """
    graph = sol.graph
    _, block = block_of_ops(graph)
    cost_of = chosen_costs(sol.variables, sol.choice)
    sent = weight_dependent(graph)
    main, side = None, []
    for op in graph.ops:
        if block[op.id] > boundary:
            continue
        for k, name in enumerate(op.outputs):
            t = graph.tensors[name]
            if name in sent and any(block[c] > boundary for c in t.consumers):
                item = (list(slice_shape(t.shape, cost_of[op.id].out_layouts[k])), t.dtype)
                if main is None and block[op.id] == boundary:
                    main = item
                else:
                    side.append(item)
    if main is None:
        raise PipelinePlanningError(f"block {boundary} passes no tensor to a later block")
    return [main] + side


__all__ = ["StageSolution", "block_of_ops", "chain_blocks", "data_flow_order", "side_container", "boundary_slice", "boundary_tensors", "crossing_slices", "not_before_inputs", "reshape_borders",
           "bytes_per_element", "layer_costs_of", "links_of", "optimizer_sharded",
           "unsharded_across_stages", "UNSHARDED_WHY",
           "parameter_slices", "recomputed_on_later_stages", "recomputed_reads", "shared_parameters", "slice_shape", "solve_stage",
           "stage_cost_model", "weight_dependent"]
