"""Expert parallelism: when a graph has expert layers, and so when smsg-ms turns MindSpore's
``enable_alltoall`` on.

An expert layer, in the form MindSpore's semi-auto parallel expresses expert parallelism
(mindformers' MoE v1, ``mindformers/modules/transformer/moe.py``; the built-in ``moe``), is a
``BatchMatMul`` whose weight is a stacked parameter ``(E, d_in, d_out)``, one matrix per expert.
Cutting its expert axis ``E`` moves the cut of the dispatched tokens from their batch axis to
the expert axis and back; MindSpore's tensor redistribution performs such a move
(``tensor_layout/redistribution_operator_infer.cc``, ``InferPermuteByAxis``) as one AlltoAll when
``enable_alltoall`` is on, and as an AllGather then a slice when it is off (its default; seen in
the dry-run, ``tests/test_moe.py``). The AlltoAll sends ``(g−1)/g`` of the tensor where the
AllGather receives ``g−1`` times it, so expert layers are planned, and compiled, with it on.
"""
from __future__ import annotations

#: primitives whose stacked 3-D parameter weight marks an expert layer
EXPERT_MATMULS = ("BatchMatMul", "BatchMatMulExt")


def expert_weights(graph) -> list[str]:
    """Names of the stacked expert weights of ``graph`` (an :class:`~smsg_ms.graph.model.OpGraph`):
    the 3-D parameters read as input 1 of a ``BatchMatMul``, in graph order, each once."""
    out: list[str] = []
    for op in graph.ops:
        if op.type not in EXPERT_MATMULS or len(op.inputs) < 2:
            continue
        tensor = graph.tensors.get(op.inputs[1])
        if tensor is not None and tensor.kind == "parameter" and len(tensor.shape) == 3 \
                and tensor.name not in out:
            out.append(tensor.name)
    return out


def wants_alltoall(graph) -> bool:
    """True when ``graph`` has expert layers (:func:`expert_weights`): plan and compile it with
    MindSpore's ``enable_alltoall`` on."""
    return bool(expert_weights(graph))
