"""The cost model: every strategy of every operator, costed per device, and redistribution.

Double-level BSP (``design.md``): an operator is a micro-step ``w + g·h + l·L`` FLOPs (``w``
FLOPs forward + backward, ``h`` bytes sent per device by its collectives, ``L`` collectives);
:meth:`CostModel.seconds` divides by the device's FLOP/s. A training step (super-step) is the sum
of the micro-steps plus redistributions (the planner adds those up).

Numbers for the search come from plain arithmetic on ints (no sympy); :meth:`CostModel.symbolic`
runs the same family code on sympy symbols.
"""
from __future__ import annotations

import math
from math import prod

import sympy

from ..devices import valid_device_count
from ..graph.model import DTYPE_BYTES, OpGraph, OpNode, TensorInfo
from . import operators
from .api import Collective, OpCost, Strategy, StrategyError
from .hardware import Hardware, get_hardware
from .layout import TensorLayout, maps_through_reshape, operator_layout
from .operators.base import (Einsum, TensorSide, build_layouts, einsum_cost, enumerate_cuts,
                             letter_cuts)
from .redistribution import redistribute
from .shared_parameters import borrowed_inputs

#: fp32 optimizer states per parameter element.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lamb": 2, "momentum": 1, "sgd": 0}
MEMORY_KINDS = ("parameter", "gradient", "optimizer", "activation")


class CostModel:
    """Costs of the operators of ``graph`` on ``devices`` devices of one stage.

    Args:
        graph: the captured operator graph.
        devices: devices of the stage (1, 2, 4 or a multiple of 8).
        hardware: a :class:`Hardware` or a preset name (``ascend910b``, ``a100``, ``h100``).
        optimizer: decides optimizer-state bytes (``adam``: 2 fp32 states, ``momentum``: 1,
            ``sgd``: 0).
        enable_alltoall: MindSpore's ``enable_alltoall`` context flag (redistribution moves a cut
            with AlltoAll instead of AllGather + slice).
        fully_use_devices: propose only strategies whose device matrix uses every device (no
            repeated calculation), as MindSpore's own auto-parallel search does by default
            (``fully_use_devices``); an operator with no such strategy keeps all of its
            strategies. ``False`` proposes every strategy (exhaustive, much slower on many
            devices).

    Raises:
        ValueError: an unsupported device count, unknown hardware or optimizer.
    """

    def __init__(self, graph: OpGraph, devices: int, hardware: Hardware | str = "ascend910b",
                 optimizer: str = "adam", *, enable_alltoall: bool = False,
                 fully_use_devices: bool = False):
        if not valid_device_count(devices):
            raise ValueError(f"device count {devices}: MindSpore accepts 1, 2, 4 or a multiple "
                             "of 8")
        if optimizer not in OPTIMIZER_STATES:
            raise ValueError(f"unknown optimizer {optimizer!r}; known: "
                             f"{', '.join(sorted(OPTIMIZER_STATES))}")
        self.graph = graph
        self.devices = devices
        self.hardware = get_hardware(hardware)
        self.optimizer = optimizer
        self.states = OPTIMIZER_STATES[optimizer]
        self.enable_alltoall = enable_alltoall
        self.fully_use_devices = fully_use_devices
        self._options: dict[int, list[OpCost]] = {}
        self._specs: dict[int, Einsum | None] = {}
        self._normal: dict[TensorLayout, TensorLayout] = {}
        self._redist_seconds: dict[tuple, float] = {}
        self._with_grad: set[str] | None = None

    # ---- helpers ---------------------------------------------------------------------------
    def _shapes(self, names):
        return [tuple(self.graph.tensors[n].shape) for n in names]

    def spec(self, op: OpNode) -> Einsum | None:
        """The family declaration of ``op`` (``None``: no family, or Reshape)."""
        if op.id not in self._specs:
            self._specs[op.id] = operators.describe(op, self._shapes(op.inputs),
                                                    self._shapes(op.outputs))
        return self._specs[op.id]

    def _side(self, name: str, borrowed: bool = False) -> TensorSide:
        """The tensor as an operator sees it; the output of a Cast of a parameter is that
        parameter (MindSpore gives the parameter its consumer's layout through the Cast and
        synchronises its gradient there: the dry-run's RMSNorm weights). ``borrowed``: a
        parameter another operator pays for (:mod:`.shared_parameters`)."""
        t = self.graph.tensors[name]
        if t.producer is not None and self.graph.ops[t.producer].type == "Cast":
            src = self.graph.tensors[self.graph.ops[t.producer].inputs[0]]
            if src.kind == "parameter":
                t = src
        return TensorSide(DTYPE_BYTES.get(t.dtype, 4), t.kind, t.requires_grad, t.name,
                          owner=not borrowed)

    def borrowed_inputs(self, op: OpNode) -> tuple[int, ...]:
        """Input positions of ``op`` holding a parameter that another operator pays for
        (:func:`.shared_parameters.borrowed_inputs`)."""
        return borrowed_inputs(self.graph, op.id)

    def _sides(self, op, spec):
        borrowed = self.borrowed_inputs(op)
        ins = [self._side(n, i in borrowed)
               for i, (n, x) in enumerate(zip(op.inputs, spec.inputs)) if x is not None]
        return ins, [self._side(n) for n in op.outputs]

    def carries_gradient(self, name: str) -> bool:
        """Whether the backward pass gives tensor ``name`` a gradient: a trained parameter or a
        tensor computed from one. A backward collective on any other tensor (a mask, a loss's
        token count) is never emitted (the dry-run of mindformers' LLaMA shows none)."""
        if self._with_grad is None:
            out = {n for n, t in self.graph.tensors.items()
                   if t.kind == "parameter" and t.requires_grad}
            for op in self.graph.ops:  # topological order
                if any(n in out for n in op.inputs):
                    out.update(op.outputs)
            self._with_grad = out
        return name in self._with_grad

    def _cost(self, op: OpNode, spec: Einsum, cuts: dict, notes=()) -> OpCost:
        ins, outs = self._sides(op, spec)
        raw = einsum_cost(spec, cuts, self.devices, ins, outs, self.states)
        in_l, out_l = build_layouts(spec, cuts, self.devices)
        # no bprop collective without a gradient, or inside a cell with its own bprop
        bprop = not op.attrs.get("smsg_custom_bprop")
        colls = [Collective(*c) for c in raw["collectives"] if c[1] != 1
                 and (c[3] != "backward" or (bprop and self.carries_gradient(c[4])))]
        return OpCost(spec.strategy(cuts), in_l, out_l, raw["flops_fwd"], raw["flops_bwd"],
                      colls, raw["memory"], list(spec.notes) + list(notes))

    # ---- public API ------------------------------------------------------------------------
    def options(self, op: OpNode) -> list[OpCost]:
        """Every strategy MindSpore accepts for ``op``, costed, in a fixed order.

        Order: cut counts ascending over the cuttable dimensions in device-matrix order (the
        first option is the unsharded one). Operators that cannot be sharded (no ``prim_path``)
        or of no known family get one option, MindSpore's semi-auto default (batch-parallel),
        flagged in ``notes``. Reshape (``shard()`` is refused) gets one option per layout it can
        pass through without communication, keyed by the input cuts: ``in_layouts[0]`` is what
        it takes, ``out_layouts[0]`` what it gives; its strategy is never written back.
        """
        if op.id in self._options:
            return self._options[op.id]
        if op.type == "Reshape":
            result = self._reshape_options(op)
        elif op.type == "OneHot" and self._onehot_options(op):
            result = self._onehot_options(op)
        else:
            spec = self.spec(op)
            if spec is None or not op.shardable:
                result = [self._default(op, spec)]
            else:
                all_cuts = enumerate_cuts(spec, self.devices)
                if self.fully_use_devices:
                    full = [c for c in all_cuts if prod(c.values()) == self.devices]
                    all_cuts = full or all_cuts
                result = [self._cost(op, spec, cuts) for cuts in all_cuts]
        self._options[op.id] = result
        return result

    def check(self, op: OpNode, strategy: Strategy) -> OpCost:
        """Cost of ``op`` under ``strategy`` after MindSpore's checks.

        Raises:
            StrategyError: naming the operator label, the input index and the dimension: a cut
                that does not divide its dimension, cuts whose product does not divide the
                device count, a cut on a dimension the operator forbids, inputs disagreeing on
                a shared dimension, an operator with no known family (only its default layout).
        """
        strategy = tuple(tuple(int(c) if isinstance(c, bool) is False and isinstance(c, int)
                               else c for c in part) for part in strategy)
        if op.type == "Reshape":
            raise StrategyError(f"{op.label}: Reshape cannot be sharded (MindSpore: shard() "
                                "'goes for nothing'); its layout comes from its neighbours")
        spec = self.spec(op)
        if spec is None:
            raise StrategyError(f"{op.label}: no cost family for {op.type}; only the default "
                                "batch-parallel layout is known")
        cuts = letter_cuts(spec, strategy, self.devices, op.label)
        return self._cost(op, spec, cuts)

    def redistribution(self, tensor: TensorInfo, src: TensorLayout,
                       dst: TensorLayout) -> list[Collective]:
        """Collectives (forward and backward) MindSpore's tensor redistribution inserts to turn
        ``src`` into ``dst`` for ``tensor``; ``[]`` when equal or a pure slice
        (:mod:`smsg_ms.cost.redistribution`); no backward part for a tensor that carries no
        gradient (:meth:`carries_gradient`)."""
        colls = redistribute(tuple(tensor.shape), DTYPE_BYTES.get(tensor.dtype, 4), src, dst,
                             tensor.name, self.enable_alltoall)
        if self.carries_gradient(tensor.name):
            return colls
        return [c for c in colls if c.phase != "backward"]

    def normalized(self, layout: TensorLayout) -> TensorLayout:
        """``layout.normalized()``, memoised (:meth:`TensorLayout.normalized`)."""
        got = self._normal.get(layout)
        if got is None:
            got = self._normal[layout] = layout.normalized()
        return got

    def redistribution_seconds(self, tensor: TensorInfo, src: TensorLayout,
                               dst: TensorLayout) -> float:
        """``seconds(redistribution(tensor, src, dst))``, memoised by (shape, dtype, normalised
        ``src``, normalised ``dst``): the collectives depend on nothing else
        (:func:`~smsg_ms.cost.redistribution.redistribute` normalises both layouts first; the
        tensor name only labels them, and decides whether a backward part exists). Layouts with
        equal normal forms cost 0 s."""
        a, b = self.normalized(src), self.normalized(dst)
        if a == b:
            return 0.0
        key = (tuple(tensor.shape), tensor.dtype, self.carries_gradient(tensor.name), a, b)
        got = self._redist_seconds.get(key)
        if got is None:
            got = self._redist_seconds[key] = self.seconds(self.redistribution(tensor, a, b))
        return got

    def seconds(self, item: OpCost | list[Collective]) -> float:
        """BSP micro-step time: ``(w + g·h + l·L) / flops`` with ``w`` FLOPs forward + backward,
        ``h`` bytes sent per device (ring volumes), ``L`` collectives."""
        return sum(v for k, v in self.breakdown(item).items() if not k.endswith("_bytes"))

    def breakdown(self, item: OpCost | list[Collective]) -> dict[str, float]:
        """Seconds by ``compute``, each collective kind (forward + backward, with its latency),
        ``grad_sync``; plus bytes per device by memory kind (``parameter_bytes`` ...)."""
        hw = self.hardware
        colls = item if isinstance(item, list) else item.collectives
        out: dict[str, float] = {"compute": 0.0}
        if isinstance(item, OpCost):
            out["compute"] = float(item.flops_fwd + item.flops_bwd) / hw.flops
        for c in colls:
            key = "grad_sync" if c.phase == "grad_sync" else c.kind
            t = float(c.volume) / hw.bandwidth + (hw.latency if c.group > 1 else 0.0)
            out[key] = out.get(key, 0.0) + t
        if isinstance(item, OpCost):
            for kind in MEMORY_KINDS:
                out[f"{kind}_bytes"] = float(item.memory.get(kind, 0))
        return out

    def symbolic(self, op: OpNode, strategy: Strategy) -> dict[str, sympy.Expr]:
        """Sympy expressions of ``op`` under ``strategy`` for ``explain``, factored
        (``sympy.factor``: ~20x cheaper than ``simplify`` and as readable for these
        products and quotients).

        Symbols: one per dimension letter for its global size (a symbolic dimension keeps its
        own name), ``c_<letter>`` for its cut count, ``D`` for the device count. Keys:
        ``flops_fwd``, ``flops_bwd``, ``<phase>:<kind>:<tensor>`` (bytes per device sent, ring
        volume) and ``memory:<kind>`` (bytes per device).

        Raises:
            StrategyError: as :meth:`check`.
        """
        self.check(op, strategy)
        spec = self.spec(op)
        sizes = {}
        for ch, size in spec.sizes.items():
            sizes[ch] = 1 if size == 1 else sympy.Symbol(str(size) if isinstance(size, str)
                                                         else ch, positive=True, integer=True)
        cuts = {ch: sympy.Symbol(f"c_{ch}", positive=True, integer=True) for ch in spec.cuttable()}
        dev = sympy.Symbol("D", positive=True, integer=True)
        ins, outs = self._sides(op, spec)
        raw = einsum_cost(spec, cuts, dev, ins, outs, self.states, sizes=sizes)
        out = {"flops_fwd": sympy.factor(raw["flops_fwd"]),
               "flops_bwd": sympy.factor(raw["flops_bwd"])}
        for kind, group, nbytes, phase, tensor, _ in raw["collectives"]:
            factor = 2 if kind == "AllReduce" else 1
            key = f"{phase}:{kind}:{tensor}"
            out[key] = sympy.factor(out.get(key, 0) + factor * (group - 1) * nbytes / group)
        for kind, value in raw["memory"].items():
            out[f"memory:{kind}"] = sympy.factor(value)
        return out

    # ---- special operators -----------------------------------------------------------------
    def default(self, op: OpNode) -> OpCost:
        """The layout MindSpore gives ``op`` when it carries no strategy (batch-parallel)."""
        return self._default(op, self.spec(op))

    def _default(self, op: OpNode, spec: Einsum | None) -> OpCost:
        """MindSpore's semi-auto default for an operator without strategy: batch-parallel."""
        n = self.devices
        if spec is not None:
            i, first = next(((i, x) for i, x in enumerate(spec.inputs) if x), (0, ""))
            cuts = {}
            # the batch-parallel default leaves a parameter input whole (split flag off; the
            # dry-run shows no gather of an RMSNorm weight behind its strategy-less Cast) and
            # cuts the first dimension gcd(devices, size)-way (batch_parallel_cut)
            param = i < len(op.inputs) and self.graph.tensors[op.inputs[i]].kind == "parameter"
            if first and first[0] in spec.cuttable() and not param:
                cut = batch_parallel_cut(n, [spec.sizes[first[0]]])
                if cut > 1:
                    cuts = {first[0]: cut}
            cost = self._cost(op, spec, cuts)
            why = "functional call: cannot be sharded" if not op.shardable else "no family"
            cost.notes.append(f"default batch-parallel layout ({why})")
            return cost
        ins, outs = [], []
        mem = {k: 0 for k in MEMORY_KINDS}
        colls = []
        strategy = []
        split = [name for name in op.inputs if self.graph.tensors[name].shape
                 and self.graph.tensors[name].kind != "parameter"
                 and self.graph.tensors[name].shape[0] != 1]
        batch = batch_parallel_cut(n, [self.graph.tensors[name].shape[0] for name in split])
        for name in op.inputs:
            t = self.graph.tensors[name]
            shape = tuple(t.shape)
            cut = batch if name in split else 1
            strategy.append((cut,) + (1,) * (len(shape) - 1) if shape else ())
            ins.append(operator_layout([cut] + [1] * (len(shape) - 1), list(range(len(shape))), n)
                       if shape else TensorLayout.replicated(0, n))
            if t.kind == "parameter":
                nb = (t.numel or 0) * DTYPE_BYTES.get(t.dtype, 4)
                mem["parameter"] += nb
                if t.requires_grad:
                    mem["gradient"] += nb
                    mem["optimizer"] += (t.numel or 0) * 4 * self.states
                    if n > 1:
                        colls.append(Collective("AllReduce", n, nb, "grad_sync", name,
                                                "gradient of a replicated weight"))
        for name in op.outputs:
            shape = tuple(self.graph.tensors[name].shape)
            cut = batch if shape and _divides(shape[0], batch) else 1
            outs.append(operator_layout([cut] + [1] * (len(shape) - 1), list(range(len(shape))),
                                        n) if shape else TensorLayout.replicated(0, n))
        return OpCost(tuple(strategy), ins, outs, 0, 0, colls, mem,
                      [f"fallback: no cost family for {op.type}; batch-parallel layout (MindSpore's "
                       "semi-auto default), FLOPs not counted"])

    def _onehot_options(self, op: OpNode) -> list[OpCost]:
        """OneHot of 1-D indices ``(N,)`` into ``(N, depth)`` (``ops_info/onehot_info.cc``): the
        strategy is the *output's* ``((a, b), (), ())``; device matrix ``(a, b)``, the indices
        cut ``a``-way, the classes ``b``-way (each device writes its own class range, no
        collective); ``a·b`` = the device count (MindSpore 2.10 mis-slices the classes under
        repeated calculation: the dry-run's compile fails). ``[]`` for other ranks or axes (the
        batch-parallel default then)."""
        shape = tuple(self.graph.tensors[op.inputs[0]].shape)
        out = tuple(self.graph.tensors[op.outputs[0]].shape)
        if len(shape) != 1 or len(out) != 2 or op.attrs.get("axis", -1) != -1:
            return []
        from .operators.base import divisors
        n = self.devices
        result = []
        for a in divisors(n):
            for b in divisors(n // a):
                if not (_divides(out[0], a) and _divides(out[1], b)):
                    continue
                if a * b != n:  # with repeated calculation the dry-run's compile fails
                    continue      # (the classes end up cut by the repeat count as well)
                ins = [operator_layout([a, b], [0], n)] + [
                    TensorLayout.replicated(len(self.graph.tensors[t].shape), n)
                    for t in op.inputs[1:]]
                result.append(OpCost(((a, b),) + ((),) * (len(op.inputs) - 1), ins,
                                     [operator_layout([a, b], [0, 1], n)], 0, 0, [],
                                     {k: 0 for k in MEMORY_KINDS},
                                     ["OneHot: strategy over the output (N, depth)"]))
        return result

    def reshape_gathers(self, op: OpNode, layout: TensorLayout, side: str) -> bool:
        """Whether MindSpore gathers the whole tensor at Reshape ``op`` because ``layout`` cannot
        pass it (:func:`~smsg_ms.cost.layout.maps_through_reshape`): ``side="input"``, the
        producer's layout of the Reshape's input; ``side="output"``, a consumer's layout of its
        output. MindSpore then gathers the input as it comes, reshapes and slices (D9 in
        docs/known-differences.md): so the redistribution into the Reshape goes to the
        replicated layout (input side), or the one out of it first gathers the Reshape's output
        (output side; same collectives, the reshape moves no data). ``False`` for other
        operators (a Cast passing a layout through has equal shapes).

        Raises:
            ValueError: ``side`` is neither ``"input"`` nor ``"output"``.
        """
        if side not in ("input", "output"):
            raise ValueError(f"side {side!r}: expected 'input' or 'output'")
        if op.type != "Reshape":
            return False
        shapes = (tuple(self.graph.tensors[op.inputs[0]].shape),
                  tuple(self.graph.tensors[op.outputs[0]].shape))
        mine, other = shapes if side == "input" else shapes[::-1]
        return not maps_through_reshape(layout, mine, other)

    def reshape_redistribution(self, op: OpNode, src: TensorLayout,
                               dst: TensorLayout) -> list[Collective]:
        """Collectives of moving ``src`` (the producer's layout of Reshape ``op``'s input) to
        ``dst`` (the consumer's layout of its output) through ``op``, as the search charges
        them: the cheapest option (by :meth:`seconds`) of the two redistributions into and out
        of the Reshape, with :meth:`reshape_gathers` applied on both sides."""
        n = self.devices
        t_in, t_out = (self.graph.tensors[op.inputs[0]], self.graph.tensors[op.outputs[0]])
        best = None
        for opt in self.options(op):
            head = TensorLayout.replicated(len(t_in.shape), n) \
                if self.reshape_gathers(op, src, "input") else opt.in_layouts[0]
            tail = TensorLayout.replicated(len(t_out.shape), n) \
                if self.reshape_gathers(op, dst, "output") else dst
            colls = (self.redistribution(t_in, src, head)
                     + self.redistribution(t_out, opt.out_layouts[0], tail))
            if best is None or self.seconds(colls) < self.seconds(best):
                best = colls
        return best or []

    def passthrough_options(self, op: OpNode) -> list[OpCost]:
        """Options of an operator MindSpore does not treat as parallel (a Cast): one per layout
        its output keeps from its input, free, as a Reshape with equal input and output shapes.
        A Cast of a parameter costs nothing here: its consumer is costed as reading the
        parameter itself (:meth:`_side`)."""
        return self._reshape_options(op)

    def _reshape_options(self, op: OpNode) -> list[OpCost]:
        """One option per layout a Reshape (or a Cast) passes through with no communication:
        per group of dimensions it merges or splits (:func:`reshape_groups`), a cut count that
        splits both sides into contiguous chunks (:func:`~smsg_ms.cost.layout.front_split`:
        32 rows cut 8 into ``(4, 8)`` cut ``(4, 2)``; 768 cut 4 into 12 heads cut 4 × 64).
        Keyed by the input cuts."""
        from .layout import front_split
        from .operators.base import divisors
        import itertools
        src = tuple(self.graph.tensors[op.inputs[0]].shape)
        dst = tuple(self.graph.tensors[op.outputs[0]].shape)
        groups = [(gi, go) for gi, go in (reshape_groups(src, dst) or []) if gi and go]
        n = self.devices
        choices = []
        for g_in, g_out in groups:
            row = []
            for c in divisors(n):
                if c == 1:
                    row.append((1, [1] * len(g_in), [1] * len(g_out)))
                    continue
                sizes_in, sizes_out = [src[i] for i in g_in], [dst[j] for j in g_out]
                if any(not isinstance(x, int) for x in sizes_in + sizes_out):
                    if len(g_in) == len(g_out) == 1 and _divides(sizes_in[0], c) and \
                            _divides(sizes_out[0], c):
                        row.append((c, [c], [c]))
                    continue
                a, b = front_split(sizes_in, c), front_split(sizes_out, c)
                if a is not None and b is not None:
                    row.append((c, a, b))
            choices.append(row)
        out = []
        for combo in itertools.product(*choices):
            if n % prod(c for c, _, _ in combo):
                continue
            in_cuts = [1] * len(src)
            sides = []
            for dims, pick in ((len(src), 1), (len(dst), 2)):
                axes, where = [], [None] * dims
                for (g_in, g_out), chosen in zip(groups, combo):
                    for d, c in zip(g_in if pick == 1 else g_out, chosen[pick]):
                        if c > 1:
                            where[d] = len(axes)
                            axes.append(c)
                            if pick == 1:
                                in_cuts[d] = c
                sides.append(operator_layout(axes, where, n))
            out.append(OpCost(tuple([tuple(in_cuts)]), [sides[0]], [sides[1]], 0, 0, [],
                              {k: 0 for k in MEMORY_KINDS},
                              ["Reshape: layout passed through (not written back; MindSpore "
                               "redistributes around it)"]))
        return out


def batch_parallel_cut(devices: int, first_dims) -> int:
    """Cut count of MindSpore's batch-parallel default on the first dimension of the inputs it
    splits (``first_dims``: their sizes, in elements): the greatest common divisor of the device
    count and every such size, ``devices`` when a size is symbolic or negative (dynamic shape),
    1 when nothing is split. Source: ``OperatorInfo::GenerateBatchStrategiesWithCheck``
    (``ops_info/operator_info.cc``), behind ``GenerateBatchParallelStrategy``: each split is
    ``stage_device_num`` first, then every split is lowered to ``gcd(dims..., devices)``; so 6
    heads on 8 devices are cut 2-way, 49 tokens stay whole.
    """
    cut = devices if first_dims else 1
    for size in first_dims:
        if not isinstance(size, int) or size <= 0:
            return devices
        cut = math.gcd(cut, size)
    return cut


def _divides(size, cut) -> bool:
    return not isinstance(size, int) or size % cut == 0


def reshape_groups(src: tuple, dst: tuple):
    """Pair runs of input and output dimensions with equal products (a reshape merges or splits
    only within such runs). Returns ``[(input dims, output dims), ...]``, or ``None`` when
    symbolic sizes prevent the pairing."""
    if any(not isinstance(s, int) for s in src + dst):
        return [([i], [i]) for i in range(len(src))] if src == dst else None
    groups, i, j = [], 0, 0
    try:
        while i < len(src) and j < len(dst):
            gi, gj, pi, pj = [i], [j], src[i], dst[j]
            i, j = i + 1, j + 1
            while pi != pj:
                if pi < pj:
                    pi *= src[i]
                    gi.append(i)
                    i += 1
                else:
                    pj *= dst[j]
                    gj.append(j)
                    j += 1
            groups.append((gi, gj))
    except IndexError:
        return None
    groups += [([k], []) for k in range(i, len(src))] + [([], [k]) for k in range(j, len(dst))]
    return groups
