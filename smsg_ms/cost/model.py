"""The cost model: every strategy of every operator, costed per device, and redistribution.

Double-level BSP (``design.md``), on a machine in levels (Multi-BSP: a ``g`` and an ``l`` per
level, :mod:`.hardware`): an operator is a micro-step whose kernels cost their launches and
their roofline time (:mod:`.kernels`) and whose collectives cost their hierarchical time on the
levels their group spans (:func:`.api.collective_seconds`), plus the optimizer update of its
trained weights (:func:`.kernels.update_seconds`). A step (super-step) is the sum of the
micro-steps plus redistributions (the planner adds those up). Plain arithmetic on ints for the
search; :meth:`CostModel.symbolic` runs the same family code on sympy symbols.
"""
from __future__ import annotations

import math
from math import prod

import sympy

from ..devices import check_device_count
from ..graph.model import DTYPE_BYTES, OpGraph, OpNode, TensorInfo
from .expert_dispatch import morph_expert_weights, parameter_behind
from .gradient_flow import (NO_GRADIENT, data_dependent_gradients, folds_loss_gradient,
                            gradient_kinds)
from . import operators
from .api import MEMORY_KINDS, Collective, OpCost, Strategy, StrategyError
from .dynamic_axes import allowed_cuts
from .hardware import Hardware, get_hardware
from .kept_layout import data_batch, kept_options
from .no_operator_info import has_no_operator_info, op_cut
from .morph_region import region_options
from .kernels import (kernel_seconds, slice_bytes, traffic, unit_of, update_seconds,
                      wave_quantization)
from .operators.matmul import TYPES as MATMUL_TYPES
from .overlap import exposed_grad_sync
from .layout import TensorLayout, operator_layout
from .operators import reshape
from .operators.base import (Einsum, TensorSide, build_layouts, divides, einsum_cost,
                             letter_cuts, reduce_scatter_variant)
from .redistribution import redistribute
from .shared_parameters import borrowed_inputs, kept_whole_by, self_synced_inputs

#: fp32 optimizer states per parameter element.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lamb": 2, "momentum": 1, "sgd": 0}


class CostModel:
    """Costs of the operators of ``graph`` on ``devices`` devices of one stage.

    Args:
        graph: the captured operator graph.
        devices: devices of the stage (1, 2, 4 or a multiple of 8).
        hardware: a :class:`~smsg_ms.cost.hardware.Machine`, a preset name or alias
            (``atlas-800t-a2``/``ascend910b``, ``dgx-a100``/``a100``, ``dgx-h100``/``h100``) or a
            description file (:func:`~smsg_ms.cost.hardware.get_hardware`).
        optimizer: decides optimizer-state bytes (``adam``: 2 fp32 states, ``momentum``: 1,
            ``sgd``: 0).
        enable_alltoall: MindSpore's ``enable_alltoall`` context flag (redistribution moves a cut
            with AlltoAll instead of AllGather + slice); ``None`` (default): on exactly when the
            graph has expert layers (:func:`smsg_ms.cost.experts.wants_alltoall`), as the plan
            then compiles with it.
        fully_use_devices: propose only strategies whose device matrix uses every device (no
            repeated calculation), as MindSpore's own auto-parallel search does by default
            (``fully_use_devices``); an operator with no such strategy keeps all of its
            strategies. ``False`` proposes every strategy (exhaustive, much slower on many
            devices).
        replace_strategies: plan anew the primitives whose strategy the network's own
            ``shard()`` sets (by default their one option, :mod:`smsg_ms.cost.kept_layout`).
        fold_constant_gradients: no backward ``AllReduce`` of a tensor whose gradient is a
            constant (:meth:`constant_gradient`), as MindSpore compiles one stage where the
            loss's bprop folds to a value; ``False``: a stage of a pipeline of two stages or
            more, where MindSpore keeps it; ``None`` (default): :func:`folds_loss_gradient`
            of ``graph`` (a returned loss of rank 2 or more keeps them).

    Raises:
        smsg_ms.devices.DeviceCountError: a device count MindSpore refuses (a ``ValueError``).
        ValueError: unknown hardware or optimizer.
    """

    def __init__(self, graph: OpGraph, devices: int, hardware: Hardware | str = "ascend910b",
                 optimizer: str = "adam", *, enable_alltoall: bool | None = None,
                 fully_use_devices: bool = False, replace_strategies: bool = False,
                 fold_constant_gradients: bool | None = None):
        check_device_count(devices)
        if optimizer not in OPTIMIZER_STATES:
            raise ValueError(f"unknown optimizer {optimizer!r}; known: "
                             f"{', '.join(sorted(OPTIMIZER_STATES))}")
        self.graph, self.devices = graph, devices
        self.replace_strategies = replace_strategies
        self.hardware = get_hardware(hardware)
        self.optimizer = optimizer
        self.states = OPTIMIZER_STATES[optimizer]
        if enable_alltoall is None:
            from .experts import wants_alltoall
            enable_alltoall = wants_alltoall(graph)
        self.enable_alltoall = bool(enable_alltoall)
        self.fully_use_devices = fully_use_devices
        #: one stage whose loss keeps its constant gradients expressions (merged by the CSE)
        self.merges_constant_gradients = (fold_constant_gradients is None
                                          and not folds_loss_gradient(graph))
        if fold_constant_gradients is None:
            fold_constant_gradients = folds_loss_gradient(graph)
        self.fold_constant_gradients = fold_constant_gradients
        self._options: dict[int, list[OpCost]] = {}
        self._specs: dict[int, Einsum | None] = {}
        self._op_sides: dict[tuple, tuple] = {}     # _sides' memo: (op id, spec id) -> sides
        self._normal: dict[TensorLayout, TensorLayout] = {}
        self._redist_seconds: dict[tuple, float] = {}
        self._with_grad: set[str] | None = None
        #: expert weights whose layout mindformers' MoE Morph fixes (replicated at ep = 1)
        self._morph_weights = morph_expert_weights(graph)

    # ---- helpers ---------------------------------------------------------------------------
    def _shapes(self, names):
        return [tuple(self.graph.tensors[n].shape) for n in names]

    def spec(self, op: OpNode) -> Einsum | None:
        """The family declaration of ``op`` (``None``: no family, or a family without one, as
        Reshape and OneHot: :mod:`smsg_ms.cost.operators`)."""
        if op.id not in self._specs:
            self._specs[op.id] = operators.describe(op, self._shapes(op.inputs),
                                                    self._shapes(op.outputs))
        return self._specs[op.id]

    def _side(self, name: str, borrowed: bool = False, syncs: bool = False) -> TensorSide:
        """The tensor as an operator sees it; the output of a pass-through operator (a Cast,
        :func:`~smsg_ms.cost.operators.passes_layout_through`) of a parameter is that
        parameter (MindSpore gives the parameter its consumer's layout through the Cast and
        synchronises its gradient there: the dry-run's RMSNorm weights); so is an expert weight
        of mindformers' MoE reaching a GroupedMatmul through Cast and Reshape. ``borrowed``: a
        parameter another operator pays for (:mod:`.shared_parameters`); ``syncs``: whose
        gradient this operator synchronises all the same."""
        t = self.graph.tensors[name]
        if t.producer is not None and \
                operators.passes_layout_through(self.graph.ops[t.producer].type):
            src = self.graph.tensors[self.graph.ops[t.producer].inputs[0]]
            if src.kind == "parameter":
                t = src
        if t.kind != "parameter" and self._morph_weights:
            # mindformers' expert weight reaches its GroupedMatmul through Cast and Reshape
            # (smsg_ms.cost.expert_dispatch): the GroupedMatmul holds and synchronises it
            src = parameter_behind(self.graph, name)
            if src is not None and src.name in self._morph_weights:
                t = src
        return TensorSide(DTYPE_BYTES.get(t.dtype, 4), t.kind, t.requires_grad, t.name,
                          owner=not borrowed, syncs=syncs)

    def borrowed_inputs(self, op: OpNode) -> tuple[int, ...]:
        """Input positions of ``op`` holding a parameter that another operator pays for
        (:func:`.shared_parameters.borrowed_inputs`)."""
        return borrowed_inputs(self.graph, op.id)

    def _sides(self, op, spec):
        """``(input sides, output sides)`` of ``op`` under ``spec``, computed once per operator
        (the same for every option: they read the graph alone; read-only)."""
        key = (op.id, id(spec))
        got = self._op_sides.get(key)
        if got is None or got[0] is not spec:
            borrowed = self.borrowed_inputs(op)
            own = self_synced_inputs(self.graph, op.id) if borrowed else ()
            ins = [self._side(n, i in borrowed, i in own)
                   for i, (n, x) in enumerate(zip(op.inputs, spec.inputs)) if x is not None]
            got = self._op_sides[key] = (spec, ins, [self._side(n) for n in op.outputs])
        return list(got[1]), list(got[2])

    def carries_gradient(self, name: str) -> bool:
        """Whether the backward pass gives tensor ``name`` a gradient: a trained parameter or a
        tensor computed from one that the outputs read (:func:`.gradient_flow.gradient_kinds`).
        A backward collective on any other tensor (a mask, a loss's token count; one only
        ``AssignAdd`` reads) is never emitted (the dry-runs of mindformers' LLaMA and
        DeepSeek-V3 show none)."""
        self._gradient_sets()
        return name in self._with_grad[0]

    def constant_gradient(self, name: str) -> bool:
        """Whether tensor ``name``'s gradient is a constant (an auxiliary loss added into the
        returned loss): MindSpore folds a backward ``AllReduce`` of it away (DeepSeek-V3's
        dry-run), while the ``ReduceScatter`` of a gathered tensor's gradient stays
        (``tests/test_reshape_chain_plan.py``). Not folded where ``fold_constant_gradients``
        is off: a stage of a pipeline, whose compile keeps that ``AllReduce`` (Qwen3-MoE's
        aux loss, 2 stages: one per micro-batch on each stage, ``docs/networks.md``). Not
        folded either where the loss's bprop stays a CNode (one stage, a loss of rank 2 or
        more: :func:`~.gradient_flow.folds_loss_gradient`): the fold in MindSpore's source is
        ``AllReduceConstElim`` (``opt_a``), of an AllReduce whose input is a ``ValueNode``
        (mindformers' one stage: the rank-0 loss's bprop folds to one, and its default
        ``moe_aux_loss_coeff`` 0 folds the auxiliary loss's whole bprop to zeros, Qwen3-MoE's
        ``opt_a`` dump); a ``dout`` left a CNode (``networks/stage_aux``, a ``(1, 1)`` loss)
        keeps it, and the CSE after autodiff merges the AllReduces of equal ``dout``
        expressions (equal constant coefficients; ``docs/networks.md``, "Constant gradients
        in a pipeline"), which a plan's predicted collectives model per stage
        (:mod:`smsg_ms.planner.constant_gradients`; the cost here still prices each)."""
        self._gradient_sets()
        return name in self._with_grad[0] and name not in self._with_grad[1]

    def _gradient_sets(self) -> None:
        if self._with_grad is None:
            out = {n for n, t in self.graph.tensors.items()
                   if t.kind == "parameter" and t.requires_grad}
            for op in self.graph.ops:  # topological order
                if op.type not in NO_GRADIENT and any(n in out for n in op.inputs):
                    out.update(op.outputs)
            self._with_grad = (out & set(gradient_kinds(self.graph)),
                               out & data_dependent_gradients(self.graph))

    def _cost(self, op: OpNode, spec: Einsum, cuts: dict, notes=(), variant=None) -> OpCost:
        """One option; ``variant``: :func:`~.operators.base.reduce_scatter_variant`'s
        ``(spec', out_strategy, out_layout)`` for the out_strategy option."""
        ins, outs = self._sides(op, spec)
        in_l, out_l = build_layouts(spec, cuts, self.devices)
        out_strategy = None
        if variant is not None:
            spec, out_strategy, layout = variant
            out_l = [layout] + out_l[1:]
            notes = tuple(notes) + ("out_strategy: partial sums reduce-scattered on the rows "
                                    "(sequence parallel)",)
        raw = einsum_cost(spec, cuts, self.devices, ins, outs, self.states)
        # no bprop collective without a gradient, or inside a cell with its own bprop
        bprop = not op.attrs.get("smsg_custom_bprop")
        colls = [Collective(*c) for c in raw["collectives"] if c[1] != 1
                 and (c[3] != "backward" or (bprop and self.carries_gradient(c[4]) and not (
                     c[0] == "AllReduce" and self.fold_constant_gradients
                     and self.constant_gradient(c[4]))))]
        return OpCost(spec.strategy(cuts), in_l, out_l, raw["flops_fwd"], raw["flops_bwd"],
                      colls, raw["memory"], list(spec.notes) + list(notes),
                      out_strategy=out_strategy)

    # ---- public API ------------------------------------------------------------------------
    def options(self, op: OpNode) -> list[OpCost]:
        """Every strategy MindSpore accepts for ``op``, costed, in a fixed order.

        Order: cut counts ascending over the cuttable dimensions in device-matrix order (the
        first option is the unsharded one). A family with its own rule gives its options
        instead (:func:`smsg_ms.cost.operators.own_options`: Reshape, whose ``shard()`` is
        refused, one per layout it passes through without communication, keyed by the input
        cuts; OneHot, a strategy over its output). Operators that cannot be sharded (no
        ``prim_path``) or of no known family get one option, MindSpore's semi-auto default
        (batch-parallel), flagged in ``notes``; one in a Morph region, :mod:`.morph_region`'s.
        """
        if op.id in self._options:
            return self._options[op.id]
        result = region_options(self, op) or operators.own_options(self, op)
        if result is None:
            spec = self.spec(op)
            if spec is None or not op.shardable:
                result = [self._default(op, spec)]
            else:
                all_cuts, dynamic = allowed_cuts(spec, op, self.graph.tensors, self.devices)
                if self.fully_use_devices:
                    full = [c for c in all_cuts if prod(c.values()) == self.devices]
                    all_cuts = full or all_cuts
                result = [self._cost(op, spec, cuts) for cuts in all_cuts]
                variants = () if dynamic else all_cuts   # no out_strategy on a dynamic axis
                result += [self._cost(op, spec, cuts, variant=v) for cuts in variants
                           if (v := reduce_scatter_variant(spec, cuts, self.devices))]
                result = self._kept(op, result)
        self._options[op.id] = result = self.with_kernel(op, result)
        return result

    def _kept(self, op: OpNode, result: list[OpCost]) -> list[OpCost]:
        """The options the network fixes (a kept layout, or its own ``shard()`` strategy unless
        :attr:`replace_strategies`): :func:`smsg_ms.cost.kept_layout.kept_options`."""
        return kept_options(op, result, self.devices, self.replace_strategies,
                            data_batch(self.graph))

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
        if operators.shard_refused(op.type):
            raise StrategyError(f"{op.label}: {op.type} cannot be sharded (MindSpore: shard() "
                                "'goes for nothing'); its layout comes from its neighbours")
        spec = self.spec(op)
        if spec is None:
            raise StrategyError(f"{op.label}: no cost family for {op.type}; only the default "
                                "batch-parallel layout is known")
        cuts = letter_cuts(spec, strategy, self.devices, op.label)
        return self.with_kernel(op, [self._cost(op, spec, cuts)])[0]

    def redistribution(self, tensor: TensorInfo, src: TensorLayout,
                       dst: TensorLayout, shape: tuple | None = None) -> list[Collective]:
        """Collectives (forward and backward) MindSpore's tensor redistribution inserts to turn
        ``src`` into ``dst`` for ``tensor``; ``[]`` when equal or a pure slice
        (:mod:`smsg_ms.cost.redistribution`); no backward part for a tensor that carries no
        gradient (:meth:`carries_gradient`). ``shape``: MindSpore's expanded shape of a
        redistribution through a Reshape, ``src`` and ``dst`` laid on it (``redistribute``'s
        ``expanded``); ``None``: the tensor's own shape."""
        expanded = shape is not None
        colls = redistribute(tuple(shape if expanded else tensor.shape),
                             DTYPE_BYTES.get(tensor.dtype, 4), src, dst, tensor.name,
                             self.enable_alltoall, expanded=expanded)
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
        """Seconds by ``compute`` (kernels forward + backward: launches and roofline,
        :meth:`compute_seconds`), each collective kind (forward + backward, with its latency,
        placed on the machine's levels: on the critical path), ``grad_sync`` (the part the
        backward pass does not hide, :func:`.overlap.exposed_grad_sync`), ``update``
        (:func:`.kernels.update_seconds`); plus bytes per device by kind (``parameter_bytes`` ...)."""
        colls = item if isinstance(item, list) else item.collectives
        out: dict[str, float] = {"compute": 0.0}
        bwd = 0.0
        if isinstance(item, OpCost):
            fwd, bwd = self.compute_seconds(item)
            out["compute"] = fwd + bwd
        for c in colls:
            key = "grad_sync" if c.phase == "grad_sync" else c.kind
            t = self.collective_seconds(c)
            out[key] = out.get(key, 0.0) + t
        if "grad_sync" in out:   # overlapped with the backward pass (:mod:`.overlap`)
            out["grad_sync"] = exposed_grad_sync(out["grad_sync"], bwd)
        if isinstance(item, OpCost):
            if item.memory.get("gradient"):
                out["update"] = update_seconds(item.memory, self.hardware.hbm_bandwidth)
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
        for kind, group, nbytes, phase, tensor, *_ in raw["collectives"]:
            # ring_volume's formula on symbols (it cannot test a symbolic group against 1);
            # NeighborExchangeV2 keeps (g-1)/g·S here where ring_volume counts S: plan files
            # store these formulas, so aligning the two would change existing plans
            factor = 2 if kind == "AllReduce" else 1
            key = f"{phase}:{kind}:{tensor}"
            out[key] = sympy.factor(out.get(key, 0) + factor * (group - 1) * nbytes / group)
        for kind, value in raw["memory"].items():
            out[f"memory:{kind}"] = sympy.factor(value)
        return out

    # ---- special operators -----------------------------------------------------------------
    def default(self, op: OpNode) -> OpCost:
        """The layout MindSpore gives ``op`` when it carries no strategy (batch-parallel)."""
        return self.with_kernel(op, [self._default(op, self.spec(op))])[0]

    def _default(self, op: OpNode, spec: Einsum | None) -> OpCost:
        """MindSpore's semi-auto default for an operator without strategy: batch-parallel."""
        n = self.devices
        if spec is not None:
            # the batch-parallel default leaves a trainable parameter input whole (kept_whole;
            # no gather of an RMSNorm weight behind its strategy-less Cast in the dry-run) and
            # cuts the first dimension of every other input gcd(devices, size)-way
            # (batch_parallel_cut; GenerateBatchStrategiesBySplitFlag, ops_info/
            # operator_info.cc): the first such input decides, also behind a parameter
            # (ConvNeXt's layer scale ``gamma * x``: x stays batch-cut, gamma whole)
            # an element-wise input whose first dimension, expanded to the output's rank, is
            # 1 (of lower rank, or of size 1) has its split flag off (ArithmeticBase::
            # ReComputeBatchSplitFlagList, arithmetic_info.cc): the next input decides
            # (poolformer's layer scale w (C, 1, 1) · x, ConViT's gate g (1, H, 1, 1) · h:
            # x and h stay batch-cut, w and g whole)
            out = spec.outputs[0] if spec.outputs else ""

            def flag_off(x):
                return spec.family == "elementwise" and (len(x) < len(out)
                                                         or spec.sizes[x[0]] == 1)
            first = next((x for i, x in enumerate(spec.inputs)
                          if x and not (i < len(op.inputs)
                                        and kept_whole_by(self.graph, op, op.inputs[i]))
                          and not flag_off(x)), "")
            if op.type == "Select" and any(x and flag_off(x) for x in spec.inputs):
                # SelectInfo flags every input (select_info.cc) and the batch cut is the gcd
                # of their first dimensions (GenerateBatchStrategiesWithCheck): a broadcast
                # mask (1, ...) leaves the three whole
                first = ""
            if spec.default_input is not None:   # the operator's own batch strategy
                first = spec.inputs[spec.default_input] or ""
            cuts = {}
            if first and first[0] in spec.cuttable():
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
                 and not kept_whole_by(self.graph, op, name)
                 and self.graph.tensors[name].shape[0] != 1]
        batch = batch_parallel_cut(n, [self.graph.tensors[name].shape[0] for name in split])
        if has_no_operator_info(op.type):   # StandAlone or BatchParallel: all or nothing
            split, batch = op_cut(self.graph, op, n)
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
            cut = batch if shape and divides(shape[0], batch) else 1
            outs.append(operator_layout([cut] + [1] * (len(shape) - 1), list(range(len(shape))),
                                        n) if shape else TensorLayout.replicated(0, n))
        return OpCost(tuple(strategy), ins, outs, 0, 0, colls, mem,
                      [f"fallback: no cost family for {op.type}; batch-parallel layout (MindSpore's "
                       "semi-auto default), FLOPs not counted"])

    def reshape_gathers(self, op: OpNode, layout: TensorLayout, side: str) -> bool:
        """Whether MindSpore gathers the whole tensor at Reshape ``op`` because ``layout``
        cannot pass it: :func:`smsg_ms.cost.operators.reshape.gathers` on this model's graph
        (``side``: ``"input"`` or ``"output"``; ``False`` for other operators).

        Raises:
            ValueError: ``side`` is neither ``"input"`` nor ``"output"``.
        """
        return reshape.gathers(self.graph, op, layout, side)

    def reshape_redistribution(self, op: OpNode, src: TensorLayout,
                               dst: TensorLayout) -> list[Collective]:
        """Collectives of moving ``src`` through Reshape ``op`` to ``dst`` as MindSpore infers
        them: :func:`smsg_ms.cost.operators.reshape.redistribution_through` (a plan's predicted
        collectives use it, ``planner/decisions._through_reshapes``; the search still charges
        producer → Reshape option → consumer, D11 in docs/known-differences.md)."""
        return reshape.redistribution_through(self, op, src, dst)

    def passthrough_options(self, op: OpNode) -> list[OpCost]:
        """Options of an operator MindSpore does not treat as parallel (a Cast): one per layout
        its output keeps from its input, free
        (:func:`smsg_ms.cost.operators.passthrough_options`). A Cast of a parameter costs
        nothing here: its consumer is costed as reading the parameter itself (:meth:`_side`).
        An expert weight of mindformers' MoE keeps only the whole layout (its Morph's at ep 1).

        Raises:
            ValueError: ``op`` is no pass-through operator.
        """
        options = operators.passthrough_options(self, op)
        if op.inputs and op.inputs[0] in self._morph_weights:
            # the Morph around mindformers' experts takes the weight whole at ep = 1
            # (smsg_ms.cost.expert_dispatch prices ep on top)
            options = [c for c in options if all(x == 1 for s in c.strategy for x in s)] or options
        return self.with_kernel(op, options)

    def with_kernel(self, op: OpNode, costs: list[OpCost]) -> list[OpCost]:
        """``costs`` with their kernel fields set (:mod:`smsg_ms.cost.kernels`): unit, HBM bytes
        per device from the option's input and output slices (global shapes divided by the
        layouts' shard counts, the tensors' dtypes), launches forward (1) and backward (one per
        input that receives a gradient: a trained parameter or a tensor computed from one,
        :meth:`carries_gradient`). Returns the same list, the records updated in place."""
        graph = self.graph
        grads = [(graph.tensors[n].kind == "parameter" and graph.tensors[n].requires_grad)
                 or self.carries_gradient(n) for n in op.inputs]
        # (shape, bytes per element) of each input and output, looked up once for all options
        in_t = [(graph.tensors[n].shape, DTYPE_BYTES.get(graph.tensors[n].dtype, 4))
                for n in op.inputs]
        out_t = [(graph.tensors[n].shape, DTYPE_BYTES.get(graph.tensors[n].dtype, 4))
                 for n in op.outputs]
        for c in costs:
            if c.launches_fwd or c.launches_bwd:
                continue
            ins = [slice_bytes(shape, nb, lay.shards) for (shape, nb), lay in zip(in_t,
                                                                                   c.in_layouts)]
            outs = [slice_bytes(shape, nb, lay.shards)
                    for (shape, nb), lay in zip(out_t, c.out_layouts)]
            c.unit = unit_of(op.type)
            c.bytes_fwd, c.bytes_bwd, c.launches_fwd, c.launches_bwd = traffic(
                op.type, ins, outs, grads[:len(ins)])
            if op.type in MATMUL_TYPES and op.outputs and self.hardware.matrix_units:
                c.quantization_fwd, c.quantization_bwd = self._quantization(op, c, grads)
        return costs

    def _quantization(self, op: OpNode, c: OpCost, grads) -> tuple[float, float]:
        """Wave quantization (:func:`smsg_ms.cost.kernels.wave_quantization`) of a matrix
        product: forward of its output slice, backward the mean over the inputs that receive a
        gradient of their slices (each gradient is one product of the forward's FLOPs)."""
        tensors, hw = self.graph.tensors, self.hardware

        def factor(name, layout):
            try:
                return wave_quantization(layout.slice_shape(tensors[name].shape), hw)
            except ValueError:      # a cut that does not divide: the option is refused anyway
                return 1.0

        fwd = factor(op.outputs[0], c.out_layouts[0])
        back = [factor(n, lay) for n, lay, g in zip(op.inputs, c.in_layouts, grads) if g]
        return fwd, (sum(back) / len(back) if back else 1.0)

    def compute_seconds(self, cost: OpCost) -> tuple[float, float]:
        """``(forward, backward)`` seconds of one operator's kernels on one device: launches ×
        ``launch_latency`` + roofline (:func:`smsg_ms.cost.kernels.kernel_seconds`)."""
        hw = self.hardware
        return (kernel_seconds(cost.flops_fwd, cost.bytes_fwd, cost.launches_fwd, cost.unit, hw,
                               cost.quantization_fwd),
                kernel_seconds(cost.flops_bwd, cost.bytes_bwd, cost.launches_bwd, cost.unit, hw,
                               cost.quantization_bwd))

    def collective_seconds(self, c: Collective) -> float:
        """Seconds of one collective, its group placed on the machine's levels by its ranks
        (:meth:`smsg_ms.cost.hardware.Machine.collective_seconds`)."""
        return self.hardware.collective_seconds(c.kind, c.group, c.full_bytes, c.span)


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
