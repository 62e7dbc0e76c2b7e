"""The operator-level search problem: variables (:mod:`.variables`) with their option costs and
memory, and edges carrying redistribution seconds.

Edges carry the redistribution between a producer's output layout and the layout its consumer
needs (forward and backward collectives, :meth:`CostModel.redistribution`). A parameter read by
several variables must have one layout (MindSpore refuses "multiple users, but the TensorInfo
are different"): pairs of options that disagree on it cost ``inf``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np

from ..cost.operators.reshape import through_reshape_block
from ..graph.capture import CUSTOM_BPROP_ATTR
from ..graph.model import OpGraph
from ..search.problem import Edge, SearchProblem, Variable
from .data_inputs import input_reads, read_seconds
from .loss import loss_reads
from .variables import PlanVariable, group_variables, planned_edges, variable_index

INF = math.inf


def build_problem(graph: OpGraph, model, *, reuse: bool = True, split_calls=frozenset(),
                  signatures: dict | None = None,
                  variables: list[PlanVariable] | None = None
                  ) -> tuple[SearchProblem, list[PlanVariable]]:
    """The search problem of ``graph`` under ``model`` (a :class:`smsg_ms.cost.model.CostModel`).

    Option cost = Σ over the variable's calls of ``model.seconds(OpCost)`` (seconds); option
    memory = Σ of the calls' memory bytes; edges = redistribution seconds.

    ``reuse`` (default) computes options, option costs and edge matrices once per structural
    signature (:func:`op_signature`; identical layers share them) and redistribution seconds
    once per (shape, dtype, normalised source, normalised destination) layouts. This is exact:
    the cost model reads nothing of an operator but its signature and tensor names (names only
    label collectives, renamed through ``PlanVariable.rename``), and a redistribution depends
    only on
    the normal forms of its layouts (:func:`smsg_ms.cost.redistribution.redistribute` starts by
    normalising). Shared edge matrices are read-only. With ``reuse``, the block of distinct
    (source, destination) layouts of an edge is costed at once by
    :func:`smsg_ms.cost.redistribution_fast.gather_seconds_matrix` where it applies (power-of-two
    device counts, ``enable_alltoall`` off; bit-for-bit the reference's seconds). ``reuse=False``
    is the plain computation (one option list per operator, one matrix per edge, every pair by
    the reference :func:`~smsg_ms.cost.redistribution.redistribute`), kept as the reference.
    ``split_calls``: primitive paths whose calls get one variable each (scoring another
    planner's per-call strategies, :func:`smsg_ms.compare.score.score`); a plan cannot write
    such a choice back. ``signatures``: :func:`op_signatures` of ``graph`` computed before
    (the same for every device count). ``variables``: :func:`group_variables` of ``graph``
    computed before, possibly cut to some options by :func:`restrict_options` (scoring a given
    assignment prices only the options it keeps; every kept entry is the whole problem's entry
    bit for bit, as each entry depends on its own pair of options alone).
    """
    if variables is None:
        variables = group_variables(graph, model, reuse, split_calls, signatures)
    var_of_op = variable_index(variables)
    problem_vars = []
    unary: dict[int, tuple] = {}
    for var in variables:
        got = unary.get(var.sig_id) if reuse else None
        if got is None:
            got = (np.array([sum(model.seconds(c) for c in calls) for calls in var.options]),
                   np.array([sum(sum(float(v) for v in c.memory.values()) for c in calls)
                             for calls in var.options]))
            if reuse:   # shared by the variables of one signature: read-only
                for a in got:
                    a.flags.writeable = False
            unary[var.sig_id] = got
        problem_vars.append(Variable(var.name, [op.id for op in var.ops], var.keys, *got))

    pair: dict[tuple[int, int], list[np.ndarray]] = {}
    sums: dict[tuple, np.ndarray] = {}      # _pair_sum's memo (identical layers, same terms)
    matrices: dict[tuple, np.ndarray] = {}
    redist_cache: dict = {}

    def redist_seconds(tensor, src, dst) -> float:
        if src == dst:
            return 0.0
        key = (tensor.shape, tensor.dtype, model.carries_gradient(tensor.name), src, dst)
        if key not in redist_cache:
            redist_cache[key] = model.seconds(model.redistribution(tensor, src, dst))
        return redist_cache[key]

    def edge_matrix(tensor, U, uc, out_idx, V, vc, idx) -> np.ndarray:
        key = (U.sig_id, uc, out_idx, V.sig_id, vc, idx, tensor.shape, tensor.dtype,
               model.carries_gradient(tensor.name))
        if reuse and key in matrices:
            return matrices[key]
        if reuse:
            norm = model.normalized
            src, src_of = _distinct([norm(ou[uc].out_layouts[out_idx]) for ou in U.options])
            dst, dst_of = _distinct([norm(ov[vc].in_layouts[idx]) for ov in V.options])
            small = _redistribution_block(model, tensor, src, dst)
        else:
            src, src_of = _distinct([ou[uc].out_layouts[out_idx] for ou in U.options])
            dst, dst_of = _distinct([ov[vc].in_layouts[idx] for ov in V.options])
            small = np.array([[redist_seconds(tensor, a, b) for b in dst] for a in src])
        small = through_reshape_block(model, U.ops[uc], V.ops[vc], tensor, src, dst, small)
        m = small[np.ix_(src_of, dst_of)]
        if reuse:
            m.flags.writeable = False
            matrices[key] = m
        return m

    for src_id, src_t, dst_id, tname, idx in planned_edges(graph, variables):
        tensor = graph.tensors[tname]
        (u, uc), (v, vc) = var_of_op[src_id], var_of_op[dst_id]
        out_idx = graph.ops[src_id].outputs.index(src_t)
        m = edge_matrix(tensor, variables[u], uc, out_idx, variables[v], vc, idx)
        _add_pair(pair, problem_vars, u, v, m)

    # a Cell with its own bprop: one cut of the tensors its primitives share
    for u, v, m in _custom_bprop_pairs(graph, variables):
        _add_pair(pair, problem_vars, u, v, m)

    # the training wrapper's loss reads each network output batch-parallel
    for read in loss_reads(graph, model.devices, var_of_op):
        extra = np.array([read.seconds(model, read.source(variables, o))
                          for o in range(len(variables[read.variable].options))])
        problem_vars[read.variable].cost = problem_vars[read.variable].cost + extra

    # every reader of a data input: from the data-set layout its first reader fixes
    for first, others in input_reads(graph, var_of_op):
        u = first.variable
        options = range(len(variables[u].options))
        extra = np.array([read_seconds(model, first, first, variables, o, o) for o in options])
        if extra.any():
            problem_vars[u].cost = problem_vars[u].cost + extra
        for read in others:
            m = np.array([[read_seconds(model, first, read, variables, o, ov)
                           for ov in range(len(variables[read.variable].options))]
                          for o in options])
            _add_pair(pair, problem_vars, u, read.variable, m)

    # one layout per parameter across its users: equal rank groups along every dimension
    users: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for op in graph.ops:
        for idx, tname in enumerate(op.inputs):
            if graph.tensors[tname].kind == "parameter":
                vi, ci = var_of_op[op.id]
                users[tname].append((vi, ci, idx))
    for tname, uses in users.items():
        for (u, uc, ui), (v, vc, vi_) in zip(uses, uses[1:]):
            if u == v:
                continue
            U, V = variables[u], variables[v]
            key = ("parameter", U.sig_id, uc, ui, V.sig_id, vc, vi_)
            m = matrices.get(key) if reuse else None
            if m is None:
                # MindSpore compares the users' rank groups per dimension, not only their
                # cuts (TensorLayout.dim_groups: IsSameTensorLayout)
                a, a_of = _distinct([ou[uc].in_layouts[ui].dim_groups() for ou in U.options])
                b, b_of = _distinct([ov[vc].in_layouts[vi_].dim_groups() for ov in V.options])
                small = np.array([[0.0 if x == y else INF for y in b] for x in a])
                m = small[np.ix_(a_of, b_of)]
                if reuse:
                    m.flags.writeable = False
                    matrices[key] = m
            _add_pair(pair, problem_vars, u, v, m)

    edges = [Edge(u, v, _pair_sum(terms, sums)) for (u, v), terms in sorted(pair.items())]
    problem = SearchProblem(problem_vars, edges)
    problem.check()
    return problem, variables


def restrict_options(variables: list[PlanVariable], keep: dict[int, list[int]]
                     ) -> list[PlanVariable]:
    """``variables`` with variable ``vi`` cut to its options ``keep[vi]`` (indices into its
    ``options``, in that order); the others unchanged. Variables that shared one option list
    and keep the same indices share the cut list and a new signature id, so
    :func:`build_problem`'s reuse stays exact.

    Raises:
        IndexError: an index in ``keep`` is not an option of its variable.
    """
    cut: dict[tuple, tuple] = {}
    next_id = max((v.sig_id for v in variables), default=-1) + 1
    out = []
    for vi, var in enumerate(variables):
        kept = keep.get(vi)
        if kept is None:
            out.append(var)
            continue
        key = (id(var.options), var.sig_id, tuple(kept))
        if key not in cut:
            cut[key] = ([var.options[o] for o in kept], [var.keys[o] for o in kept],
                        next_id + len(cut))
        options, keys, sig_id = cut[key]
        out.append(replace(var, options=options, keys=keys, sig_id=sig_id))
    return out


def _custom_bprop_pairs(graph: OpGraph, variables: list) -> list:
    """``(u, v, matrix)`` constraints between the variables of one Cell with its own ``bprop``
    (mindformers' ``_LogSoftmax``, ``_NLLLoss``) whose first outputs have one shape: 0 where the
    two cut it alike, ``inf`` elsewhere. The hand-written backward
    reuses the forward primitives on the forward's tensors with no redistribution of its own;
    with a class-cut OneHot beside a replicated Sub, the pipelined compile of mindformers' LLaMA
    fails shape inference in that backward ("For 'Sub', input1.shape and input2.shape need to
    broadcast", dry-run, 2 stages x 4 devices), while a plan cutting all of them (2, 4) compiles
    with no mismatch."""
    cells: dict[str, list[int]] = defaultdict(list)
    for vi, var in enumerate(variables):
        op = var.ops[0]
        if var.written_back and op.attrs.get(CUSTOM_BPROP_ATTR) and op.outputs:
            cells[(op.prim_path or "").rpartition(".")[0]].append(vi)
    out = []
    for members in cells.values():
        for a, u in enumerate(members):
            for v in members[a + 1:]:
                su = graph.tensors[variables[u].ops[0].outputs[0]].shape
                sv = graph.tensors[variables[v].ops[0].outputs[0]].shape
                if su != sv:
                    continue
                dims = [i for i in range(len(su)) if su[i] != 1]
                cu = [o[0].out_layouts[0].cuts for o in variables[u].options]
                cv = [o[0].out_layouts[0].cuts for o in variables[v].options]
                m = np.array([[0.0 if all(x[i] == y[i] for i in dims) else INF for y in cv]
                              for x in cu])
                out.append((u, v, m))
    return out


def _redistribution_block(model, tensor, src: list, dst: list) -> np.ndarray:
    """``model.redistribution_seconds(tensor, a, b)`` for ``a`` in ``src``, ``b`` in ``dst``
    (normalised layouts): the numpy fast path where it applies (power-of-two devices, AllGather
    redistribution; backward part only for a tensor that carries a gradient; equal to the
    reference, tests/test_redistribution_fast.py), else the reference one pair at a time."""
    from ..cost.redistribution_fast import gather_seconds_matrix
    from ..graph.model import DTYPE_BYTES

    if not model.enable_alltoall:
        hw = model.hardware
        m = gather_seconds_matrix(tuple(tensor.shape), DTYPE_BYTES.get(tensor.dtype, 4), src, dst,
                                  hw, model.carries_gradient(tensor.name))
        if m is not None:
            if _agrees_with_reference(model, tensor, src, dst, m):
                return m
    return np.array([[model.redistribution_seconds(tensor, a, b) for b in dst] for a in src])


#: entries of each fast redistribution block checked against the reference
SPOT_CHECKS = 8


def _agrees_with_reference(model, tensor, src: list, dst: list, m: np.ndarray) -> bool:
    """Spot check of a fast block: :data:`SPOT_CHECKS` entries spread evenly over it must equal
    the reference exactly; otherwise warn (the reference's semantics changed without the fast
    path) and let the caller use the reference."""
    import warnings

    for k in np.unique(np.linspace(0, m.size - 1, SPOT_CHECKS).astype(np.intp)):
        i, j = divmod(int(k), len(dst))
        want = model.redistribution_seconds(tensor, src[i], dst[j])
        if m[i, j] != want:
            warnings.warn(f"fast redistribution seconds of {tensor.name} ({src[i]} -> {dst[j]}): "
                          f"{m[i, j]!r} != reference {want!r}; using the reference",
                          RuntimeWarning, stacklevel=3)
            return False
    return True


def _distinct(items: list) -> tuple[list, np.ndarray]:
    """Distinct items in first-seen order, and the index of each item among them."""
    index: dict = {}
    of = np.array([index.setdefault(x, len(index)) for x in items], dtype=np.intp)
    return list(index), of


def _add_pair(pair, problem_vars, u: int, v: int, m: np.ndarray) -> None:
    """Record ``m`` (``u``'s options × ``v``'s) as a term of the edge ``(min(u, v), max(u,
    v))``, with whether it is to be transposed; an edge inside one variable goes on its
    diagonal at once."""
    if u == v:  # an edge inside one variable: only matching options occur together
        problem_vars[u].cost = problem_vars[u].cost + np.diag(m)
        return
    if u > v:
        pair.setdefault((v, u), []).append((m, True))
    else:
        pair.setdefault((u, v), []).append((m, False))


def _pair_sum(terms: list, sums: dict) -> np.ndarray:
    """``((t0 + t1) + t2) + …`` over the ``(matrix, transposed)`` terms in the order they came
    (the sum a running total gives, bit for bit); memoised in ``sums`` by the matrices'
    identities, which stay valid while ``terms`` hold them: the edges of identical layers share
    their (read-only) matrices, so their sum is computed once and shared read-only too. One
    term is returned as it is (a transposed view)."""
    def term(t):
        return t[0].T if t[1] else t[0]

    if len(terms) == 1:
        return term(terms[0])
    key = tuple((id(m), flip) for m, flip in terms)
    got = sums.get(key)
    if got is None:
        got = term(terms[0]) + term(terms[1])
        for t in terms[2:]:
            got = got + term(t)
        got.flags.writeable = False
        sums[key] = got
    return got


__all__ = ["SPOT_CHECKS", "build_problem", "restrict_options"]
