"""Strategies that respect the axes a network declares dynamic.

MindSpore cuts a dynamic axis only by a divisor of the ``k`` of its ``Symbol(divisor=k)`` (an
axis declared ``None`` has divisor 1: never cut): ``OperatorInfo::CheckStrategyByVector``
(``frontend/parallel/ops_info/operator_info.cc``) divides the shape, or for ``-1`` the
divisor, by the cut; the dry-run's message: "shape or divisor 1 at 0 cannot be divisible by
strategy value 8, shape is [-1, 16], divisor is [1, 16]". The graph records the axes
(:attr:`smsg_ms.graph.model.TensorInfo.dynamic`, :mod:`smsg_ms.networks.dynamic_inputs`).
"""
from __future__ import annotations

import math


def letter_divisors(spec, op, tensors) -> dict[str, int]:
    """``{letter: divisor}`` of the einsum letters of ``op`` (``spec``: its
    :class:`~smsg_ms.cost.operators.base.Einsum`) that index a dynamic axis of one of its
    inputs or outputs; a letter on several takes the gcd. Empty for a static operator."""
    out: dict[str, int] = {}
    sides = list(zip(op.inputs, spec.inputs)) + list(zip(op.outputs, spec.outputs))
    for name, letters in sides:
        tensor = tensors.get(name)
        if letters is None or tensor is None or not tensor.dynamic:
            continue
        for axis, divisor in tensor.dynamic:
            if axis < len(letters):
                ch = letters[axis]
                out[ch] = math.gcd(out.get(ch, divisor), divisor)
    return out


def allowed_cuts(spec, op, tensors, devices: int) -> tuple[list[dict[str, int]], bool]:
    """``(cuts, dynamic)``: the letter assignments of
    :func:`~smsg_ms.cost.operators.base.enumerate_cuts` whose cut of each dynamic letter divides
    its divisor (:func:`letter_divisors`), and whether ``op`` has a dynamic letter."""
    from .operators.base import enumerate_cuts

    cuts = enumerate_cuts(spec, devices)
    divisors = letter_divisors(spec, op, tensors)
    if not divisors:
        return cuts, False
    return [c for c in cuts if all(d % c.get(ch, 1) == 0 for ch, d in divisors.items())], True
