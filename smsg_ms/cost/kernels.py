"""Every micro-step costs time: an operator's launches and its roofline time.

One operator under one strategy runs, per device, one kernel forward and one backward kernel per
input that receives a gradient (MindSpore's bprop builders return one gradient per input, each
computed by its own operator(s): ``MatMul``'s bprop is two MatMuls, ``dx = dout · wᵀ`` and
``dw = xᵀ · dout``, ``frontend/expander/bprop/grad_ops/grad_math_ops.cc``; an input without a
gradient gets none: autodiff prunes it). Each launch costs the device's ``launch_latency``.

A kernel's time is the roofline (Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 2009): ``max(FLOPs / peak of its unit,
bytes it reads and writes / HBM bandwidth)``. Bytes per device: forward reads the input slices
and writes the output slices; backward reads the output gradients, reads the inputs it needs
(counted whole: a bound) and writes the input gradients. Units: the matrix unit (``cube``:
Ascend Cube, Tensor Cores) for the matrix families (:data:`CUBE_TYPES`, the MatMul, Conv2D and
FlashAttentionScore families of the registry), the vector unit for everything else, so norms,
softmax, element-wise and layout operators are memory-bound.

A matrix product's kernel computes its output in tiles, one tile per matrix unit at a time, in
waves (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, §3: tile and wave
quantization): a product whose output slice has ``t`` tiles of ``tm × tn`` runs
``ceil(t / units)`` full waves, so its matrix-unit time is its FLOPs at peak times
:func:`wave_quantization` ``= ceil(t / units)·units·tm·tn / (rows·columns)`` (≥ 1: the padded
tiles and the idle units of the last wave). This is what makes a small micro-batch's GEMMs slower
per FLOP (a 2,048 × 5,400 output on an A100 fills 344 tiles: 4 waves of 108 for 3.2 waves of
work, 78 % of peak). A product of less than one wave of tiles is taken at peak: cuBLAS then runs
smaller tiles (the guide's §2.3), whose efficiency the model does not know. The backward pass of a product runs one product per input gradient
(``dx = dout·wᵀ`` has ``x``'s shape, ``dw = xᵀ·dout`` has ``w``'s), each with the forward's
FLOPs, so its factor is the mean of the factors of those outputs. Machines without
``matrix_units`` (the Ascend preset: its Cube tiling is not published per shape) take 1.

Operators MindSpore runs as no kernel at all (``Reshape``, ``ExpandDims``, ``Squeeze``,
``Flatten``: "nop nodes", removed from the kernel graph, ``common::AnfAlgo::IsNopNode``,
``mindspore/ccsrc/include/common/utils/anfalgo.h``) cost neither launch nor bytes.
"""
from __future__ import annotations

from math import prod

from .operators import conv, flash_attention, matmul

#: operator types computed on the matrix unit
CUBE_TYPES = frozenset(matmul.TYPES) | frozenset(conv.TYPES) | frozenset(flash_attention.TYPES)
#: operator types MindSpore removes from the kernel graph (no launch, no memory traffic)
NOP_TYPES = frozenset({"Reshape", "ExpandDims", "Squeeze", "Flatten"})


def unit_of(op_type: str) -> str:
    """``cube`` for :data:`CUBE_TYPES`, else ``vector``."""
    return "cube" if op_type in CUBE_TYPES else "vector"


def slice_bytes(shape, elem_bytes: int, shards: int) -> float:
    """Bytes of one device's slice of a tensor of global ``shape`` (elements) cut into
    ``shards`` slices (a symbolic dimension counts 1)."""
    n = prod(s for s in shape if isinstance(s, int) and s > 0) if shape else 1
    return float(n) * elem_bytes / max(shards, 1)


def traffic(op_type: str, in_bytes, out_bytes, grads) -> tuple[float, float, int, int]:
    """``(bytes_fwd, bytes_bwd, launches_fwd, launches_bwd)`` of one operator on one device.

    Args:
        in_bytes: per-device bytes of each input slice; ``out_bytes``: of each output slice.
        grads: per input, whether it receives a gradient.
    """
    if op_type in NOP_TYPES:
        return 0.0, 0.0, 0, 0
    fwd = float(sum(in_bytes) + sum(out_bytes))
    n_grad = sum(1 for g in grads if g)
    if not n_grad:
        return fwd, 0.0, 1, 0
    bwd = float(sum(out_bytes) + sum(in_bytes)
                + sum(b for b, g in zip(in_bytes, grads) if g))
    return fwd, bwd, 1, n_grad


def wave_quantization(shape, machine) -> float:
    """Matrix-unit time over ideal time (≥ 1) of a product whose per-device output slice has
    ``shape`` (elements; leading dimensions are a batch of independent products, the last two
    the rows and columns); 1 when ``machine`` has no ``matrix_units`` or a dimension is
    symbolic, or when the product has fewer tiles than ``matrix_units`` (less than one wave:
    cuBLAS then picks smaller tiles, whose efficiency is not modelled: taken as ideal). See the
    module docstring (NVIDIA's GEMM guide §3)."""
    units, tile = getattr(machine, "matrix_units", None), getattr(machine, "gemm_tile", None)
    if units is None or tile is None or not shape:
        return 1.0
    dims = [int(s) if isinstance(s, int) and s > 0 else 0 for s in shape]
    if not all(dims):
        return 1.0
    rows, cols = (dims[-2], dims[-1]) if len(dims) >= 2 else (1, dims[-1])
    batch = prod(dims[:-2]) if len(dims) > 2 else 1
    tiles = batch * -(-rows // tile[0]) * -(-cols // tile[1])
    if tiles < units:       # under one wave cuBLAS takes smaller tiles: not modelled, ideal
        return 1.0
    waves = -(-tiles // units)
    return waves * units * tile[0] * tile[1] / (batch * rows * cols)


def kernel_seconds(flops: float, nbytes: float, launches: int, unit: str, machine,
                   quantization: float = 1.0) -> float:
    """``launches · launch_latency + max(flops · quantization / peak(unit), nbytes /
    hbm_bandwidth)``; 0 s without a launch. ``quantization``: :func:`wave_quantization` of a
    matrix product (1 otherwise)."""
    if launches <= 0:
        return 0.0
    return launches * machine.launch_latency + max(
        float(flops) * quantization / machine.peak(unit), float(nbytes) / machine.hbm_bandwidth)


def update_seconds(memory: dict, hbm_bandwidth: float) -> float:
    """The optimizer's update of the trained weights whose bytes per device ``memory`` gives
    (``gradient``, ``optimizer``: :data:`smsg_ms.cost.api.MEMORY_KINDS`), once per step and
    memory-bound: read and write the weight and the optimizer state, read the gradient twice
    (clipping norm, update), ``2·(weight + optimizer) + 2·gradient`` bytes over
    ``hbm_bandwidth`` (bytes/s), a trained weight having its gradient's bytes (same dtype).
    The per-element count of :meth:`smsg_ms.cost.pipeline.Links.update_seconds` (sources
    there)."""
    grad, opt = float(memory.get("gradient", 0)), float(memory.get("optimizer", 0))
    return update_traffic(grad, opt, grad) / hbm_bandwidth


def update_traffic(weight: float, optimizer: float, gradient: float) -> float:
    """Bytes the optimizer's update moves for weight, optimizer-state and gradient bytes (per
    element or per device): read and write the weight and the state, read the gradient twice
    (the global norm of gradient clipping, then the update): ``2·(weight + optimizer) +
    2·gradient``. Sources: :meth:`smsg_ms.cost.param_traffic.ParamTraffic.update_seconds`."""
    return 2 * (weight + optimizer) + 2 * gradient
