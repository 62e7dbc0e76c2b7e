"""BatchNorm, 2-D ``(n, c)`` or 4-D NCHW (``ops_info/batchnorm_info.cc``).

Every dimension of x may be cut; scale, bias, mean and variance follow x's C cut
(``BatchNormInfo::CheckStrategy``). Device matrix = x's strategy. Collectives: none inserted as
graph nodes. In training, MindSpore replaces the operator by SyncBatchNorm (statistics
AllReduced over the N/H/W group) only on Ascend (``InferReplaceOps``); on CPU/GPU each device
normalises with its local statistics. The model follows the CPU dry-run (no collective; note on
the option). Scale and bias gradients are AllReduced over the devices holding the same channels.
FLOPs per element: forward 8, backward 12 per gradient (as LayerNorm's operation count).
"""
from __future__ import annotations

from .base import Einsum, numel
from .letters import Letters

TYPES = ("BatchNorm",)


def describe(op, in_shapes, out_shapes):
    x = tuple(in_shapes[0])
    if len(x) not in (2, 4) or len(in_shapes) < 5:
        return None
    lt = Letters()
    letters = "".join(lt.new(size, ch) for size, ch in zip(x, "nchw" if len(x) == 4 else "nc"))
    c = letters[1]
    outs = [letters] + [c] * (len(out_shapes) - 1)
    return Einsum("batchnorm", [letters, c, c, c, c] + [None] * (len(in_shapes) - 5), outs,
                  lt.sizes, order=letters,
                  flops_fwd=lambda s: 8 * numel(letters, s),
                  flops_bwd_per_grad=lambda s: 12 * numel(letters, s), saves=("in0",),
                  notes=["BatchNorm: local statistics per device (SyncBatchNorm only on "
                         "Ascend, not counted)"])
