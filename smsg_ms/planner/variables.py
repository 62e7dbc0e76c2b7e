"""Search variables of the operator-level problem, and what identifies them.

* one variable per primitive instance that can be sharded: all its calls take one strategy,
  because ``Primitive.shard`` sets one ``in_strategy`` per instance (``shared/docs/design.md``);
  its options are the strategies valid for every call, its cost the sum over the calls;
* one per operator that cannot be sharded individually (functional calls, ``Reshape``):
  MindSpore gives it its layout; its options are the layouts the cost model says it can take.

Variables with equal structural signatures (:func:`op_signature`) share one option list, so
identical layers are costed once. :func:`variable_index` is the one map from operators to their
(variable, call), and :func:`repeated_variable_groups` the search's hint of identical blocks.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from ..cost.morph_region import in_region
from ..cost.operators import passes_layout_through, priced_by_own_rule, shard_refused

#: MindSpore's attribute of a primitive whose layout only the network sets: its ``shard()`` is
#: refused (``frontend/parallel/ops_info/self_define_shard_info.cc``), so it is never written back
SELF_DEFINE_SHARD = "self_define_shard"
from ..cost.shared_parameters import borrowed_inputs, self_synced_inputs
from ..graph.model import OpGraph, OpNode, sorted_json
from ..search.problem import SearchProblem
from .errors import PlanningError



@dataclass
class PlanVariable:
    """One search variable: a primitive instance (all its calls) or one operator.

    ``options[o]`` holds one :class:`smsg_ms.cost.api.OpCost` per operator in ``ops`` (its
    calls, in graph order) for option ``o``; ``keys[o]`` names that option; ``written_back``:
    the option becomes a ``shard()`` strategy (else MindSpore lays the operator out itself).
    """

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
                a: b for a, b in zip(tensor_names(self.shared_from), tensor_names(self.ops))
                if a != b}
            self.__dict__["_rename"] = got
        return got


#: ``json.dumps(x, sort_keys=True, default=str)`` without building an encoder per call
_attrs_json = sorted_json


def _tensor_side(graph: OpGraph, name: str) -> tuple:
    t = graph.tensors[name]
    return (tuple(t.shape), t.dtype, t.kind, bool(t.requires_grad))


def op_signature(graph: OpGraph, op: OpNode, sides: dict | None = None) -> tuple:
    """Everything :meth:`CostModel.options` reads of ``op``: type, attributes, shardability,
    (shape, dtype, kind, requires_grad) of each input and output, which inputs are the same
    tensor and which read a parameter another operator pays for
    (:mod:`smsg_ms.cost.shared_parameters`). Two operators with equal signatures get equal option
    lists, up to tensor names. ``sides``: a cache of those per-tensor tuples by tensor name,
    shared between calls on one graph (a tensor is an output once and an input again)."""
    if sides is None:
        sides = {}
    get = sides.get
    ins = tuple([get(n) or sides.setdefault(n, _tensor_side(graph, n)) for n in op.inputs])
    outs = tuple([get(n) or sides.setdefault(n, _tensor_side(graph, n)) for n in op.outputs])
    return (op.type, _attrs_json(op.attrs), op.shardable, ins, outs,
            tuple([op.inputs.index(n) for n in op.inputs]), borrowed_inputs(graph, op.id),
            self_synced_inputs(graph, op.id))


def _gradient_flags(model, ops: list[OpNode]) -> tuple:
    """Which outputs carry a gradient: equal signatures must agree (backward collectives)."""
    return tuple(model.carries_gradient(t) for op in ops for t in op.outputs)


def tensor_names(ops: list[OpNode]) -> list[str]:
    return [n for op in ops for n in op.inputs + op.outputs]


def op_signatures(graph: OpGraph) -> dict[int, tuple]:
    """:func:`op_signature` of every operator of ``graph`` by id (to share between the builds
    of one graph on several device counts: ``build_problem(signatures=...)``)."""
    sides: dict = {}
    return {op.id: op_signature(graph, op, sides) for op in graph.ops}


def group_variables(graph: OpGraph, model, reuse: bool = False,
                     split_calls=frozenset(), signatures: dict | None = None) -> list[PlanVariable]:
    """Variables in topological order. With ``reuse``, a variable whose signature was seen
    before shares that variable's option list (the options are computed once per signature);
    its ``rename`` maps the shared options' tensor names to its own (built on first use). The
    calls of a primitive path in ``split_calls`` become one variable each, named by
    :attr:`OpNode.label`. ``signatures``: :func:`op_signatures` of ``graph``, when known."""
    by_path: dict[str, list[OpNode]] = defaultdict(list)
    order: list[tuple[int, str | int]] = []
    for op in graph.ops:
        if op.prim_path and not shard_refused(op.type) and not _transparent_cast(graph, op):
            key = op.label if op.prim_path in split_calls else op.prim_path
            if key not in by_path:
                order.append((op.id, key))
            by_path[key].append(op)
        else:
            order.append((op.id, op.id))
    variables = []
    seen: dict[tuple, PlanVariable] = {}
    reps: dict[int, PlanVariable] = {}  # variable index → the variable whose options it shares
    if signatures is None:
        signatures = op_signatures(graph)

    def shared(name, ops, signature) -> bool:
        rep = seen.get(signature) if reuse else None
        if rep is None:
            return False
        reps[len(variables)] = rep
        variables.append(PlanVariable(name, ops, rep.options, rep.keys, rep.written_back, signature,
                              rep.ops))
        return True

    for _, key in order:
        if isinstance(key, str):
            ops = by_path[key]
            signature = (("primitive",) + tuple([signatures[op.id] for op in ops])
                         + (_gradient_flags(model, ops),))
            if shared(key, ops, signature):
                continue
            per_call = [{option_key(c): c for c in model.options(op)} for op in ops]
            common = [k for k in per_call[0] if all(k in m for m in per_call[1:])]
            if common:
                # no cost family: the option is MindSpore's own default, so leave it to MindSpore
                # (the fallback's in_strategy may not even be well-formed, e.g. OneHot's)
                # a Cast's strategy changes nothing (see _transparent_cast): not written back
                # a layout the network fixes (self_define_shard) takes no strategy either
                known = all((model.spec(op) is not None or priced_by_own_rule(op.type))
                            and not passes_layout_through(op.type)
                            and not op.attrs.get(SELF_DEFINE_SHARD)
                            and not in_region(op) for op in ops)
                variables.append(PlanVariable(key, ops, [[m[k] for m in per_call] for k in common],
                                      common, known, signature))
                seen[signature] = variables[-1]
                continue
            # Calls of different ranks (a Cast used on 2-D and 3-D tensors): no one strategy
            # fits all, so the primitive is left to MindSpore's batch-parallel default.
            for op in ops:
                cost = model.default(op)
                cost.notes.append(f"primitive called at {len(ops)} sites whose shapes admit no "
                                  "common strategy: left to MindSpore's default")
                variables.append(PlanVariable(op.label, [op], [[cost]],
                                      [(strategy_key(cost.strategy), tuple(cost.out_layouts))],
                                      False, ("default", op.id)))
        elif _transparent_cast(graph, graph.ops[key]):
            op = graph.ops[key]
            opts = model.passthrough_options(op)
            variables.append(PlanVariable(op.label, [op], [[c] for c in opts],
                                  [(strategy_key(c.strategy), tuple(c.out_layouts))
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
            keys = [(option_key(c), tuple(c.out_layouts)) for c in opts]
            variables.append(PlanVariable(op.label, [op], [[c] for c in opts], keys, False,
                                          signature))
            seen[signature] = variables[-1]
    ids: dict[tuple, int] = {}
    for vi, var in enumerate(variables):   # a sharing variable has its (earlier) rep's signature
        rep = reps.get(vi)
        var.sig_id = rep.sig_id if rep is not None else ids.setdefault(var.signature, len(ids))
    return variables


def _transparent_cast(graph: OpGraph, op: OpNode) -> bool:
    """A Cast is no parallel operator to MindSpore 2.10 (``step_parallel_utils.cc``,
    ``IsParallelCareNode``: a Cast without ``OperatorInfo``): its output keeps its input's
    layout, and a ``shard()`` on it changes nothing (dry-run: ReLU (8,1) → Cast → ReLU (1,8)
    inserts the same float16 collectives with no, a (1,8) or an (8,1) Cast strategy), so it is
    planned as a pass-through and never written back; a Cast of a parameter gives the
    parameter the layout its consumer takes (``CostModel._side``)."""
    return passes_layout_through(op.type)


def planned_edges(graph: OpGraph, variables: list[PlanVariable]):
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


def option_key(cost) -> tuple:
    """The key of an option: its :func:`strategy_key`, followed by ``("out", *out_strategy)``
    for an option that sets the output layout too (``OpCost.out_strategy``), which has the same
    in_strategy as its AllReduce twin."""
    key = strategy_key(cost.strategy)
    if cost.out_strategy is None:
        return key
    return key + (("out",) + strategy_key(cost.out_strategy),)


def strategy_key(strategy) -> tuple:
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


def variable_index(variables: list[PlanVariable]) -> dict[int, tuple[int, int]]:
    """``{operator id: (variable index, call index)}``: where each operator of ``variables``
    (:func:`group_variables`' list) sits; the one map every reader of a problem uses."""
    return {op.id: (vi, ci) for vi, var in enumerate(variables) for ci, op in enumerate(var.ops)}


def chosen_costs(variables: list[PlanVariable], choice: list[int]) -> dict:
    """``{operator id: OpCost}`` of the option ``choice`` picks for each operator's variable."""
    return {op.id: c for vi, var in enumerate(variables)
            for op, c in zip(var.ops, var.options[choice[vi]])}


def _structural_id(graph: OpGraph, var: PlanVariable):
    """The variable's signature id where its signature is structural; for a transparent Cast or
    a primitive left to MindSpore's default (signatures naming the operator), its operators'
    :func:`op_signature` instead."""
    if var.signature and var.signature[0] in ("primitive", "operator"):
        return var.sig_id
    return tuple(op_signature(graph, op) for op in var.ops)


def repeated_variable_groups(graph: OpGraph, problem: SearchProblem, variables=None):
    """Groups of identical repeated blocks as lists of variable indices, for the search's
    repeated squaring. The search checks the hint (it reuses a block's tables only where their
    matrices are equal), so a hint only changes the speed, never the plan.

    Without ``variables``: the blocks of :func:`smsg_ms.graph.blocks.group_blocks` (equal
    structural hashes). With ``variables`` (:func:`build_problem`'s, aligned with
    ``problem.variables``): the blocks of :func:`~smsg_ms.graph.blocks.find_blocks` grouped by
    container and their variables' signature ids, which build_problem has already computed
    (no per-operator hash)."""
    from ..graph.blocks import find_blocks, group_blocks

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


__all__ = ["PlanVariable", "chosen_costs", "group_variables",
           "op_signature", "op_signatures", "planned_edges", "repeated_variable_groups",
           "option_key", "strategy_key", "tensor_names", "variable_index"]
