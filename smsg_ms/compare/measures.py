"""Planner-neutral measures of a compiled parallel training graph.

Everything here is counted from what MindSpore's compiler produced (the ``planner_compile`` job of
:mod:`smsg_ms.dryrun.jobs.planners`), never from smsg's cost model, so every planner is judged
by the same ruler:

* collective bytes per device, by kind and phase (forward, backward, grad_sync), with ring volumes;
* FLOPs per device of the matrix products and convolutions, on their per-device shapes;
* parameter and optimizer-state bytes per device, from the per-device parameter slices;
* one step-cost figure: ``flops / peak + bytes / bandwidth + collectives · latency`` (seconds).
"""
from __future__ import annotations

from collections import defaultdict
from math import prod

from ..cost.api import ring_volume
from .hardware import NeutralHardware, get_neutral_hardware

#: Bytes per element of the dtypes MindSpore reports (``float32``, ``Float32`` ...).
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
               "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "uint32": 4, "uint64": 8}
PHASES = ("forward", "backward", "grad_sync")


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (case-insensitive; 4 for an unknown name)."""
    return DTYPE_BYTES.get(str(dtype).lower(), 4)


def ring_bytes(kind: str, group: int, whole_bytes: float) -> float:
    """Bytes one device sends for one collective over ``group`` devices (ring algorithms).

    ``whole_bytes`` is ``S``, the group's whole tensor: AllReduce ``2(g−1)/g·S``; AllGather,
    ReduceScatter ``(g−1)/g·S``; AlltoAll ``(g−1)/g·S`` with ``S`` the tensor each device holds
    (it keeps 1/g of it); Send/Receive/Broadcast/NeighborExchange ``S``. Source: Thakur, Rabenseifner
    & Gropp, "Optimization of Collective Communication Operations in MPICH" (IJHPCA 2005), ring
    AllGather/ReduceScatter and AllReduce = ReduceScatter + AllGather. The formula is
    :func:`smsg_ms.cost.api.ring_volume` (a textbook formula, not smsg's cost model: every
    planner's compiled graph is measured with it alike).

    Raises:
        ValueError: unknown ``kind``.
    """
    if group <= 1:
        return 0.0
    return float(ring_volume(kind, group, whole_bytes))


def phase_of(collective: dict) -> str:
    """``grad_sync`` for a parameter's gradient synchronisation, else ``forward``/``backward``."""
    return "grad_sync" if collective.get("grad_sync") else collective["pass"]


def group_size(collective: dict) -> int:
    """Devices of a collective's group: ``group_size`` or its ranks, else ``named_group_size``
    (a group the network created itself, sized by MindSpore's communication layer:
    :func:`smsg_ms.dryrun.collectives._named_group_size`; mindformers' expert-parallel
    AlltoAllV and its sequence-parallel ReduceScatter/AllGather), else 1."""
    return int(collective.get("group_size") or len(collective.get("group", []))
               or collective.get("named_group_size") or 1)


def whole_bytes(collective: dict) -> float:
    """``S`` of a collective read from the compiled graph (see :func:`ring_bytes`).

    The node's input is the per-device tensor: for AllGather (and its micro-step variants) the
    whole tensor is ``g`` inputs; for every other kind the input itself.
    """
    shape = collective.get("in_shape") or []
    nbytes = prod(max(int(d), 0) for d in shape) * dtype_bytes(collective.get("dtype", "float32"))
    if collective["type"] in ("AllGather", "MicroStepAllGather", "MiniStepAllGather"):
        return float(nbytes * group_size(collective))
    return float(nbytes)


def collective_bytes(collectives: list[dict]) -> dict:
    """Per-device bytes sent, ``{phase: {kind: bytes}}``, and the count of collectives that move
    data (group > 1, Receive excluded since its Send is counted), under ``"count"``."""
    out: dict[str, dict[str, float]] = {p: defaultdict(float) for p in PHASES}
    count = 0
    for c in collectives:
        g = group_size(c)
        if g <= 1 and c["type"] not in ("Send",):
            continue
        if c["type"] == "Receive":
            continue
        out[phase_of(c)][c["type"]] += ring_bytes(c["type"], max(g, 2), whole_bytes(c))
        count += 1
    result = {p: dict(sorted(v.items())) for p, v in out.items()}
    result["count"] = count
    return result


def op_flops(op: dict) -> float:
    """FLOPs of one matrix product or convolution on its per-device shapes (multiply-add = 2).

    MatMul/BatchMatMul ``(…, m, k) × (…, k, n)``: ``2·m·k·n`` per batch element, computed
    transpose-free as ``2·|out|·k`` with ``k = |A_matrix| / m`` (``A``'s last two dims hold
    ``m·k`` elements whichever is transposed). Dense ``(…, k) × (n, k)``: ``2·|out|·k``.
    Conv2D ``out (N, Co, Ho, Wo)``, weight ``(Co, Ci/g, kh, kw)``: ``2·|out|·|W|/Co``;
    Conv2DBackpropInput ``(dout, W)``: ``2·|dout|·|W|/Co``; Conv2DBackpropFilter ``(dout, x) → dW``:
    ``2·|dout|·|dW|/Co``. Unknown shapes count 0.
    """
    ins, out, kind = op.get("in_shapes") or [], op.get("out_shape"), op["type"]
    if not out or len(ins) < 2 or any(s is None for s in ins[:2]) or min(out, default=0) < 0:
        return 0.0
    a, b = ins[0], ins[1]
    size = prod(out)
    if kind in ("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"):
        m = out[-2] if len(out) >= 2 else 1
        if len(a) < 2 or m <= 0:
            return 0.0
        return 2.0 * size * (a[-1] * a[-2] / m)
    if kind == "Dense":
        return 2.0 * size * (b[-1] if b else 0)
    if kind in ("Conv2D", "Conv2DExt", "ConvolutionExt", "Conv3D"):
        return 2.0 * size * prod(b) / b[0] if b and b[0] else 0.0
    if kind == "Conv2DBackpropInput":
        return 2.0 * prod(a) * prod(b) / b[0] if b and b[0] else 0.0
    if kind == "Conv2DBackpropFilter":
        return 2.0 * prod(a) * size / out[0] if out[0] else 0.0
    return 0.0


def flops(compute_ops: list[dict]) -> dict:
    """Per-device FLOPs ``{"forward": ..., "backward": ..., "total": ...}``."""
    out = {"forward": 0.0, "backward": 0.0}
    for op in compute_ops:
        out[op["pass"]] += op_flops(op)
    out["total"] = out["forward"] + out["backward"]
    return out


def memory(parameters: list[dict]) -> dict:
    """Per-device bytes of weights (``parameter``) and optimizer state (``optimizer``), from the
    per-device slice shapes of the compiled graph. The training cell of
    :meth:`smsg_ms.networks.BuiltNetwork.train_cell` uses Momentum: one state tensor per weight
    (1× the weights' bytes); Adam would keep two (2×)."""
    out = {"parameter": 0.0, "optimizer": 0.0}
    for p in parameters:
        if p.get("role") in out:
            out[p["role"]] += prod(p["shape"]) * dtype_bytes(p["dtype"])
    out["total"] = out["parameter"] + out["optimizer"]
    return out


def step_seconds(flop_count: float, comm_bytes: float, collectives: int,
                 hardware: NeutralHardware) -> float:
    """Neutral step cost in seconds: ``flops / peak + bytes / bandwidth + collectives · latency``.

    A deliberately simple roofline-plus-alpha-beta figure (Hockney's α-β model for communication),
    the same for every planner; it ignores overlap of compute and communication.
    """
    return (flop_count / hardware.peak_flops + comm_bytes / hardware.bandwidth
            + collectives * hardware.latency)


def summarize(result: dict, hardware="ascend910b") -> dict:
    """All neutral measures of one ``planner_compile`` result (see the module docstring).

    Returns ``{"collective_bytes": {phase: {kind: bytes}}, "comm_bytes": total bytes per device,
    "collectives": count, "flops": {...}, "memory": {...}, "step_seconds": s,
    "compute_seconds", "comm_seconds", "latency_seconds"}``.
    """
    hw = get_neutral_hardware(hardware)
    cb = collective_bytes(result["collectives"])
    count = cb.pop("count")
    comm = sum(sum(v.values()) for v in cb.values())
    fl = flops(result["compute_ops"])
    return {
        "collective_bytes": cb, "comm_bytes": comm, "collectives": count, "flops": fl,
        "memory": memory(result["parameters"]), "hardware": hw.name,
        "compute_seconds": fl["total"] / hw.peak_flops, "comm_seconds": comm / hw.bandwidth,
        "latency_seconds": count * hw.latency,
        "step_seconds": step_seconds(fl["total"], comm, count, hw),
    }
