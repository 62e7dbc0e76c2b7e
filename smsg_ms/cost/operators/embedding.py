"""``Embedding`` (``mint.nn.functional.embedding``, mindformers' ``parallel_core`` models):
``Embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)``: indices
first, table second (``Gather`` has them the other way round).

MindSpore's ``EmbeddingInfo`` (registered beside ``GatherInfo``, ``frontend/parallel/ops_info/``;
its C++ source is not in the public tree we read, so its rules are taken from MindSpore 2.10's
compiler in the dry-run: ``tests/test_cost_embedding.py``, 8 devices, table ``(32, 8)``):

* strategy ``(indices, table)``; the indices are never cut ("indices_strategy {8, 1} is not
  supported", also with the table uncut);
* the table's cuts use every device ("param_strategy {2, 1}", "{4, 1}" and "{1, 2}" refused on
  8 devices; ``(8, 1)``, ``(4, 2)``, ``(2, 4)``, ``(1, 8)`` accepted). MindSpore also accepts the
  table uncut (no collective at all); the model does not offer it;
* 1-D indices with the rows uncut fail inside MindSpore ("tensor_map_origin_ size must be equal
  to tensor_shape_origin_ size"): refused;
* rows cut: the masked lookups' partial sums are reduce-scattered over the row group onto the
  output's first dimension, which must divide by the row cut ("0th input shape is not
  divisible"), as ``Gather``'s row split (``gather_info.cc``, ``ShardAxisImpl``); backward: its
  AllGather. Columns cut: no collective.

Letters: indices ``t…``, table ``v h…``, output ``t… h…``. No FLOPs forward; the backward
scatter-adds one value per output element.
"""
from __future__ import annotations

from math import prod

from .base import Einsum, numel
from .letters import Letters

TYPES = ("Embedding",)


def describe(op, in_shapes, out_shapes):
    idx, table = tuple(in_shapes[0]), tuple(in_shapes[1]) if len(in_shapes) > 1 else ()
    if not idx or len(table) < 2:
        return None
    lt = Letters()
    t = "".join(lt.new(s) for s in idx)
    v = lt.new(table[0], "v")
    rest = "".join(lt.new(s) for s in table[1:])
    table_letters = v + rest

    def rule(cuts, devices):
        if any(cuts.get(ch, 1) > 1 for ch in t):
            return "Embedding (EmbeddingInfo) refuses a cut of the indices"
        rows = cuts.get("v", 1)
        if prod(cuts.get(ch, 1) for ch in table_letters) != devices:
            return ("Embedding (EmbeddingInfo): the table's cuts must use every device "
                    "(MindSpore refuses repeated calculation)")
        if rows == 1 and len(idx) == 1:
            return "Embedding (EmbeddingInfo) with 1-D indices needs the table's rows cut"
        if rows > 1 and isinstance(idx[0], int) and idx[0] % rows:
            return (f"Embedding (EmbeddingInfo): the rows' cut {rows} must divide the output's "
                    f"first dimension {idx[0]} (ReduceScatter)")
        return None

    return Einsum("embedding", [t, table_letters] + [None] * (len(in_shapes) - 2), [t + rest],
                  lt.sizes, order=table_letters + t, flops_fwd=lambda s: 0,
                  flops_bwd_per_grad=lambda s: numel(t + rest, s), saves=("in0",),
                  notes=["table rows cut, every device used, indices uncut; partial lookups "
                         "reduce-scattered onto the output's first dimension"],
                  rule=rule, scatter=t[0])
