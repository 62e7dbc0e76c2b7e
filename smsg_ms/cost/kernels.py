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


def kernel_seconds(flops: float, nbytes: float, launches: int, unit: str, machine) -> float:
    """``launches · launch_latency + max(flops / peak(unit), nbytes / hbm_bandwidth)``; 0 s
    without a launch."""
    if launches <= 0:
        return 0.0
    return launches * machine.launch_latency + max(float(flops) / machine.peak(unit),
                                                   float(nbytes) / machine.hbm_bandwidth)
