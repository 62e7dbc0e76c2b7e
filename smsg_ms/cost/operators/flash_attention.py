"""FlashAttentionScore (``frontend/parallel/ops_info/flash_attention_score_info.cc``).

Inputs (by position): query, key, value, real_shift, drop_mask, padding_mask, attn_mask, prefix,
actual_seq_qlen, actual_seq_kvlen, then the attributes head_num (10), keep_prob, scale_value,
pre_tokens, next_tokens, inner_precise, input_layout (16: 0 BSH, 1 BNSD, 2 SBH, 3 BSND, 4 TND),
sparse_mode (17). Outputs: softmax_max, softmax_sum ``(B, N1, S1, 8)``, softmax_out, attention_out
(query's shape and layout).

MindSpore's rules (``CheckStrategy``, ``InitExpectedStrategies``): key and value share one
strategy; the head cut divides ``head_num``; key's sequence (S2) is never cut; the head
dimension D never; with several KV heads (``kv_split_``) the KV head cut equals the query head
cut (one letter here), with one (MQA) it is uncut; attn_mask ``(B|1, N1|1, S1, S2)`` or
``(S1, S2)`` follows the batch and head cuts where it has those dimensions. Batch and head cuts
need no collective (each device attends its own heads of its own sequences).

Context parallel: a query sequence (S1) cut, each device attending its query chunk to whole keys
and values (which its neighbours gather: a redistribution, AllGather forward, ReduceScatter
backward), with no collective inside the operator (compiled in the dry-run for BNSD full
attention and BSH ``sparse_mode`` 0 and 2: ``tests/test_context_parallel.py``,
``scripts/context_parallel_forms.py``; the layout TND, which 2.10 also cuts, is not modelled
here). Read from the source (the stored ``flash_attention_score_info.cc`` predates 2.10, whose
header adds ring attention and FlashSP: docs/sequence-parallel.md for what its dry-run does with
them): for the causal modes (2 left-up, 3 right-down) and the band (4) the
attn_mask is the compressed ``(2048, 2048)`` one and stays whole (``is_attn_mask_compressed_``),
and ``ReplaceNodeInputOrAttrs`` rewrites each split to ``sparse_mode`` 4 with its own
``pre_tokens``/``next_tokens`` (``GetAttentionMaskAttrs``). It rebalances the causal splits only
under the context flag ``enable_flash_attention_load_balance`` (``ComputeReplaceGraphForLoadBalance``: each
rank keeps half its chunk and swaps the other half with its mirror rank, AllGathers over 2
devices), off by default and never set by smsg-ms, so a causal split costs what the slowest
rank does: the last query chunk, which sees the most keys (:func:`causal_pairs`). Modelled:
full attention (``sparse_mode`` 0, default tokens, no attn_mask) and the causal modes 2 and 3.
Refused by the rule with a reason: repeated calculation (cuts that use fewer devices than the
stage has: MindSpore then AllReduces the query/key/value gradients in the backward pass, seen
in the dry-run), an S1 cut of banded attention or of an explicit full-size attn_mask (MindSpore
cuts that mask along S1 too), the TND layout. Inputs other than query/key/value/attn_mask
(real_shift, drop_mask, padding_mask, prefix, actual sequence lengths) give no declaration
(MindSpore's default then).
Grouped KV heads (N2 < N1, GQA): key and value share the query's head letter (one cut, which
must divide N2 as MindSpore requires) and their memory is counted at their own N2 heads
(:attr:`Einsum.input_sizes`); their redistribution uses the tensors' own shapes.

FLOPs (Dao et al., FlashAttention, 2022): forward ``4·B·N1·D`` per unmasked (query, key) pair
(QKᵀ and PV): ``S1·S2`` pairs for full attention, the causal splits' pairs by
:func:`causal_pairs` (the kernel skips masked blocks: that is what the sparse modes are for);
backward 2.5× forward (QKᵀ recomputed, dV, dP, dQ, dK), spread over the three gradients.
"""
from __future__ import annotations

from .base import Einsum, div, numel
from .letters import Letters

TYPES = ("FlashAttentionScore",)

#: input_layout enum (``mindspore.ops.FlashAttentionScore(input_layout=...)``)
LAYOUTS = {0: "BSH", 1: "BNSD", 2: "SBH", 3: "BSND", 4: "TND"}
#: tensor inputs this family declares: query, key, value, attn_mask
DECLARED = (0, 1, 2, 6)


def _attr(op, name: str, index: int, default):
    value = op.attrs.get(name, op.attrs.get(f"input{index}", default))
    return default if value is None else value


def input_layout(op):
    """FlashAttentionScore's ``input_layout`` attribute of ``op`` (a name such as ``"BSH"`` or
    ``"BNSD"``, or its index in MindSpore's enum; input 16 of the primitive, default 0)."""
    return _attr(op, "input_layout", 16, 0)


#: pre_tokens / next_tokens default: every key visible
ALL_TOKENS = 2147483647


#: causal sparse modes: 2 left-up (query i sees keys 0..i), 3 right-down (keys 0..i + S2 - S1)
CAUSAL = (2, 3)


def _mask_kind(op, in_shapes) -> str:
    """``full``: no attn_mask, ``sparse_mode`` 0 and ``pre_tokens``/``next_tokens`` at their
    default (every query attends every key); ``causal``: ``sparse_mode`` 2 or 3 (the attn_mask,
    if any, is the compressed one, never cut); ``other``: anything else (bands, explicit
    masks, ``sparse_mode`` 1 and the prefix modes)."""
    mode = int(_attr(op, "sparse_mode", 17, 0))
    if mode in CAUSAL:
        return "causal"
    if (len(in_shapes) == 3 and mode == 0
            and int(_attr(op, "pre_tokens", 13, ALL_TOKENS)) >= ALL_TOKENS
            and int(_attr(op, "next_tokens", 14, ALL_TOKENS)) >= ALL_TOKENS):
        return "full"
    return "other"


def causal_pairs(chunk, s1: int, s2: int, mode: int):
    """Unmasked (query, key) pairs of the slowest query chunk of a causal mask.

    Query row ``i`` (``0 <= i < s1``) sees keys ``0..i + off`` clipped to ``[0, s2)``, with
    ``off`` 0 for ``sparse_mode`` 2 (left-up) and ``s2 - s1`` for 3 (right-down)
    (``flash_attention_score_info.cc``, ``GetAttentionMaskAttrs``). The rows' counts never
    decrease with ``i``, so the last chunk (rows ``s1 - chunk .. s1 - 1``) is the slowest:
    ``Σ clip(i + 1 + off, 0, s2)`` over its rows. ``chunk == s1`` (no cut): the whole mask,
    ``s1·(s1 + 1)/2`` pairs when ``s1 == s2``.

    Args:
        chunk: query rows per device (``s1 / cp``; an int, or a sympy expression, for which
            the unclipped sum is returned).
        s1, s2: global query and key sequence lengths.
        mode: ``sparse_mode`` (2 or 3).
    """
    off = 0 if mode == 2 else s2 - s1
    lo = s1 - chunk                       # first row of the last chunk
    if not isinstance(chunk, int):
        return chunk * (lo + off) + chunk * (chunk + 1) / 2

    def tri(n):                           # 1 + 2 + ... + n
        return n * (n + 1) // 2 if n > 0 else 0

    # rows whose count i + 1 + off lies in [1, s2): a ramp; rows past it see all s2 keys
    first = max(lo, -off)                 # first row seeing at least one key
    full_from = max(first, min(s1, s2 - 1 - off))     # first row seeing all s2 keys
    ramp = tri(full_from + off) - tri(first + off) if full_from > first else 0
    return ramp + (s1 - full_from) * s2


def describe(op, in_shapes, out_shapes):
    layout = _attr(op, "input_layout", 16, 0)
    layout = LAYOUTS.get(layout, layout) if isinstance(layout, int) else str(layout)
    # tensor inputs are the positions 0..9 that the graph did not record as constants
    passed = [i for i in range(10) if f"input{i}" not in op.attrs][:len(in_shapes)]
    if len(passed) != len(in_shapes) or any(i not in DECLARED for i in passed) \
            or passed[:3] != [0, 1, 2]:
        return None
    q, k = tuple(in_shapes[0]), tuple(in_shapes[1])
    heads = int(_attr(op, "head_num", 10, 1))
    lt = Letters()
    if layout in ("BNSD", "BSND"):
        b, n = lt.new(q[0], "b"), lt.new(q[1 if layout == "BNSD" else 2], "n")
        s, d = lt.new(q[2 if layout == "BNSD" else 1], "s"), lt.new(q[3], "d")
        t = lt.new(k[2 if layout == "BNSD" else 1], "t")
        kv_heads = k[1 if layout == "BNSD" else 2]
        g = n if kv_heads > 1 else lt.dummy()
        if layout == "BNSD":
            ql, kl = b + n + s + d, b + g + t + d
        else:
            ql, kl = b + s + n + d, b + t + g + d
    elif layout in ("BSH", "SBH"):
        bi, si = (0, 1) if layout == "BSH" else (1, 0)
        b, s, n = lt.new(q[bi], "b"), lt.new(q[si], "s"), lt.new(q[2], "h")
        t = lt.new(k[si], "t")
        kv_heads = k[2] * heads // q[2] if q[2] else 0
        g = n if kv_heads > 1 else lt.dummy()
        ql = b + s + n if layout == "BSH" else s + b + n
        kl = b + t + g if layout == "BSH" else t + b + g
        d = ""
    else:
        return _refused(op, in_shapes, out_shapes, f"FlashAttentionScore layout {layout} is not "
                        "modelled")
    inputs = [ql, kl, kl]
    head_mask = len(in_shapes) == 4 and len(in_shapes[3]) == 4 and in_shapes[3][1] > 1 \
        and not d
    if len(in_shapes) == 4:
        mask = tuple(in_shapes[3])
        if len(mask) == 2:
            inputs.append(lt.dummy() + lt.dummy())
        else:
            inputs.append((b if mask[0] > 1 else lt.dummy()) + (n if mask[1] > 1 and
                          layout in ("BNSD", "BSND") else lt.dummy()) + lt.dummy() + lt.dummy())
    # softmax_max/sum (B, N1, S1, 8) in every layout, tensor map (batch, n1, s1, -1): cut like
    # the query's batch, heads and query sequence (``InferTensorMap``); in BSH/SBH the head
    # letter is the query's H = N1·D, so these outputs count it at N1 (its cut divides
    # head_num: :func:`rule`)
    stat = b + n + s + lt.new(8, "e")
    stat_sizes = {} if d else {0: {n: heads}, 1: {n: heads}}
    outs = [stat, stat, lt.dummy(), ql][:len(out_shapes)]
    fixed = {t: "FlashAttentionScore key sequence (S2) is never cut"}
    kind = _mask_kind(op, in_shapes)
    if kind == "other":
        fixed[s] = ("FlashAttentionScore query sequence (S1) cut of banded or explicitly masked "
                    "attention is not modelled (causal sparse_mode 2/3 and full attention are)")
    if d:
        fixed[d] = "FlashAttentionScore head dimension D is never cut"

    def rule(cuts, devices):
        used = 1
        for ch in set(ql + kl):
            used *= cuts.get(ch, 1)
        if used != devices:
            return ("FlashAttentionScore with repeated calculation (cuts using fewer devices) is "
                    "not modelled: MindSpore then AllReduces the query/key/value gradients")
        c = cuts.get(n, 1)
        if heads % c:
            return f"FlashAttentionScore head cut {c} must divide head_num {heads}"
        if g == n and isinstance(kv_heads, int) and kv_heads % c:
            return f"FlashAttentionScore head cut {c} must divide the {kv_heads} KV heads"
        if c > 1 and head_mask:
            return (f"FlashAttentionScore layout {layout}: a head cut with a per-head attn_mask "
                    "is not modelled")
        return None

    # BSH/SBH: n is H = N1·D, so numel(b + n + d) is B·N1·D either way
    s1, s2, mode = lt.sizes[s], lt.sizes[t], int(_attr(op, "sparse_mode", 17, 0))

    def fwd(sizes):
        if kind == "causal" and isinstance(s1, int) and isinstance(s2, int):
            pairs = causal_pairs(sizes[s], s1, s2, mode)
        else:  # full attention (a symbolic causal length: counted whole, an over-estimate)
            pairs = sizes[s] * sizes[t]
        return 4 * numel(b + n + d, sizes) * pairs

    order = {"BNSD": b + n + s, "BSND": b + s + n, "BSH": b + s + n, "SBH": s + b + n}[layout]
    # grouped KV heads (N2 < N1): key and value share the query's head letter (one cut) but
    # hold N2 heads, so their bytes are counted at their own size
    kv_size = kv_heads if d else k[2]
    kv_sizes = {i: {n: kv_size} for i in (1, 2)} if g == n and kv_size != lt.sizes[n] else {}
    return Einsum("flash_attention", inputs, outs, lt.sizes, order=order, fixed=fixed,
                  reduce_op=None, flops_fwd=fwd, input_sizes=kv_sizes,
                  output_index_sizes=stat_sizes,
                  flops_bwd_per_grad=lambda sizes: div(5 * fwd(sizes), 6),
                  saves=("in0", "in1", "in2", "out0", "out1", "out3"),
                  notes=["batch, head and (full or causal attention) query-sequence cuts, no "
                         "collective; S2, D uncut; a causal split costs its slowest rank's"],
                  rule=rule)


def _refused(op, in_shapes, out_shapes, reason: str):
    """A declaration whose every cut is refused with ``reason`` (unsupported layouts)."""
    lt = Letters()
    letters = ["".join(lt.new(x) for x in shape) for shape in in_shapes]
    outs = ["".join(lt.new(x) for x in shape) for shape in out_shapes]
    fixed = {ch: reason for ch in "".join(letters + outs)}
    return Einsum("flash_attention", letters, outs, lt.sizes, order="".join(letters),
                  fixed=fixed, reduce_op=None, notes=[reason])
