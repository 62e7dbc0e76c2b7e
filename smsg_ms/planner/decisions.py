"""Reading a solved problem back into a :class:`~smsg_ms.plan.Plan`: one
:class:`~smsg_ms.plan.OpDecision` per variable (strategy, seconds and their breakdown,
collectives, runner-up, symbolic cost), the redistributions the choice needs, the totals and the
pure data-parallel baseline.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np

from ..cost.operators import reshape
from ..cost.operators.reshape import edge_destination
from ..cost.redistribution_reshape import unify_through_reshape
from ..graph.model import OpGraph
from ..graph.morph_regions import MORPH_ATTR
from ..plan import OpDecision, Plan
from ..search.problem import SearchProblem
from . import merge_comm
from .data_inputs import (accepted_dataset, dataset_cuts, input_reads, read_collectives,
                          read_seconds)
from .twin_gradients import merge_shared_syncs
from .zeros_like import zeros_like_collectives
from .loss import loss_reads
from .variables import (PlanVariable, chosen_costs, op_signature, planned_edges, strategy_key,
                        tensor_names, variable_index)

INF = math.inf
#: operators whose bprop gives ``dout`` itself to each input (of its shape); ``x += y`` is an
#: InplaceAddExt (mindcv Res2Net's ``out += identity``, checked in the dry-run)
DOUT_TO_EACH_INPUT = frozenset({"Add", "AddExt", "InplaceAddExt"})


def data_parallel_choice(problem: SearchProblem, variables: list[PlanVariable], graph: OpGraph,
                         devices: int) -> list[int] | None:
    """Option index per variable of the pure data-parallel plan (MindSpore's batch parallel:
    every non-parameter input cut ``devices``-way on its first dimension, weights replicated),
    or the variable's first option where that strategy is not available; ``None`` when a data
    input's first dimension does not divide by ``devices`` (no pure data-parallel plan)."""
    for name in graph.inputs:
        shape = graph.tensors[name].shape
        if shape and isinstance(shape[0], int) and shape[0] % devices:
            return None
    choice = []
    # (id of a shared option list, signature id): the signature fixes the first call's input
    # shapes and kinds, so the wanted strategy too
    found_in: dict[tuple, int | None] = {}
    for var in variables:
        key = (id(var.options), var.sig_id)
        found = found_in.get(key, -1) if var.sig_id >= 0 else -1
        if found == -1:
            want = tuple(
                tuple([1] * len(graph.tensors[t].shape)) if graph.tensors[t].kind in
                ("parameter", "constant") or not graph.tensors[t].shape
                else tuple([devices] + [1] * (len(graph.tensors[t].shape) - 1))
                for t in var.ops[0].inputs)
            found = found_in[key] = next((i for i, calls in enumerate(var.options)
                                          if strategy_key(calls[0].strategy) == want), None)
        choice.append(0 if found is None else found)
    return choice


def _runner_up_record(var: PlanVariable, runner: tuple) -> dict:
    """A decision's ``runner_up``: the option's in_strategy (``None`` where not written back),
    its ``out_strategy`` when it sets one, and its ``extra_seconds``."""
    best = var.options[runner[0]][0]
    out = {"strategy": [list(s) for s in best.strategy] if var.written_back else None,
           "extra_seconds": runner[1]}
    if var.written_back and best.out_strategy:
        out["out_strategy"] = [list(s) for s in best.out_strategy]
    return out


def _breakdown(model, calls) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for c in calls:
        for k, v in model.breakdown(c).items():
            total[k] += float(v)
    return dict(total)


def _own_dispatch(graph, devices: int) -> dict[int, list[dict]]:
    """``{AlltoAllV op id: plan collectives}``: the calls of a mindformers MoE layer's own
    ``AlltoAllV`` primitives, which the compiled graph holds whatever the expert-parallel degree
    (:func:`smsg_ms.cost.expert_dispatch.network_dispatch_calls`; ``own_group``: keyed by
    ``check`` without a group size). Empty for a graph without such layers."""
    from ..cost.expert_dispatch import expert_layout, network_dispatch_calls

    layout = expert_layout(graph, 1)
    out: dict[int, list[dict]] = {}
    if layout is None:
        return out
    for call in network_dispatch_calls(layout, devices):
        op = graph.ops[call.pop("op")]
        out.setdefault(op.id, []).append(dict(call, tensor=op.inputs[0], own_group=True))
    return out


def _collectives(calls, var: PlanVariable, positions: dict) -> list[dict]:
    """The calls' collectives as plan entries, tensor names translated to ``var``'s own
    (``var.rename.get(name, name)``, read off the positions of ``name`` among the shared
    operators' tensor names; ``positions`` caches them per shared operator list)."""
    out = []
    own = None
    for c in calls:
        for coll in c.collectives:
            name = coll.tensor
            if var.shared_from is not None:
                key = id(var.shared_from)
                if key not in positions:
                    at: dict[str, list[int]] = {}
                    for i, n in enumerate(tensor_names(var.shared_from)):
                        at.setdefault(n, []).insert(0, i)   # last position first
                    positions[key] = at
                own = own or tensor_names(var.ops)
                name = next((own[i] for i in positions[key].get(name, ()) if own[i] != name),
                            name)
            out.append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                        "bytes": float(coll.full_bytes), "tensor": name})
    return out


def _symbolic(model, graph: OpGraph, var: PlanVariable, strategy, cache: dict) -> str | None:
    """Key (:meth:`Plan.symbolic_key`) of :func:`smsg_ms.cost.explain.describe` of the
    variable's first call; ``cache`` maps (structural signature, strategy) to ``(key,
    description)`` so identical layers are described once."""
    from ..cost.explain import describe

    op = var.ops[0]
    sig = var.sig_id if var.signature is not None else op_signature(graph, op)
    key = (sig, tuple(tuple(c) for c in strategy))
    if key not in cache:
        desc = describe(model, graph, op, strategy)
        cache[key] = (None, None) if desc is None else (Plan.symbolic_key(desc), desc)
    return cache[key][0]


def _redistributions(graph: OpGraph, model, variables: list[PlanVariable], choice: list[int],
                     where: dict, reads: list, accepted: dict):
    """Collectives of the redistributions the chosen plan needs, by consumer variable index
    (``where``: :func:`~smsg_ms.planner.variables.variable_index`; ``reads``: the loss's
    :func:`~smsg_ms.planner.loss.loss_reads`; ``accepted``: ``{data input: its cuts}`` of
    :func:`_dataset_strategy`)."""
    out: dict[int, list[dict]] = defaultdict(list)
    seen = set()
    made: dict[tuple, list] = {}
    gathers: dict[tuple, bool] = {}

    def reshape_gathers(op, layout, side) -> bool:    # memoised by what it reads
        if op.type not in reshape.TYPES:
            return False
        key = (layout, side, graph.tensors[op.inputs[0]].shape,
               graph.tensors[op.outputs[0]].shape)
        got = gathers.get(key)
        if got is None:
            got = gathers[key] = model.reshape_gathers(op, layout, side)
        return got

    edges = list(planned_edges(graph, variables))
    # a Reshape MindSpore redistributes through in one go (D11): its two edges are replaced by
    # the one redistribution between the expanded layouts
    through = _through_reshapes(graph, model, variables, choice, where, edges)
    for rid, (src, dst, colls) in through.items():
        op = graph.ops[rid]
        key = (op.inputs[0], "through", model.normalized(src), model.normalized(dst))
        if key in seen:
            continue
        seen.add(key)
        for coll in colls:
            out[where[rid][0]].append({"kind": coll.kind, "group": int(coll.group),
                                       "phase": coll.phase, "bytes": float(coll.full_bytes),
                                       "tensor": op.inputs[0], "redistribution": True})
    # per (source option list, call, option, output; destination ...): the layouts, whether
    # equal, and a small id of their normal forms (shared option lists share signatures, so
    # operator shapes, so the D9 check)
    structural: dict[tuple, tuple] = {}
    pair_ids: dict[tuple, int] = {}
    # (tensor, pair) → its collectives and first AllGather; the variables of its other edges
    chains: dict[tuple, tuple] = {}
    more_edges: dict[tuple, list[int]] = defaultdict(list)
    for src_id, src_t, dst_id, tname, idx in edges:
        if src_id in through or dst_id in through:
            continue
        (u, uc), (v, vc) = where[src_id], where[dst_id]
        U, V = variables[u], variables[v]
        out_idx = graph.ops[src_id].outputs.index(src_t)
        skey = (id(U.options), U.sig_id, uc, choice[u], out_idx,
                id(V.options), V.sig_id, vc, choice[v], idx)
        got = structural.get(skey)
        if got is None:
            src = U.options[choice[u]][uc].out_layouts[out_idx]
            dst = V.options[choice[v]][vc].in_layouts[idx]
            dst = edge_destination(graph, graph.ops[src_id], graph.ops[dst_id], tname, src, dst,
                                   model.devices, gathered=reshape_gathers)  # D9
            pair = (model.normalized(src), model.normalized(dst))
            got = structural[skey] = (src, dst, src == dst,
                                      pair_ids.setdefault(pair, len(pair_ids)), pair)
        src, dst, equal, pair_id, pair = got
        if equal:
            continue
        # MindSpore's CSE merges equal redistributions of one tensor: count each once; and
        # the bprops of two inputs of one Add redistributed alike, each ``dout`` redistributed
        # back: the backward part once per such Add (Qwen3-MoE's residual, docs/networks.md)
        key = (tname, pair_id)
        tensor = graph.tensors[tname]
        add_key = (dst_id, pair_id, tuple(tensor.shape))
        if key in seen:
            # another consumer edge: a chain of its own, whose backward MergeComm may not share
            if not (graph.ops[dst_id].type in DOUT_TO_EACH_INPUT and add_key in seen):
                more_edges[key].append(v)
            continue
        seen.add(key)
        again = graph.ops[dst_id].type in DOUT_TO_EACH_INPUT and add_key in seen
        seen.add(add_key)
        # the collectives depend on shape, dtype and normal forms only (names are set below)
        same = (tuple(tensor.shape), tensor.dtype, model.carries_gradient(tname)) + pair
        if same not in made:
            made[same] = model.redistribution(tensor, src, dst)
        chains[key] = (made[same], merge_comm.first_gather(graph, tname, made[same]))
        for coll in made[same]:
            if again and coll.phase == "backward":
                continue
            out[v].append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                           "bytes": float(coll.full_bytes), "tensor": tname,
                           "redistribution": True})
    _more_edges_backward(out, more_edges, chains)
    for first, others in input_reads(graph, where):
        for read in [first] + others:
            colls = read_collectives(model, first, read, variables, choice,
                                     accepted[first.tensor.name])
            key = (read.tensor.name, tuple((c.kind, c.group, c.phase, c.full_bytes)
                                           for c in colls))
            if not colls or key in seen:     # MindSpore's CSE: one per distinct redistribution
                continue
            seen.add(key)
            for coll in colls:
                out[read.variable].append({"kind": coll.kind, "group": int(coll.group),
                                           "phase": coll.phase, "bytes": float(coll.full_bytes),
                                           "tensor": read.tensor.name, "redistribution": True})
    for v, merged, colls in zeros_like_collectives(graph, model, variables, choice, where):
        for coll in colls:
            out[v].append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                           "bytes": float(coll.full_bytes), "tensor": coll.tensor,
                           "redistribution": True, "merged_as": merged})
    for read in reads:
        for coll in read.collectives(model, read.source(variables, choice[read.variable])):
            out[read.variable].append({"kind": coll.kind, "group": int(coll.group),
                                       "phase": coll.phase, "bytes": float(coll.full_bytes),
                                       "tensor": read.tensor.name, "redistribution": True,
                                       "loss": True})
    return out


def _more_edges_backward(out: dict, more_edges: dict, chains: dict) -> None:
    """Add to ``out`` the backward collectives of the consumer edges after the first of each
    redistributed (tensor, layout pair): MindSpore inserts a chain per edge and its
    ``MergeComm`` pass shares only the first AllGather of chains whose AllGathers of one source
    all agree (:mod:`.merge_comm`); CSE after autodiff merges the forward chains, not the
    backward ones. Kept at one backward part (not checked against a compile): a tensor without
    a source operator (a weight; a data input has no gradient) and a chain that does not start
    with an AllGather (an AlltoAll, ``enable_alltoall``)."""
    merged = merge_comm.merged_sources(g for _, g in chains.values() if g is not None)
    for key, readers in more_edges.items():
        colls, gather = chains[key]
        if gather is None:
            continue
        extra = merge_comm.another_edge_backward(colls, gather.source in merged)
        for v in readers:
            for coll in extra:
                out[v].append({"kind": coll.kind, "group": int(coll.group),
                               "phase": coll.phase, "bytes": float(coll.full_bytes),
                               "tensor": key[0], "redistribution": True})


def _through_reshapes(graph: OpGraph, model, variables: list[PlanVariable], choice: list[int],
                      where: dict, edges: list) -> dict[int, tuple]:
    """The Reshapes of the chosen plan that MindSpore redistributes through in one go:
    ``{Reshape op id: (producer's layout, consumer's layout, collectives)}``.

    MindSpore gives a Reshape its producer's output layout and its consumer's input layout and
    redistributes between them once, on the expanded shape and device matrix
    (``ReshapeInfo``, ``ReshapeLayoutTransfer::UnifyDeviceArrangementAndTensorShape`` in
    ``tensor_layout/reshape_layout_transfer.cc``; D11 in docs/known-differences.md): a strided
    merge is three 2-way AllGathers where the two redistributions through the Reshape's option
    are a 2-way and a 4-way one. Taken here (``CostModel.reshape_redistribution``) for a
    Reshape whose input comes from one planned operator and whose output goes to one, neither
    a Reshape, when both layouts expand
    (:func:`~smsg_ms.cost.redistribution_reshape.unify_through_reshape`); the others keep the
    pair of edges (``edges``: :func:`~smsg_ms.planner.variables.planned_edges` as a list). A
    Reshape in a ``Morph`` body is not one: the body runs on the slices the Morph's own layouts
    give, with no redistribution of its own (:mod:`smsg_ms.graph.morph_regions`).

    A Reshape read by several planned operators (none a Reshape) takes one output layout:
    ``InitReshapeOpInfo`` sets it to the layout ``FindNextLayout`` returns ("if reshape's
    output connect to several primitive, return the first layout found",
    ``frontend/parallel/step_parallel.cc``), the consumer's its users' walk meets first: the
    last consumer in graph order (seen in the dry-run: a hidden state reshaped to ``(T, h)``
    and read by a LayerNorm cut ``(2, 1)`` and by the residual Add cut ``(4, 1)`` after it is
    laid out ``(4, 1)`` whichever of the two reads it so, then gathered for the LayerNorm:
    the built-in ``gpt``, docs/networks.md). The other consumers are redistributed from that
    layout, one redistribution per distinct layout (MindSpore's CSE)."""
    into, out_of = defaultdict(list), defaultdict(list)
    for edge in edges:
        into[edge[2]].append(edge)
        out_of[edge[0]].append(edge)
    found, made = {}, {}
    for rid, ins in into.items():
        op = graph.ops[rid]
        outs = out_of.get(rid, [])
        readers = {e[2] for e in outs}
        if op.type not in reshape.TYPES or len(ins) != 1 or not outs \
                or len(readers) != len(outs) \
                or set(graph.tensors[op.outputs[0]].consumers) != readers \
                or MORPH_ATTR in op.attrs:
            continue
        src_id, src_t = ins[0][0], ins[0][1]
        if ({graph.ops[src_id].type} | {graph.ops[i].type for i in readers}) \
                & set(reshape.TYPES):
            continue
        (u, uc) = where[src_id]
        producer = variables[u].options[choice[u]][uc]
        src = producer.out_layouts[graph.ops[src_id].outputs.index(src_t)]

        def need(edge):
            (v, vc) = where[edge[2]]
            return variables[v].options[choice[v]][vc].in_layouts[edge[4]]

        last = max(outs, key=lambda e: (e[2], e[4]))      # FindNextLayout's first found
        dst = need(last)
        t_in, t_out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        # the collectives depend on shapes, dtype, layouts and the gradient only: memoised
        key = (tuple(t_in.shape), tuple(t_out.shape), t_in.dtype,
               model.carries_gradient(op.inputs[0]), src, dst)
        if key not in made:
            made[key] = None if unify_through_reshape(t_in.shape, src, t_out.shape, dst) is None \
                else model.reshape_redistribution(op, src, dst)
        if made[key] is None:
            continue
        colls = list(made[key])
        done = {model.normalized(dst)}
        for edge in sorted(outs, key=lambda e: (e[2], e[4])):
            other = model.normalized(need(edge))
            if other not in done:               # from the Reshape's layout, once per layout
                done.add(other)
                colls += model.redistribution(t_out, model.normalized(dst), other)
        found[rid] = (src, dst, colls)
    return found


def _incident_edges(problem: SearchProblem) -> list[list]:
    """Edges touching each variable (index = variable)."""
    out: list[list] = [[] for _ in problem.variables]
    for e in problem.edges:
        out[e.u].append(e)
        out[e.v].append(e)
    return out


def _cached_runner_up(problem: SearchProblem, choice: list[int], vi: int, edges: list,
                      cache: dict):
    """:func:`_runner_up`, memoised by what it reads: the identity of the variable's cost array
    and, per incident edge in order, the identity of its matrix, the side and the other end's
    option (identical layers share these arrays, so they share the answer)."""
    key = (id(problem.variables[vi].cost), choice[vi],
           tuple([(id(e.cost), True, choice[e.v]) if e.u == vi else
                  (id(e.cost), False, choice[e.u]) for e in edges]))
    got = cache.get(key, cache)       # the cache itself: not there yet (None is an answer)
    if got is cache:
        got = cache[key] = _runner_up(problem, choice, vi, edges)
    return got


def _runner_up(problem: SearchProblem, choice: list[int], vi: int, edges=None):
    """Best other option of variable ``vi`` with every other variable fixed: (index, extra s).
    ``edges``: the edges touching ``vi`` (default: all of the problem's)."""
    var = problem.variables[vi]
    if len(var.keys) < 2:
        return None
    local = var.cost.copy()
    for e in (problem.edges if edges is None else edges):
        if e.u == vi:
            local = local + e.cost[:, choice[e.v]]
        elif e.v == vi:
            local = local + e.cost[choice[e.u], :]
    base = local[choice[vi]]
    others = local.copy()
    others[choice[vi]] = INF
    best_i = int(np.argmin(others))      # the first of the cheapest other options
    best = others[best_i]
    if not math.isfinite(best):
        return None
    return best_i, float(best - base)


#: the part of a dotted name before its first all-digit component that is not the last one
_BLOCK_HEAD = re.compile(r"((?:[^.]*\.)*?)[0-9]+\.")


def _block_of(name: str) -> str | None:
    """``layers.3.attention.wq`` → ``layers.*``; ``None`` without an index before the last
    component."""
    m = _BLOCK_HEAD.match(name)
    return None if m is None else m.group(1) + "*"


def _dataset_strategy(graph: OpGraph, variables: list[PlanVariable], choice: list[int],
                      where: dict):
    """Cuts of each data input (MindSpore ``dataset_strategy``): its first reader's, with one cut
    dimension at most (:func:`~smsg_ms.planner.data_inputs.dataset_cuts`), one shard number
    across the inputs (:func:`~smsg_ms.planner.data_inputs.accepted_dataset`); replicated for an
    input no planned operator reads (``where``:
    :func:`~smsg_ms.planner.variables.variable_index`)."""
    firsts = {first.tensor.name: first for first, _ in input_reads(graph, where)}
    out = []
    for name in graph.inputs:
        first = firsts.get(name)
        out.append(list(dataset_cuts(first.layout(variables, choice[first.variable]).cuts))
                   if first is not None else [1] * len(graph.tensors[name].shape))
    return [list(c) for c in accepted_dataset(out)]


def plan_from_solution(graph: OpGraph, model, problem: SearchProblem,
                       variables: list[PlanVariable], solution, *, network: str,
                       network_options: dict) -> Plan:
    """The (unsealed) plan of ``solution`` (a :class:`smsg_ms.search.problem.Solution` of
    ``problem``, which :func:`smsg_ms.planner.problem.build_problem` made of ``graph`` under
    ``model`` with ``variables``): a decision per variable, its redistributions, the totals
    (seconds per device and step, memory bytes per device) and the pure data-parallel
    baseline. ``write_back`` is left at its default (:mod:`smsg_ms.planner.write_back`)."""
    choice = solution.choice
    where = variable_index(variables)
    reads = loss_reads(graph, model.devices, where)
    decisions = []
    totals: dict[str, float] = defaultdict(float)
    incident = _incident_edges(problem)
    symbolic_cache: dict = {}
    # (id of a shared option list, option) → breakdown, notes, symbolic key
    per_option: dict[tuple, tuple] = {}
    runners: dict[tuple, tuple | None] = {}
    positions: dict[int, dict] = {}
    for vi, var in enumerate(variables):
        calls = var.options[choice[vi]]
        key = (id(var.options), choice[vi])
        if key not in per_option:
            per_option[key] = (
                _breakdown(model, calls), sorted({n for c in calls for n in c.notes}),
                _symbolic(model, graph, var, calls[0].strategy, symbolic_cache)
                if var.written_back else None)
        breakdown, notes, symbolic = per_option[key]
        bd = dict(breakdown)
        for k, v in bd.items():
            totals[k] += v
        runner = _cached_runner_up(problem, choice, vi, incident[vi], runners)
        strategy = [list(s) for s in calls[0].strategy] if var.written_back else None
        decisions.append(OpDecision(
            name=var.name, op_type=var.ops[0].type, strategy=strategy,
            shardable=var.written_back, seconds=float(problem.variables[vi].cost[choice[vi]]),
            breakdown=bd, collectives=_collectives(calls, var, positions),
            runner_up=None if runner is None else _runner_up_record(var, runner),
            block=_block_of(var.name), notes=list(notes), symbolic=symbolic))
    symbolic_table = {key: desc for key, desc in symbolic_cache.values() if key is not None}
    dataset = _dataset_strategy(graph, variables, choice, where)
    accepted = dict(zip(graph.inputs, dataset))
    for vi, coll in _redistributions(graph, model, variables, choice, where, reads,
                                     accepted).items():
        decisions[vi].collectives.extend(coll)
    for op_id, calls in _own_dispatch(graph, model.devices).items():
        if op_id in where:
            decisions[where[op_id][0]].collectives.extend(calls)
    # weights with equal gradient expressions: one AllReduce after MindSpore's CSE
    merge_shared_syncs(graph, chosen_costs(variables, choice), model.normalized, decisions, where)
    into_loss = 0.0
    for read in reads:
        extra = read.seconds(model, read.source(variables, choice[read.variable]))
        if extra:
            bd = decisions[read.variable].breakdown
            bd["redistribution_into_loss"] = bd.get("redistribution_into_loss", 0.0) + extra
            into_loss += extra
    from_data = 0.0
    for first, _ in input_reads(graph, where):   # the first reader's split of its data input
        extra = read_seconds(model, first, first, variables, choice[first.variable],
                             choice[first.variable], accepted[first.tensor.name])
        if extra:
            bd = decisions[first.variable].breakdown
            bd["redistribution"] = bd.get("redistribution", 0.0) + extra
            from_data += extra
    edge_seconds = 0.0
    for e in problem.edges:     # u < v in graph order: charged to the later primitive
        extra = float(e.cost[choice[e.u], choice[e.v]])
        if extra:
            edge_seconds += extra
            decisions[e.v].breakdown["redistribution"] = (
                decisions[e.v].breakdown.get("redistribution", 0.0) + extra)
            decisions[e.v].seconds += extra
    totals["redistribution_seconds"] = edge_seconds + into_loss + from_data
    totals["step_seconds"] = float(solution.cost)
    totals["memory_bytes"] = float(solution.memory)
    if solution.bound is not None:   # the search stopped at its work limit (search/effort.py)
        totals["lower_bound_seconds"] = float(solution.bound)
        totals["optimality_gap"] = float(solution.gap)
    dp = data_parallel_choice(problem, variables, graph, model.devices)
    dp_cost = problem.total(dp) if dp is not None else math.inf
    totals["data_parallel_step_seconds"] = dp_cost if math.isfinite(dp_cost) else None
    totals["data_parallel_memory_bytes"] = problem.memory(dp) if dp is not None else None
    totals["relative_to_data_parallel"] = (float(solution.cost) / dp_cost
                                           if math.isfinite(dp_cost) and dp_cost > 0 else None)
    return Plan(network=network, fingerprint=graph.fingerprint(), devices=model.devices,
                options=network_options,
                input_shapes=[list(graph.tensors[n].shape) for n in graph.inputs],
                hardware=model.hardware.name, decisions=decisions,
                totals={k: (round(v, 15) if isinstance(v, float) else v)
                        for k, v in sorted(totals.items())},
                dataset_strategy=dataset,
                symbolic=dict(sorted(symbolic_table.items())),
                enable_alltoall=bool(getattr(model, "enable_alltoall", False)),
                built_for=graph.built_for,
                out_strategies=dict(sorted(
                    (var.name, [list(x) for x in var.options[choice[vi]][0].out_strategy])
                    for vi, var in enumerate(variables)
                    if var.written_back and var.options[choice[vi]][0].out_strategy)))


__all__ = ["data_parallel_choice", "plan_from_solution"]
