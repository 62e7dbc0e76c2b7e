"""The planner: captured graph → cost model → search problem → exact search → :class:`Plan`.

Variables of the search (:mod:`smsg_ms.search.problem`):

* one per primitive instance that can be sharded: all its calls take one strategy, because
  ``Primitive.shard`` sets one ``in_strategy`` per instance (``shared/docs/design.md``); its
  options are the strategies valid for every call, its cost the sum over the calls;
* one per operator that cannot be sharded individually (functional calls, ``Reshape``): MindSpore
  gives it its layout; its options are the layouts the cost model says it can take.

Edges carry the redistribution between a producer's output layout and the layout its consumer
needs (forward and backward collectives, :meth:`CostModel.redistribution`). A parameter read by
several variables must have one layout (MindSpore refuses "multiple users, but the TensorInfo are
different"): pairs of options that disagree on it cost ``inf``.
"""
from __future__ import annotations

import gc
import math
import re
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .devices import check_device_count
from .graph.capture import CUSTOM_BPROP_ATTR
from .graph.model import OpGraph, OpNode, sorted_json
from .plan import OpDecision, Plan
from .search.problem import Edge, SearchProblem, Variable

#: Primitives whose ``shard()`` MindSpore refuses: planned per call, never written back.
NOT_WRITTEN_BACK = {"Reshape"}
#: Operators the cost model prices by its own rule (no family declaration), written back.
OWN_RULES = {"OneHot"}
INF = math.inf


class PlanningError(ValueError):
    """The network cannot be planned as asked (device count, memory, an operator with no option)."""


@dataclass
class _Var:
    name: str
    ops: list[OpNode]
    options: list[list]       # per option: list of OpCost, one per call
    keys: list
    written_back: bool
    #: structural signature (identical signatures have identical options and edge matrices)
    signature: tuple | None = None
    #: operators of the variable whose options this one shares (``None``: its own options)
    shared_from: list[OpNode] | None = None
    #: a Cast MindSpore does not treat as parallel: its output keeps its producer's layout
    transparent: bool = False
    #: small integer naming ``signature`` (equal signatures, equal ids): a cheap cache key
    sig_id: int = -1

    @property
    def rename(self) -> dict:
        """Tensor names of the variable whose options are shared → this variable's own names
        (empty for a variable with its own options); built on first use."""
        got = self.__dict__.get("_rename")
        if got is None:
            got = {} if self.shared_from is None else {
                a: b for a, b in zip(_names(self.shared_from), _names(self.ops)) if a != b}
            self.__dict__["_rename"] = got
        return got


#: ``json.dumps(x, sort_keys=True, default=str)`` without building an encoder per call
_attrs_json = sorted_json


def _tensor_side(graph: OpGraph, name: str) -> tuple:
    t = graph.tensors[name]
    return (tuple(t.shape), t.dtype, t.kind, bool(t.requires_grad))


def op_signature(graph: OpGraph, op: OpNode, sides: dict | None = None) -> tuple:
    """Everything :meth:`CostModel.options` reads of ``op``: type, attributes, shardability,
    (shape, dtype, kind, requires_grad) of each input and output and which inputs are the same
    tensor. Two operators with equal signatures get equal option lists, up to tensor names.
    ``sides``: a cache of those per-tensor tuples by tensor name, shared between calls on one
    graph (a tensor is an output once and an input again)."""
    if sides is None:
        sides = {}
    get = sides.get
    ins = tuple([get(n) or sides.setdefault(n, _tensor_side(graph, n)) for n in op.inputs])
    outs = tuple([get(n) or sides.setdefault(n, _tensor_side(graph, n)) for n in op.outputs])
    return (op.type, _attrs_json(op.attrs), op.shardable, ins, outs,
            tuple([op.inputs.index(n) for n in op.inputs]))


def _gradient_flags(model, ops: list[OpNode]) -> tuple:
    """Which outputs carry a gradient: equal signatures must agree (backward collectives)."""
    return tuple(model.carries_gradient(t) for op in ops for t in op.outputs)


def _names(ops: list[OpNode]) -> list[str]:
    return [n for op in ops for n in op.inputs + op.outputs]


def op_signatures(graph: OpGraph) -> dict[int, tuple]:
    """:func:`op_signature` of every operator of ``graph`` by id (to share between the builds
    of one graph on several device counts: ``build_problem(signatures=...)``)."""
    sides: dict = {}
    return {op.id: op_signature(graph, op, sides) for op in graph.ops}


def _group_variables(graph: OpGraph, model, reuse: bool = False,
                     split_calls=frozenset(), signatures: dict | None = None) -> list[_Var]:
    """Variables in topological order. With ``reuse``, a variable whose signature was seen
    before shares that variable's option list (the options are computed once per signature);
    its ``rename`` maps the shared options' tensor names to its own (built on first use). The
    calls of a primitive path in ``split_calls`` become one variable each, named by
    :attr:`OpNode.label`. ``signatures``: :func:`op_signatures` of ``graph``, when known."""
    by_path: dict[str, list[OpNode]] = defaultdict(list)
    order: list[tuple[int, str | int]] = []
    for op in graph.ops:
        if op.prim_path and op.type not in NOT_WRITTEN_BACK and not _transparent_cast(graph, op):
            key = op.label if op.prim_path in split_calls else op.prim_path
            if key not in by_path:
                order.append((op.id, key))
            by_path[key].append(op)
        else:
            order.append((op.id, op.id))
    variables = []
    seen: dict[tuple, _Var] = {}
    reps: dict[int, _Var] = {}      # variable index → the variable whose options it shares
    if signatures is None:
        signatures = op_signatures(graph)

    def shared(name, ops, signature) -> bool:
        rep = seen.get(signature) if reuse else None
        if rep is None:
            return False
        reps[len(variables)] = rep
        variables.append(_Var(name, ops, rep.options, rep.keys, rep.written_back, signature,
                              rep.ops))
        return True

    for _, key in order:
        if isinstance(key, str):
            ops = by_path[key]
            signature = (("primitive",) + tuple([signatures[op.id] for op in ops])
                         + (_gradient_flags(model, ops),))
            if shared(key, ops, signature):
                continue
            per_call = [{_strategy_key(c.strategy): c for c in model.options(op)} for op in ops]
            common = [k for k in per_call[0] if all(k in m for m in per_call[1:])]
            if common:
                # no cost family: the option is MindSpore's own default, so leave it to MindSpore
                # (the fallback's in_strategy may not even be well-formed, e.g. OneHot's)
                # a Cast's strategy changes nothing (see _transparent_cast): not written back
                known = all((model.spec(op) is not None or op.type in OWN_RULES)
                            and op.type != "Cast" for op in ops)
                variables.append(_Var(key, ops, [[m[k] for m in per_call] for k in common],
                                      common, known, signature))
                seen[signature] = variables[-1]
                continue
            # Calls of different ranks (a Cast used on 2-D and 3-D tensors): no one strategy
            # fits all, so the primitive is left to MindSpore's batch-parallel default.
            for op in ops:
                cost = model.default(op)
                cost.notes.append(f"primitive called at {len(ops)} sites whose shapes admit no "
                                  "common strategy: left to MindSpore's default")
                variables.append(_Var(op.label, [op], [[cost]],
                                      [(_strategy_key(cost.strategy), tuple(cost.out_layouts))],
                                      False, ("default", op.id)))
        elif _transparent_cast(graph, graph.ops[key]):
            op = graph.ops[key]
            opts = model.passthrough_options(op)
            variables.append(_Var(op.label, [op], [[c] for c in opts],
                                  [(_strategy_key(c.strategy), tuple(c.out_layouts))
                                   for c in opts], False, ("cast", op.id), transparent=True))
        else:
            op = graph.ops[key]
            signature = ("operator", signatures[op.id],
                         _gradient_flags(model, [op]))
            if shared(op.label, [op], signature):
                continue
            opts = model.options(op)
            if not opts:
                raise PlanningError(f"operator {op.label} ({op.type}) has no valid strategy on "
                                    f"{model.devices} devices")
            keys = [(_strategy_key(c.strategy), tuple(c.out_layouts)) for c in opts]
            variables.append(_Var(op.label, [op], [[c] for c in opts], keys, False, signature))
            seen[signature] = variables[-1]
    ids: dict[tuple, int] = {}
    for vi, var in enumerate(variables):   # a sharing variable has its (earlier) rep's signature
        rep = reps.get(vi)
        var.sig_id = rep.sig_id if rep is not None else ids.setdefault(var.signature, len(ids))
    return variables


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


def _transparent_cast(graph: OpGraph, op: OpNode) -> bool:
    """A Cast is no parallel operator to MindSpore 2.10 (``step_parallel_utils.cc``,
    ``IsParallelCareNode``: a Cast without ``OperatorInfo``): its output keeps its input's
    layout, and a ``shard()`` on it changes nothing (dry-run: ReLU (8,1) → Cast → ReLU (1,8)
    inserts the same float16 collectives with no, a (1,8) or an (8,1) Cast strategy), so it is
    planned as a pass-through and never written back; a Cast of a parameter gives the
    parameter the layout its consumer takes (``CostModel._side``)."""
    return op.type == "Cast"


def _edges(graph: OpGraph, variables: list[_Var]):
    """``graph.iter_edges()`` with transparent Casts looked through: ``(source op, source
    tensor, consumer op, tensor, input index)``. An edge out of a transparent Cast starts at the
    Cast's first non-transparent producer (whose layout the tensor carries; the redistribution
    moves the Cast's output, with its dtype); an edge into one costs nothing, and so does one
    out of a Cast of a parameter."""
    through = {op.id for var in variables if var.transparent for op in var.ops
               if graph.tensors[op.inputs[0]].producer is not None}
    # a Cast of a parameter: the consumer reads the parameter in its own layout (CostModel._side)
    of_parameter = {op.id for var in variables if var.transparent for op in var.ops
                    if graph.tensors[op.inputs[0]].kind == "parameter"}
    for src_id, dst_id, tname, idx in graph.iter_edges():
        if dst_id in through or src_id in of_parameter:
            continue
        src_t = tname
        while src_id in through:
            src_t = graph.ops[src_id].inputs[0]
            src_id = graph.tensors[src_t].producer
        yield src_id, src_t, dst_id, tname, idx


def _strategy_key(strategy) -> tuple:
    """``strategy`` as a tuple of tuples of ints; memoised by the strategy tuple itself (one
    hash instead of a conversion per option and build)."""
    if not strategy:
        return ()
    try:
        return _int_strategy(strategy)
    except TypeError:       # a part given as a list: not hashable, convert directly
        return tuple(tuple(int(x) for x in s) for s in strategy)


@lru_cache(maxsize=1 << 17)
def _int_strategy(strategy: tuple) -> tuple:
    return tuple(tuple(int(x) for x in s) for s in strategy)


def build_problem(graph: OpGraph, model, *, reuse: bool = True, split_calls=frozenset(),
                  signatures: dict | None = None) -> tuple[SearchProblem, list[_Var]]:
    """The search problem of ``graph`` under ``model`` (a :class:`smsg_ms.cost.model.CostModel`).

    Option cost = Σ over the variable's calls of ``model.seconds(OpCost)`` (seconds); option
    memory = Σ of the calls' memory bytes; edges = redistribution seconds.

    ``reuse`` (default) computes options, option costs and edge matrices once per structural
    signature (:func:`op_signature`; identical layers share them) and redistribution seconds
    once per (shape, dtype, normalised source, normalised destination) layouts. This is exact:
    the cost model reads nothing of an operator but its signature and tensor names (names only
    label collectives, renamed through ``_Var.rename``), and a redistribution depends only on
    the normal forms of its layouts (:func:`smsg_ms.cost.redistribution.redistribute` starts by
    normalising). Shared edge matrices are read-only. With ``reuse``, the block of distinct
    (source, destination) layouts of an edge is costed at once by
    :func:`smsg_ms.cost.redistribution.gather_seconds_matrix` where it applies (power-of-two
    device counts, ``enable_alltoall`` off; bit-for-bit the reference's seconds). ``reuse=False``
    is the plain computation (one option list per operator, one matrix per edge, every pair by
    the reference :func:`~smsg_ms.cost.redistribution.redistribute`), kept as the reference.
    ``split_calls``: primitive paths whose calls get one variable each (scoring another
    planner's per-call strategies, :func:`smsg_ms.compare.score.score`); a plan cannot write
    such a choice back. ``signatures``: :func:`op_signatures` of ``graph`` computed before
    (the same for every device count).
    """
    variables = _group_variables(graph, model, reuse, split_calls, signatures)
    var_of_op: dict[int, tuple[int, int]] = {}
    for vi, var in enumerate(variables):
        for ci, op in enumerate(var.ops):
            var_of_op[op.id] = (vi, ci)
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
        small = _through_reshape(model, U.ops[uc], V.ops[vc], tensor, src, dst, small)
        m = small[np.ix_(src_of, dst_of)]
        if reuse:
            m.flags.writeable = False
            matrices[key] = m
        return m

    for src_id, src_t, dst_id, tname, idx in _edges(graph, variables):
        tensor = graph.tensors[tname]
        (u, uc), (v, vc) = var_of_op[src_id], var_of_op[dst_id]
        out_idx = graph.ops[src_id].outputs.index(src_t)
        m = edge_matrix(tensor, variables[u], uc, out_idx, variables[v], vc, idx)
        _add_pair(pair, problem_vars, u, v, m)

    # a Cell with its own bprop: one cut of the tensors its primitives share
    for u, v, m in _custom_bprop_pairs(graph, variables):
        _add_pair(pair, problem_vars, u, v, m)

    # the training wrapper's loss reads each network output batch-parallel
    for tensor, u, uc, out_idx, need in _loss_reads(graph, model, var_of_op):
        extra = np.array([_loss_seconds(model, tensor, calls[uc].out_layouts[out_idx], need)
                          for calls in variables[u].options])
        problem_vars[u].cost = problem_vars[u].cost + extra

    # one layout per parameter across its users
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
                a, a_of = _distinct([ou[uc].in_layouts[ui].cuts for ou in U.options])
                b, b_of = _distinct([ov[vc].in_layouts[vi_].cuts for ov in V.options])
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


def loss_layout(tensor, devices: int):
    """Layout the training wrapper's loss needs on a network output.

    The loss cell's primitives carry no strategy, so semi-auto parallel gives them MindSpore's
    batch-parallel default (``operator_info.cc``, ``GenerateBatchParallelStrategy``): the first
    dimension cut ``gcd(devices, size)``-way (:func:`smsg_ms.cost.model.batch_parallel_cut`),
    the tensor replicated when that is 1. A producer
    with another layout pays the redistribution into it (a vocabulary-parallel LM head pays an
    AllGather of the logits forward and a ReduceScatter backward).
    """
    from .cost.layout import TensorLayout, operator_layout
    from .cost.model import batch_parallel_cut

    shape = tensor.shape
    cut = batch_parallel_cut(devices, [shape[0]]) if shape else 1
    if cut == devices:
        return TensorLayout.from_cuts((cut,) + (1,) * (len(shape) - 1), devices)
    if cut > 1:  # an operator's layout: replicas on the right of the device matrix
        return operator_layout([cut] + [1] * (len(shape) - 1), list(range(len(shape))), devices)
    return TensorLayout.replicated(len(shape), devices)


def _output_producers(graph: OpGraph, var_of_op):
    """``(tensor, variable, call, output index)`` of every network output made by an operator."""
    for tname in dict.fromkeys(graph.outputs):
        t = graph.tensors[tname]
        if t.producer is None:
            continue
        u, uc = var_of_op[t.producer]
        yield tname, u, uc, graph.ops[t.producer].outputs.index(tname)


def _loss_reads(graph: OpGraph, model, var_of_op):
    """What the training wrapper's loss reads: per network output made by an operator,
    ``(tensor, variable, call, output index, layout the loss needs)`` (:func:`loss_layout`)."""
    for tname, u, uc, out_idx in _output_producers(graph, var_of_op):
        tensor = graph.tensors[tname]
        yield tensor, u, uc, out_idx, loss_layout(tensor, model.devices)


def _loss_seconds(model, tensor, src, need) -> float:
    """Seconds of the redistribution of ``tensor`` from a producer's layout ``src`` into the
    layout ``need`` the loss reads (the problem's unary term and the plan's breakdown)."""
    return model.redistribution_seconds(tensor, model.normalized(src), model.normalized(need))


def _redistribution_block(model, tensor, src: list, dst: list) -> np.ndarray:
    """``model.redistribution_seconds(tensor, a, b)`` for ``a`` in ``src``, ``b`` in ``dst``
    (normalised layouts): the numpy fast path where it applies (power-of-two devices, AllGather
    redistribution; backward part only for a tensor that carries a gradient; equal to the
    reference, tests/test_redistribution_fast.py), else the reference one pair at a time."""
    from .cost.redistribution import gather_seconds_matrix
    from .graph.model import DTYPE_BYTES

    if not model.enable_alltoall:
        hw = model.hardware
        m = gather_seconds_matrix(tuple(tensor.shape), DTYPE_BYTES.get(tensor.dtype, 4), src, dst,
                                  hw.bandwidth, hw.latency, model.carries_gradient(tensor.name))
        if m is not None and _agrees_with_reference(model, tensor, src, dst, m):
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


def _through_reshape(model, producer, consumer, tensor, src: list, dst: list,
                     block: np.ndarray) -> np.ndarray:
    """``block`` (seconds, ``src`` × ``dst``) with MindSpore's whole-tensor gather at a Reshape
    a layout cannot pass (``CostModel.reshape_gathers``, D9): a row whose source cannot enter
    the consumer Reshape costs its redistribution to the replicated layout whatever the
    destination; a column whose destination cannot leave the producer Reshape costs, per row,
    the gather of the Reshape's output to the replicated layout."""
    from .cost.layout import TensorLayout

    rows = [i for i, a in enumerate(src) if model.reshape_gathers(consumer, a, "input")]
    cols = [j for j, b in enumerate(dst) if model.reshape_gathers(producer, b, "output")]
    if not rows and not cols:
        return block
    block = np.array(block, dtype=float)
    whole = TensorLayout.replicated(len(tensor.shape), model.devices)
    for i in rows:
        block[i, :] = model.redistribution_seconds(tensor, src[i], whole)
    for j in cols:
        block[:, j] = [model.redistribution_seconds(tensor, a, whole) for a in src]
    return block


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


def data_parallel_choice(problem: SearchProblem, variables: list[_Var], graph: OpGraph,
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
                                          if _strategy_key(calls[0].strategy) == want), None)
        choice.append(0 if found is None else found)
    return choice


def _breakdown(model, calls) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for c in calls:
        for k, v in model.breakdown(c).items():
            total[k] += float(v)
    return dict(total)


def _collectives(calls, var: _Var, positions: dict) -> list[dict]:
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
                    for i, n in enumerate(_names(var.shared_from)):
                        at.setdefault(n, []).insert(0, i)   # last position first
                    positions[key] = at
                own = own or _names(var.ops)
                name = next((own[i] for i in positions[key].get(name, ()) if own[i] != name),
                            name)
            out.append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                        "bytes": float(coll.full_bytes), "tensor": name})
    return out


#: Up to this many devices the planner proposes every strategy, replicated ones included; above
#: it only strategies that use every device (MindSpore's ``fully_use_devices``), which keeps the
#: option count, and the redistribution matrices, tractable.
EXHAUSTIVE_UP_TO = 16
#: :func:`plan_graph` builds its problem with ``build_problem(reuse=REUSE)``; ``False`` is the
#: plain reference computation (same plan, slower).
REUSE = True


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector (restored on exit, as it was). Planning allocates
    many small, acyclic objects (reference counting frees them); each full collection the
    allocations trigger re-walks every live object, the captured graph included, so at 80
    layers the collector took ~15% of :func:`plan_graph` (``scripts/bench_plan.py``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plan_graph(graph: OpGraph, devices: int, *, hardware="ascend910b",
               memory_gib: float | None = None, options: dict | None = None,
               network: str | None = None, repeated=None, progress: bool | None = None,
               exhaustive: bool | None = None, choice: list[int] | None = None,
               write_back: str = "auto", model=None, built: tuple | None = None) -> Plan:
    """Plan ``graph`` on ``devices`` devices.

    Args:
        graph: captured forward graph (global shapes).
        devices: devices of the (single) stage; 1, 2, 4 or a multiple of 8.
        hardware: preset name or :class:`smsg_ms.cost.hardware.Hardware`.
        memory_gib: per-device memory limit in GiB (default: the preset's memory).
        options: network options recorded in the plan.
        network: network name recorded in the plan (default ``graph.name``).
        repeated: groups of identical blocks (variable indices) for the search; found from the
            graph when ``None``.
        exhaustive: propose replicated strategies too (default: up to
            :data:`EXHAUSTIVE_UP_TO` devices).
        choice: option index per search variable to use instead of searching (a pipeline stage
            plan solved under per-stage memory rows, :mod:`smsg_ms.pipeline_planner`).
        write_back: ``auto``, ``shard`` or ``propagate``: :attr:`Plan.write_back`, chosen by
            :func:`smsg_ms.integration.writeback.choose_write_back`.
        model: the :class:`~smsg_ms.cost.model.CostModel` of ``graph`` on ``devices`` that
            this call would make (same hardware, ``fully_use_devices = not exhaustive``), to
            reuse its option cache (a pipeline's stage plan).
        built: ``build_problem(graph, model)`` already made with that ``model``, to reuse.

    Raises:
        PlanningError: device count MindSpore refuses, operator without options, a ``model``
            of another graph, device count or strategy set.
        smsg_ms.search.NoFeasiblePlan: nothing fits in memory.
    """
    check_device_count(devices)
    with _collector_paused():
        return _plan_graph(graph, devices, hardware, memory_gib, options, network, repeated,
                           progress, exhaustive, choice, write_back, model, built)


def _plan_graph(graph, devices, hardware, memory_gib, options, network, repeated, progress,
                exhaustive, choice, write_back, model=None, built=None) -> Plan:
    """:func:`plan_graph`'s work (arguments as there, the device count checked)."""
    from .cost.hardware import get_hardware
    from .cost.model import CostModel
    from .search import solve

    hw = get_hardware(hardware)
    if exhaustive is None:
        exhaustive = devices <= EXHAUSTIVE_UP_TO
    if model is None:
        model = CostModel(graph, devices, hw, fully_use_devices=not exhaustive)
        built = None
    elif (model.graph is not graph or model.devices != devices or model.hardware != hw
          or model.fully_use_devices != (not exhaustive)):
        raise PlanningError("plan_graph(model=...) must be the cost model of this graph on "
                            f"{devices} devices with fully_use_devices={not exhaustive}")
    problem, variables = built if built is not None else build_problem(graph, model,
                                                                       reuse=REUSE)
    limit = (memory_gib * 2**30) if memory_gib is not None else hw.memory
    if repeated is None:
        repeated = _repeated_variable_groups(graph, problem, variables)
    if choice is None:
        solution = solve(problem, memory_limit=limit, repeated=repeated, progress=progress)
    else:
        from .search.problem import Solution
        if len(choice) != len(problem.variables):
            raise PlanningError(f"choice has {len(choice)} entries, the problem "
                                f"{len(problem.variables)} variables")
        solution = Solution(list(choice), problem.total(choice), problem.memory(choice))
    choice = solution.choice

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
            runner_up=None if runner is None else {
                "strategy": [list(s) for s in var.options[runner[0]][0].strategy]
                if var.written_back else None, "extra_seconds": runner[1]},
            block=_block_of(var.name), notes=list(notes), symbolic=symbolic))
    symbolic_table = {key: desc for key, desc in symbolic_cache.values() if key is not None}
    for vi, coll in _redistributions(graph, model, variables, choice).items():
        decisions[vi].collectives.extend(coll)
    loss_seconds = 0.0
    var_of_op = {op.id: (vi, ci) for vi, var in enumerate(variables)
                 for ci, op in enumerate(var.ops)}
    for tensor, u, uc, out_idx, need in _loss_reads(graph, model, var_of_op):
        extra = _loss_seconds(model, tensor,
                              variables[u].options[choice[u]][uc].out_layouts[out_idx], need)
        if extra:
            bd = decisions[u].breakdown
            bd["redistribution_into_loss"] = bd.get("redistribution_into_loss", 0.0) + extra
            loss_seconds += extra
    edge_seconds = 0.0
    for e in problem.edges:     # u < v in graph order: charged to the later primitive
        extra = float(e.cost[choice[e.u], choice[e.v]])
        if extra:
            edge_seconds += extra
            decisions[e.v].breakdown["redistribution"] = (
                decisions[e.v].breakdown.get("redistribution", 0.0) + extra)
            decisions[e.v].seconds += extra
    totals["redistribution_seconds"] = edge_seconds + loss_seconds
    totals["step_seconds"] = float(solution.cost)
    totals["memory_bytes"] = float(solution.memory)
    dp = data_parallel_choice(problem, variables, graph, devices)
    dp_cost = problem.total(dp) if dp is not None else math.inf
    totals["data_parallel_step_seconds"] = dp_cost if math.isfinite(dp_cost) else None
    totals["data_parallel_memory_bytes"] = problem.memory(dp) if dp is not None else None
    totals["relative_to_data_parallel"] = (float(solution.cost) / dp_cost
                                           if math.isfinite(dp_cost) and dp_cost > 0 else None)
    dataset = _dataset_strategy(graph, variables, choice)
    plan = Plan(network=network or graph.name, fingerprint=graph.fingerprint(), devices=devices,
                options=dict(options or {}),
                input_shapes=[list(graph.tensors[n].shape) for n in graph.inputs],
                hardware=hw.name, decisions=decisions,
                totals={k: (round(v, 15) if isinstance(v, float) else v)
                        for k, v in sorted(totals.items())},
                dataset_strategy=dataset, symbolic=dict(sorted(symbolic_table.items())))
    from .integration.writeback import set_write_back
    return set_write_back(plan, write_back).seal()


def _symbolic(model, graph: OpGraph, var: _Var, strategy, cache: dict) -> str | None:
    """Key (:meth:`Plan.symbolic_key`) of :func:`smsg_ms.cost.explain.describe` of the
    variable's first call; ``cache`` maps (structural signature, strategy) to ``(key,
    description)`` so identical layers are described once."""
    from .cost.explain import describe

    op = var.ops[0]
    sig = var.sig_id if var.signature is not None else op_signature(graph, op)
    key = (sig, tuple(tuple(c) for c in strategy))
    if key not in cache:
        desc = describe(model, graph, op, strategy)
        cache[key] = (None, None) if desc is None else (Plan.symbolic_key(desc), desc)
    return cache[key][0]


def _redistributions(graph: OpGraph, model, variables: list[_Var], choice: list[int]):
    """Collectives of the redistributions the chosen plan needs, by consumer variable index."""
    from .cost.layout import TensorLayout

    where = {op.id: (vi, ci) for vi, var in enumerate(variables) for ci, op in enumerate(var.ops)}
    out: dict[int, list[dict]] = defaultdict(list)
    seen = set()
    made: dict[tuple, list] = {}
    gathers: dict[tuple, bool] = {}

    def reshape_gathers(op, layout, side) -> bool:    # memoised by what it reads
        if op.type != "Reshape":
            return False
        key = (layout, side, graph.tensors[op.inputs[0]].shape,
               graph.tensors[op.outputs[0]].shape)
        got = gathers.get(key)
        if got is None:
            got = gathers[key] = model.reshape_gathers(op, layout, side)
        return got

    # per (source option list, call, option, output; destination ...): the layouts, whether
    # equal, and a small id of their normal forms (shared option lists share signatures, so
    # operator shapes, so the D9 check)
    structural: dict[tuple, tuple] = {}
    pair_ids: dict[tuple, int] = {}
    for src_id, src_t, dst_id, tname, idx in _edges(graph, variables):
        (u, uc), (v, vc) = where[src_id], where[dst_id]
        U, V = variables[u], variables[v]
        out_idx = graph.ops[src_id].outputs.index(src_t)
        skey = (id(U.options), U.sig_id, uc, choice[u], out_idx,
                id(V.options), V.sig_id, vc, choice[v], idx)
        got = structural.get(skey)
        if got is None:
            src = U.options[choice[u]][uc].out_layouts[out_idx]
            dst = V.options[choice[v]][vc].in_layouts[idx]
            if reshape_gathers(graph.ops[dst_id], src, "input") or \
                    reshape_gathers(graph.ops[src_id], dst, "output"):  # D9: gather it all
                dst = TensorLayout.replicated(len(graph.tensors[tname].shape), model.devices)
            pair = (model.normalized(src), model.normalized(dst))
            got = structural[skey] = (src, dst, src == dst,
                                      pair_ids.setdefault(pair, len(pair_ids)), pair)
        src, dst, equal, pair_id, pair = got
        # MindSpore's CSE merges equal redistributions of one tensor: count each once
        key = (tname, pair_id)
        if equal or key in seen:
            continue
        seen.add(key)
        tensor = graph.tensors[tname]
        # the collectives depend on shape, dtype and normal forms only (names are set below)
        same = (tuple(tensor.shape), tensor.dtype, model.carries_gradient(tname)) + pair
        if same not in made:
            made[same] = model.redistribution(tensor, src, dst)
        for coll in made[same]:
            out[v].append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                           "bytes": float(coll.full_bytes), "tensor": tname,
                           "redistribution": True})
    for tensor, u, uc, out_idx, need in _loss_reads(graph, model, where):
        src = variables[u].options[choice[u]][uc].out_layouts[out_idx]
        for coll in model.redistribution(tensor, src, need):
            out[u].append({"kind": coll.kind, "group": int(coll.group), "phase": coll.phase,
                           "bytes": float(coll.full_bytes), "tensor": tensor.name,
                           "redistribution": True, "loss": True})
    return out


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


def _dataset_strategy(graph: OpGraph, variables: list[_Var], choice: list[int]):
    """Cuts of each data input as its first consumer needs them (MindSpore ``dataset_strategy``)."""
    out = []
    for name in graph.inputs:
        t = graph.tensors[name]
        cuts = None
        for cid in t.consumers:
            for vi, var in enumerate(variables):
                for ci, op in enumerate(var.ops):
                    if op.id == cid:
                        idx = op.inputs.index(name)
                        cuts = list(var.options[choice[vi]][ci].in_layouts[idx].cuts)
                        break
                if cuts is not None:
                    break
            if cuts is not None:
                break
        out.append(cuts if cuts is not None else [1] * len(t.shape))
    return out


def _structural_id(graph: OpGraph, var: _Var):
    """The variable's signature id where its signature is structural; for a transparent Cast or
    a primitive left to MindSpore's default (signatures naming the operator), its operators'
    :func:`op_signature` instead."""
    if var.signature and var.signature[0] in ("primitive", "operator"):
        return var.sig_id
    return tuple(op_signature(graph, op) for op in var.ops)


def _repeated_variable_groups(graph: OpGraph, problem: SearchProblem, variables=None):
    """Groups of identical repeated blocks as lists of variable indices, for the search's
    repeated squaring. The search checks the hint (it reuses a block's tables only where their
    matrices are equal), so a hint only changes the speed, never the plan.

    Without ``variables``: the blocks of :func:`smsg_ms.graph.blocks.group_blocks` (equal
    structural hashes). With ``variables`` (:func:`build_problem`'s, aligned with
    ``problem.variables``): the blocks of :func:`~smsg_ms.graph.blocks.find_blocks` grouped by
    container and their variables' signature ids, which build_problem has already computed
    (no per-operator hash)."""
    from .graph.blocks import find_blocks, group_blocks

    var_of_op = {op_id: vi for vi, var in enumerate(problem.variables) for op_id in var.op_ids}

    def block_vars(block) -> list[int]:
        out: list[int] = []
        seen: set[int] = set()
        for op_id in block.op_ids:
            vi = var_of_op.get(op_id)
            if vi is not None and vi not in seen:
                seen.add(vi)
                out.append(vi)
        return out

    if variables is None:
        candidates = [[block_vars(b) for b in group.blocks] for group in group_blocks(graph)]
    else:
        by_key: dict[tuple, list] = {}     # first seen first: by container, then first index
        for block in find_blocks(graph, signed=False):
            bv = block_vars(block)
            key = (block.container, tuple(_structural_id(graph, variables[vi]) for vi in bv))
            by_key.setdefault(key, []).append(bv)
        candidates = list(by_key.values())
    groups = [blocks for blocks in candidates
              if len(blocks) > 1 and len({len(b) for b in blocks}) == 1]
    return groups or None


def plan_network(spec: str, devices: int, *, hardware="ascend910b", memory_gib=None,
                 progress: bool | None = None, write_back: str = "auto",
                 **network_options) -> Plan:
    """Capture ``spec`` (built-in name or ``package.module:function``) and plan it.

    Raises:
        PlanningError, smsg_ms.graph.capture.CaptureError, smsg_ms.search.NoFeasiblePlan.
    """
    from .graph.capture import capture_network

    check_device_count(devices)
    graph = capture_network(spec, **network_options)
    return plan_graph(graph, devices, hardware=hardware, memory_gib=memory_gib,
                      options=network_options, network=spec, progress=progress,
                      write_back=write_back)
