"""Einsum-role declarations: one generator of strategies, layouts and costs for many operators.

An operator is declared by letters (PyTorch DTensor's einsum idea, ``design.md``): each tensor
dimension gets a letter; a letter shared by inputs and output is *batch/free*, a letter of the
inputs absent from every output is *contracting* (cutting it leaves partial sums: MindSpore
inserts an AllReduce on the output, and the AllReduce's bprop is again an AllReduce). A strategy
is one cut count per letter; the in_strategy MindSpore receives is that cut for each input
dimension. What MindSpore's ``*Info::CheckStrategy`` enforces becomes: same letter → same cut in
every input (``matmul_info.cc``, ``arithmetic_info.cc``), a letter in ``fixed`` is never cut
(Softmax axis, normalised axes), a cut divides its dimension, the product of the operator's cuts
divides the device count.

Backward collectives and gradient synchronisation follow MindSpore's partial-sum semantics, as
seen in the dry-run (``tests/test_cost_vs_mindspore.py``): the backward pass only has the bprops
of the forward collectives (AllReduce → AllReduce, AllGather → ReduceScatter, AlltoAll →
AlltoAll, slice → nothing), and each trained parameter gets one AllReduce of its local gradient
over the devices holding the same slice (``_MirrorOperator``).

Cost functions are plain arithmetic over the letters' sizes and cuts, so the same code yields
numbers (ints, for the search: no sympy) and sympy expressions (for ``explain``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from math import prod
from typing import Any, Callable

#: Per-device FLOPs of one tensor, from the local sizes of the letters (``{letter: size}``).
FlopsFn = Callable[[dict], Any]


def div(a, b):
    """``a / b``: exact integer division on ints, symbolic division otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return a / b


def numel(letters: str, sizes: dict):
    """Product of the sizes of ``letters`` (1 for a scalar)."""
    out = 1
    for ch in letters:
        out = out * sizes[ch]
    return out


@dataclass
class Einsum:
    """An operator instance described by letters.

    Attributes:
        family: family name (module), for notes.
        inputs: letters of each strategy input (``""`` for a scalar input); ``None`` for an
            input that takes no part in the strategy.
        outputs: letters of each output.
        sizes: global size of each letter (int, or str for a symbolic dimension).
        order: device-matrix order of the letters (MindSpore's ``InferDevMatrixShape``).
        fixed: letter → reason it must not be cut.
        reduce_op: collective op on partial sums of contracting letters (``"sum"``, ``"max"``)
            or ``None`` when a cut contracting letter is not allowed.
        flops_fwd, flops_bwd_per_grad: FLOPs from local letter sizes; backward is counted once per
            input that needs a gradient.
        saves: tensors kept for the backward pass: ``"in0"``, ``"out0"`` ...
        first_output_only: contracting AllReduce acts on output 0 only.
        notes: explanations carried to every option.
    """

    family: str
    inputs: list[str | None]
    outputs: list[str]
    sizes: dict[str, Any]
    order: str
    fixed: dict[str, str] = field(default_factory=dict)
    reduce_op: str | None = "sum"
    flops_fwd: FlopsFn = lambda s: 0
    flops_bwd_per_grad: FlopsFn = lambda s: 0
    saves: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    #: extra rule of the *Info class: (cut per letter, devices) -> reason it is refused, or None
    rule: Callable[[dict, int], str | None] | None = None
    #: output letter that receives the partial sums by a ReduceScatter (instead of an
    #: AllReduce) when one contracting letter is cut and the cut divides it (Gather row split)
    scatter: str = ""
    #: (cut per letter, devices) -> True when MindSpore puts the repeated-calculation axis on
    #: the left of the device matrix
    repeat_left: Callable[[dict, int], bool] | None = None
    #: output letter onto which an out_strategy may reduce-scatter the partial sums of the one
    #: cut contracting letter (MatMul's ``forward_reduce_scatter_``): an extra option beside
    #: the AllReduce one, :func:`reduce_scatter_variant`
    out_scatter: str = ""
    #: global size of a letter where the outputs see it differently from the inputs (a
    #: convolution's or pooling's H and W); only output byte counts use it
    output_sizes: dict[str, Any] = field(default_factory=dict)
    #: input index -> {letter: global size} where one input sees a letter smaller than the
    #: others (FlashAttentionScore's key/value heads N2 < N1 under the query's head letter);
    #: only that input's memory byte counts use it (redistribution uses the tensor's shape)
    input_sizes: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: output index -> {letter: global size} where one output sees a letter at another size
    #: than the inputs and the other outputs (FlashAttentionScore's softmax_max/sum in the BSH
    #: and SBH layouts: ``(B, N1, S1, 8)`` under the query's hidden letter ``H = N1·D``); only
    #: that output's memory byte counts use it (layouts and redistribution use its shape)
    output_index_sizes: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: (cut per letter, local size per letter) -> elements of input 0 each device sends to its
    #: neighbours before computing (a convolution's halo rows), 0 when none
    halo: Callable[[dict, dict], Any] | None = None
    #: letters of the inputs absent from the outputs whose cut leaves each device with its own
    #: result and no collective (a batch-parallel loss: each device's loss is the mean over its
    #: slice, ``BatchParallelInfo::InferForwardCommunication`` inserts nothing)
    local: str = ""
    #: letters the strategy cuts but the inputs keep whole (Tile's copies: the cut splits the
    #: multiple, ``tile_info.cc``); only the outputs are cut by them
    whole_in_inputs: str = ""
    #: the input whose first dimension MindSpore's default for a strategy-less instance cuts,
    #: every other input whole (the operator's own ``GenerateBatchStrategies``: Gather's
    #: indices, ``gather_info.cc``); ``None``: the base rule (the first input not kept whole)
    default_input: int | None = None

    def scatter_active(self, cuts: dict) -> bool:
        """True when the partial sums are reduce-scattered onto :attr:`scatter`."""
        cut = [ch for ch in self.contracting if cuts.get(ch, 1) != 1]
        if not self.scatter or len(cut) != 1:
            return False
        size, c = self.sizes[self.scatter], cuts[cut[0]]
        return not (isinstance(size, int) and isinstance(c, int)) or size % c == 0

    @property
    def contracting(self) -> str:
        """Letters of the inputs absent from every output (and not :attr:`local`), in first-
        seen order; memoised against the letters it is computed from."""
        key = (tuple(self.inputs), tuple(self.outputs), self.local)
        got = self.__dict__.get("_contracting")
        if got is None or got[0] != key:
            got = self.__dict__["_contracting"] = (key, self._contracting())
        return got[1]

    def _contracting(self) -> str:
        out = set("".join(self.outputs))
        seen = []
        for letters in self.inputs:
            for ch in letters or "":
                if ch not in out and ch not in seen and ch not in self.local:
                    seen.append(ch)
        return "".join(seen)

    def cuttable(self) -> str:
        """Letters a strategy may cut, in device-matrix order."""
        used = set("".join(x or "" for x in self.inputs))
        return "".join(ch for ch in self.order if ch in used and ch not in self.fixed
                       and self.sizes[ch] != 1
                       and (self.reduce_op is not None or ch not in self.contracting))

    def strategy(self, cuts: dict[str, int]) -> tuple[tuple[int, ...], ...]:
        """MindSpore in_strategy of a letter assignment (one tuple per strategy input)."""
        return tuple(tuple(cuts.get(ch, 1) for ch in letters)
                     for letters in self.inputs if letters is not None)


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` in ascending order (the cut counts a dimension may take)."""
    return [d for d in range(1, n + 1) if n % d == 0]


def divides(size, cut: int) -> bool:
    """Whether ``cut`` divides the dimension ``size``; ``True`` for a symbolic size (unchecked:
    MindSpore checks it at run time)."""
    return not isinstance(size, int) or size % cut == 0


def enumerate_cuts(spec: Einsum, devices: int) -> list[dict[str, int]]:
    """Every letter assignment MindSpore accepts, in a fixed order (itertools.product over the
    cuttable letters in device-matrix order, cut counts ascending). Without a ``rule`` the
    result depends only on the cuttable letters' sizes and ``devices``: memoised by those (a
    new list each call; its dicts are shared and must not be modified)."""
    sizes = tuple((ch, spec.sizes[ch]) for ch in spec.cuttable())
    if spec.rule is None:
        return list(_cuts_without_rule(sizes, devices))
    return _cuts(sizes, devices, spec.rule)


@lru_cache(maxsize=1 << 14)
def _cuts_without_rule(sizes: tuple, devices: int) -> list[dict[str, int]]:
    return _cuts(sizes, devices, None)


def _cuts(sizes: tuple, devices: int, rule) -> list[dict[str, int]]:
    """:func:`enumerate_cuts` of the letters and sizes ``((letter, size), ...)``."""
    letters = [ch for ch, _ in sizes]
    choices = [[d for d in divisors(devices) if not isinstance(size, int) or size % d == 0]
               for _, size in sizes]
    out = []
    for combo in itertools.product(*choices):
        if devices % prod(combo):
            continue
        if rule is not None and rule(dict(zip(letters, combo)), devices):
            continue
        out.append(dict(zip(letters, combo)))
    return out


def letter_cuts(spec: Einsum, strategy, devices: int, label: str) -> dict[str, int]:
    """Strategy → cut per letter, checking MindSpore's rules.

    Raises:
        StrategyError: wrong number of inputs or dimensions, a cut that does not divide its
            dimension, a forbidden cut, two inputs cutting one letter differently, a product of
            cuts not dividing ``devices``.
    """
    from ..api import StrategyError

    wanted = [x for x in spec.inputs if x is not None]
    if len(strategy) != len(wanted):
        raise StrategyError(f"{label}: strategy has {len(strategy)} inputs, the operator takes "
                            f"{len(wanted)}")
    cuts: dict[str, int] = {}
    owner: dict[str, tuple[int, int]] = {}
    for i, (letters, part) in enumerate(zip(wanted, strategy)):
        if len(part) != len(letters):
            raise StrategyError(f"{label}: input {i} has rank {len(letters)}, its strategy "
                                f"{tuple(part)} has {len(part)} entries")
        for d, (ch, c) in enumerate(zip(letters, part)):
            if not isinstance(c, int) or c < 1:
                raise StrategyError(f"{label}: input {i} dimension {d}: cut {c!r} is not a "
                                    "positive integer")
            size = spec.sizes[ch]
            if isinstance(size, int) and size % c:
                raise StrategyError(f"{label}: input {i} dimension {d}: cut {c} does not divide "
                                    f"size {size}")
            if c > 1 and ch in spec.fixed:
                raise StrategyError(f"{label}: input {i} dimension {d}: cannot be cut "
                                    f"({spec.fixed[ch]})")
            if c > 1 and ch in spec.contracting and spec.reduce_op is None:
                raise StrategyError(f"{label}: input {i} dimension {d}: cannot be cut "
                                    f"({spec.family} has no partial-sum reduction)")
            if ch in cuts and cuts[ch] != c:
                j, e = owner[ch]
                raise StrategyError(f"{label}: input {i} dimension {d}: cut {c} differs from "
                                    f"input {j} dimension {e} (cut {cuts[ch]}), they must match")
            cuts.setdefault(ch, c)
            owner.setdefault(ch, (i, d))
    if spec.rule is not None:
        why = spec.rule(cuts, devices)
        if why:
            cut = next((ch for ch in spec.order if cuts.get(ch, 1) > 1), spec.order[:1])
            i, d = owner.get(cut, (0, 0))
            raise StrategyError(f"{label}: input {i} dimension {d}: {why}")
    total = 1
    for ch in spec.order:
        if ch not in cuts:
            continue
        total *= cuts[ch]
        if devices % total:
            i, d = owner[ch]
            raise StrategyError(f"{label}: input {i} dimension {d}: cut {cuts[ch]} brings the "
                                f"product of cuts to {total}, which does not divide {devices} "
                                "devices")
    return cuts


def reduce_scatter_variant(spec: Einsum, cuts: dict[str, int], devices: int):
    """The out_strategy option of a letter assignment: ``(spec', out_strategy, out_layout)``,
    or ``None`` where MindSpore has none.

    ``MatMul::CheckOutputStrategy`` (``ops_info/matmul_info.cc``, 2-D MatMul only): with
    in_strategy ``((a, b), (b, c))`` the out_strategy ``((a·b, c),)`` turns the forward
    AllReduce of the partial sums over ``b`` into a ReduceScatter (bprop: AllGather) and the
    output comes out cut ``a·b``-way on its rows, over the device matrix ``[a·b, c]`` plus the
    repeated-calculation axis on the right (``MatMulBase::InferTensorLayout``). Offered where
    ``b > 1`` and ``a·b`` divides the rows: the Megatron-LM sequence-parallel MatMul
    (Korthikanti et al. 2022 §4.2.2), the following norms and additions cut on the tokens.
    ``spec'`` is ``spec`` with :attr:`Einsum.scatter` on, for :func:`einsum_cost`.
    """
    import dataclasses

    from ..layout import operator_layout

    m = spec.out_scatter
    cut = [ch for ch in spec.contracting if cuts.get(ch, 1) != 1]
    if not m or len(cut) != 1 or len(spec.outputs[0]) != 2:
        return None
    a, b = cuts.get(m, 1), cuts[cut[0]]
    n = spec.outputs[0][1]
    c = cuts.get(n, 1)
    size = spec.sizes[m]
    if not (isinstance(size, int) and isinstance(a, int) and isinstance(b, int)) \
            or size % (a * b) or (spec.repeat_left and spec.repeat_left(cuts, devices)):
        return None
    layout = operator_layout([a * b, c], [0, 1], devices)
    return dataclasses.replace(spec, scatter=m), ((a * b, c),), layout


def build_layouts(spec: Einsum, cuts: dict[str, int], devices: int):
    """Input and output layouts of a letter assignment (device matrix in ``spec.order``,
    repeated calculation on the right)."""
    from ..layout import operator_layout

    axes = [cuts.get(ch, 1) for ch in spec.order]
    pos = {ch: i for i, ch in enumerate(spec.order)}
    right = not (spec.repeat_left and spec.repeat_left(cuts, devices))

    def lay(letters, out=False):
        where = [pos.get(ch) if out or ch not in spec.whole_in_inputs else None
                 for ch in letters]
        if out and spec.scatter_active(cuts):
            cut = next(ch for ch in spec.contracting if cuts.get(ch, 1) != 1)
            where[letters.index(spec.scatter)] = pos[cut]
        return operator_layout(axes, where, devices, repeat_right=right)

    ins = [lay(x) for x in spec.inputs if x is not None]
    outs = [lay(x, out=True) for x in spec.outputs]
    return ins, outs


def group_span(spec: Einsum, cuts: dict, devices, in_group) -> tuple:
    """Ranks of the communication group over the operator's device-matrix axes whose letter
    satisfies ``in_group`` (the repeated-calculation axis: letter ``None``), as
    ``((size, stride), ...)`` (:class:`~smsg_ms.cost.api.Collective`'s ``span``): MindSpore's
    device matrix is the letters in ``spec.order`` plus the repeated-calculation axis on the
    right (or left, ``repeat_left``), and a group varies those axes with the others fixed, rank
    = row-major index (``DeviceMatrix::GetDevicesAlongDim``, ``frontend/parallel/
    device_matrix.cc``). ``()`` for symbolic cuts."""
    sizes = [cuts.get(ch, 1) for ch in spec.order]
    if not isinstance(devices, int) or any(not isinstance(c, int) for c in sizes):
        return ()
    letters: list = list(spec.order)
    rep = devices // prod(sizes)
    if rep > 1:
        if spec.repeat_left and spec.repeat_left(cuts, devices):
            sizes, letters = [rep] + sizes, [None] + letters
        else:
            sizes, letters = sizes + [rep], letters + [None]
    out, stride = [], 1
    for size, ch in zip(reversed(sizes), reversed(letters)):
        if size > 1 and in_group(ch):
            out.append((size, stride))
        stride *= size
    return tuple(reversed(out))


@dataclass
class TensorSide:
    """What costing needs to know of one tensor: dtype bytes and role. ``owner`` is ``False``
    for a parameter another operator pays for (memory, gradient sync:
    :mod:`smsg_ms.cost.shared_parameters`); ``syncs``: such a parameter whose gradient this
    operator still synchronises (:func:`~smsg_ms.cost.shared_parameters.synced_per_reader`)."""

    nbytes_per_elem: int
    kind: str          # input, parameter, constant, activation
    requires_grad: bool = True
    name: str = ""
    owner: bool = True
    syncs: bool = False     # not the owner, yet synchronises its own gradient (shared_parameters)

    @property
    def needs_grad(self) -> bool:
        return (self.kind == "activation") or (self.kind == "parameter" and self.requires_grad)


def einsum_cost(spec: Einsum, cuts: dict, devices, ins: list[TensorSide], outs: list[TensorSide],
                optimizer_states: int, sizes: dict | None = None):
    """Per-device amounts of one strategy, as plain arithmetic (ints or sympy).

    Args:
        cuts: cut per letter (ints, or sympy symbols for :meth:`CostModel.symbolic`).
        devices: stage device count (int or symbol).
        ins, outs: tensor sides for the strategy inputs and the outputs.
        optimizer_states: fp32 states per parameter element (Adam 2, Momentum 1).
        sizes: letter sizes to use instead of ``spec.sizes`` (symbols).

    Returns:
        dict with ``flops_fwd``, ``flops_bwd``, ``collectives`` (list of
        ``(kind, group, full_bytes, phase, tensor, reason, span)``: :func:`group_span`) and
        ``memory`` by kind (bytes).
    """
    sizes = dict(spec.sizes if sizes is None else sizes)
    local = {ch: div(sizes[ch], cuts.get(ch, 1)) for ch in sizes}
    local_out = dict(local)
    for ch, size in spec.output_sizes.items():
        local_out[ch] = div(size, cuts.get(ch, 1))
    strat_inputs = [x for x in spec.inputs if x is not None]
    flops_fwd = spec.flops_fwd(local)
    grads = sum(1 for side in ins if side.needs_grad)
    flops_bwd = spec.flops_bwd_per_grad(local) * grads
    colls = []
    contracting = [ch for ch in spec.contracting if cuts.get(ch, 1) != 1]
    if contracting:
        group = prod(cuts[ch] for ch in contracting)
        span = group_span(spec, cuts, devices, lambda ch: ch in contracting)
        nbytes = numel(spec.outputs[0], local_out) * outs[0].nbytes_per_elem
        reason = f"partial sums over cut {', '.join(contracting)} ({spec.reduce_op})"
        if spec.scatter_active(cuts):
            colls.append(("ReduceScatter", group, nbytes, "forward", outs[0].name,
                          reason + ", scattered on the output's first dimension", span))
            colls.append(("AllGather", group, nbytes, "backward", outs[0].name,
                          "bprop of the forward ReduceScatter", span))
        else:
            colls.append(("AllReduce", group, nbytes, "forward", outs[0].name, reason, span))
            colls.append(("AllReduce", group, nbytes, "backward", outs[0].name,
                          "bprop of the forward AllReduce", span))
    halo = spec.halo(cuts, local) if spec.halo is not None else 0
    if not (isinstance(halo, int) and halo == 0):
        colls.append(("NeighborExchangeV2", devices, halo * ins[0].nbytes_per_elem, "forward",
                      ins[0].name, "halo rows of a cut H/W exchanged with the neighbours", ()))
    memory = {"parameter": 0, "gradient": 0, "optimizer": 0, "activation": 0}
    def local_in(idx):
        over = spec.input_sizes.get(idx)
        if not over:
            return local
        return {**local, **{ch: div(size, cuts.get(ch, 1)) for ch, size in over.items()}}

    for idx, (letters, side) in enumerate(zip(strat_inputs, ins)):
        if side.kind != "parameter" or not (side.owner or side.syncs):
            continue
        # a letter the input keeps whole (Tile's copies, whole_in_inputs) cuts the outputs
        # only: the parameter is whole there, at its own size (input_sizes), and replicated
        # over that cut (mindcv ConViT's ``ops.tile(self.cls_token, (B, 1, 1))``)
        held = dict(local_in(idx))
        for ch in spec.whole_in_inputs:
            if ch in held:
                held[ch] = spec.input_sizes.get(idx, {}).get(ch, spec.sizes[ch])
        n = numel(letters, held)
        if side.owner:
            memory["parameter"] += n * side.nbytes_per_elem
        if side.requires_grad:
            if side.owner:
                memory["gradient"] += n * side.nbytes_per_elem
                memory["optimizer"] += n * 4 * optimizer_states
            shards = prod(cuts.get(ch, 1) for ch in letters if ch not in spec.whole_in_inputs)
            group = div(devices, shards)
            mine = set(letters)
            colls.append(("AllReduce", group, n * side.nbytes_per_elem, "grad_sync", side.name,
                          "gradient of a weight replicated on the group (_MirrorOperator)",
                          group_span(spec, cuts, devices, lambda ch: ch not in mine)))
    for tag in spec.saves:
        idx = int(tag[-1])
        if tag.startswith("in"):
            side, letters = ins[idx], strat_inputs[idx]
            if side.kind in ("parameter", "constant"):
                continue
        else:
            side, letters = outs[idx], spec.outputs[idx]
            over = spec.output_index_sizes.get(idx)
            seen = local_out if not over else \
                {**local_out, **{ch: div(size, cuts.get(ch, 1)) for ch, size in over.items()}}
            memory["activation"] += numel(letters, seen) * side.nbytes_per_elem
            continue
        memory["activation"] += numel(letters, local_in(idx)) * side.nbytes_per_elem
    return {"flops_fwd": flops_fwd, "flops_bwd": flops_bwd, "collectives": colls,
            "memory": memory}
