"""Data inputs: the layout MindSpore's data set gives them, and what each of their readers pays.

Under ``dataset_strategy`` every rank receives its slice of each data input and MindSpore's
``_VirtualDataset`` hands that layout to the input's readers: the cut dimension on the device
matrix's first axis, replicas after it (:func:`dataset_layout`; the dry-run of
:mod:`smsg_ms.networks.input_readers` inserts nothing between a ``(2, 1)`` data set on 8 devices
and readers taking ``(2, 4)`` and ``(2, 1)``, which only this arrangement explains). MindSpore accepts a data-set
strategy that cuts one dimension at most ("dataset shard strategy only support shard in one
dim", ``frontend/parallel/step_parallel.cc``), so the plan's data-set layout is the first reader's
cuts with every cut dimension after the first set to 1 (:func:`dataset_cuts`): that reader then
splits further at no cost; across the inputs, one shard number, that of the input of the most
dimensions (:func:`accepted_dataset`; the search prices each input alone, the plan's layout and
its predicted collectives follow the rule). Every other reader whose layout is not a further
split of it pays the redistribution MindSpore inserts (an AllGather, a slice after one ...),
priced in the search as an edge to the first reader, whose choice fixes the data-set layout, and
predicted like every other redistribution.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ..graph.model import OpGraph, TensorInfo


def dataset_cuts(cuts) -> tuple[int, ...]:
    """``cuts`` with only its first cut dimension kept: what ``dataset_strategy`` can hold."""
    out, kept = [], False
    for c in cuts:
        keep = int(c) > 1 and not kept
        kept = kept or keep
        out.append(int(c) if keep else 1)
    return tuple(out)


def accepted_dataset(cuts: list) -> list[tuple[int, ...]]:
    """The data inputs' cuts (each after :func:`dataset_cuts`) as MindSpore's
    ``_VirtualDataset`` accepts them (``VirtualDatasetInfo::CheckStrategy``,
    ``ops_info/virtual_dataset_info.cc``): every cut input cut the same number of ways, and the
    input of the most dimensions (the first of them) cut that many ways too ("If using shard,
    the max length input must be shard"). The shard number is that input's; an input cut
    another number of ways is left whole (every rank reads all of it, and a reader's slice of
    a whole tensor needs no collective), all of them when that input is not cut."""
    cuts = [tuple(int(c) for c in x) for x in cuts]
    if not cuts:
        return cuts
    longest = max(range(len(cuts)), key=lambda i: (len(cuts[i]), -i))
    shard = prod(cuts[longest])
    return [c if shard > 1 and prod(c) == shard else (1,) * len(c) for c in cuts]


def dataset_layout(cuts, devices: int):
    """The :class:`~smsg_ms.cost.layout.TensorLayout` of a data input of per-dimension
    ``cuts`` (after :func:`dataset_cuts`) on ``devices`` devices: the cut dimension on the
    first device-matrix axis, the replicas on the right; replicated when nothing is cut."""
    from ..cost.layout import TensorLayout, operator_layout

    kept = dataset_cuts(cuts)
    cut = [i for i, c in enumerate(kept) if c > 1]
    if not cut:
        return TensorLayout.replicated(len(kept), devices)
    return operator_layout([kept[cut[0]]], [0 if i == cut[0] else None
                                            for i in range(len(kept))], devices)


@dataclass(frozen=True)
class InputRead:
    """One operator reading a data input: the tensor, the reader (operator id, input position,
    its search variable and call) and whether it is the first reader (the one whose layout
    fixes the data-set layout)."""

    tensor: TensorInfo
    reader: int
    position: int
    variable: int
    call: int

    def layout(self, variables, option: int):
        """The reader's input layout under option ``option`` of its variable."""
        return variables[self.variable].options[option][self.call].in_layouts[self.position]


def input_reads(graph: OpGraph, index: dict) -> list[tuple[InputRead, list[InputRead]]]:
    """Per data input read by a planned operator: ``(first read, other reads)`` in graph order
    (``index``: :func:`smsg_ms.planner.variables.variable_index`)."""
    out = []
    for name in graph.inputs:
        t = graph.tensors[name]
        reads = []
        for op_id in t.consumers:
            if op_id not in index:
                continue
            op = graph.ops[op_id]
            for pos, n in enumerate(op.inputs):
                if n == name:
                    reads.append(InputRead(t, op_id, pos, *index[op_id]))
        if reads:
            out.append((reads[0], reads[1:]))
    return out


def _dataset_source(model, first: InputRead, variables, first_option: int, cuts):
    """The data-set layout a read redistributes from: ``cuts`` (the input's accepted data-set
    cuts) when given, else ``first``'s under ``first_option``."""
    return dataset_layout(first.layout(variables, first_option).cuts if cuts is None else cuts,
                          model.devices)


def read_seconds(model, first: InputRead, read: InputRead, variables, first_option: int,
                 option: int, cuts=None) -> float:
    """Seconds of the redistribution from the data-set layout (fixed by ``first`` under
    ``first_option``, or ``cuts``: the input's accepted data-set cuts) into ``read``'s layout
    under ``option``."""
    src = _dataset_source(model, first, variables, first_option, cuts)
    dst = read.layout(variables, option)
    a, b = model.normalized(src), model.normalized(dst)
    return 0.0 if a == b else model.redistribution_seconds(read.tensor, a, b)


def read_collectives(model, first: InputRead, read: InputRead, variables, choice,
                     cuts=None) -> list:
    """The collectives of that redistribution under the plan's ``choice`` (``cuts``: as in
    :func:`read_seconds`)."""
    src = _dataset_source(model, first, variables, choice[first.variable], cuts)
    dst = read.layout(variables, choice[read.variable])
    if model.normalized(src) == model.normalized(dst):
        return []
    return model.redistribution(read.tensor, src, dst)


__all__ = ["InputRead", "accepted_dataset", "dataset_cuts", "dataset_layout", "input_reads",
           "read_collectives", "read_seconds"]
