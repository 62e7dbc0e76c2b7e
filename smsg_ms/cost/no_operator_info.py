"""Primitives MindSpore's parallel compiler has no ``OperatorInfo`` for (the scalar-operand
ops ``Divs``, ``Adds``, ``Subs``: ``x / 2.0`` on a tensor in a network's ``construct``).

MindSpore's rule (``OperatorInstance``, ``frontend/parallel/step_parallel_utils.cc``): a
primitive with no ``<Name>Info`` class becomes ``StandAloneInfo`` (every input and output
whole on every device) when the first dimension of its first input or of its first output does
not divide by the stage's device count, else ``BatchParallelInfo``
(``ops_info/batch_parallel_info.cc``: device matrix ``(devices,)``, each input's first
dimension cut ``devices``-way, ``CheckStrategy`` accepts no other cut). All or nothing: unlike
the batch-parallel default of a primitive that has an ``OperatorInfo`` but no strategy
(``GenerateBatchStrategiesWithCheck``, the gcd of the device count and the first dimensions,
:func:`smsg_ms.cost.model.batch_parallel_cut`), 4 rows on 8 devices stay whole, not 4-way.
"""
from __future__ import annotations

#: primitives without an ``OperatorInfo`` in MindSpore 2.10: its ``libmindspore_frontend.so``
#: defines ``mindspore::parallel::MulsInfo``, ``InplaceDivsInfo``, ``InplaceMulsInfo``, but no
#: ``DivsInfo``, ``AddsInfo`` or ``SubsInfo`` class (``OperatorInstanceByName`` looks up
#: ``<Name>Info``); the ``Divs`` case is pinned by the dry-run (``tests/test_kept_layout_order.py``)
NO_OPERATOR_INFO = frozenset({"Divs", "Adds", "Subs"})


def has_no_operator_info(op_type: str) -> bool:
    """Whether MindSpore lays ``op_type`` out by :func:`all_or_nothing_cut`."""
    return op_type in NO_OPERATOR_INFO


def all_or_nothing_cut(devices: int, first_in, first_out) -> int:
    """Cut of every input's first dimension for a primitive without ``OperatorInfo``:
    ``devices`` when the first dimension of the first input (``first_in``, elements) and of the
    first output (``first_out``) both divide by ``devices`` (``BatchParallelInfo``), else 1
    (``StandAloneInfo``). A dynamic size (``-1``) does not divide (C++'s ``-1 % n`` is
    ``-1``); a symbolic one (not an int: the symbolic cost) is taken to. No shape: 1."""
    for size in (first_in, first_out):
        if size is None or (isinstance(size, int) and size % devices):
            return 1
    return devices


def op_cut(graph, op, devices: int) -> tuple[list[str], int]:
    """``(inputs cut, cut)`` of ``op`` (an :class:`~smsg_ms.graph.model.OpNode` of ``graph``
    without ``OperatorInfo``): every input with a shape, cut on its first dimension by
    :func:`all_or_nothing_cut`."""
    def first(names):
        shape = graph.tensors[names[0]].shape if names else ()
        return shape[0] if shape else None

    split = [name for name in op.inputs if graph.tensors[name].shape]
    return split, all_or_nothing_cut(devices, first(op.inputs), first(op.outputs))
