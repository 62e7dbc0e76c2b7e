"""Named shape presets (``--shape llama2-70b``) and the width flags of the command line.

A preset is a published model's widths as network options. It applies to the built-in networks
of its architecture, or to a ``package.module:function`` that takes all its options; a preset
is refused for the built-ins of another architecture with the reason (the MoE presets build with
the built-in ``moe``; DeepSeek-V3 without its multi-head latent attention: ``Shape.note``). Options given explicitly override the preset's.

Sequence length is the pre-training context of the source; weights are 16-bit (``float16``: the
models train in bf16, the same 2 bytes per element).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError


class ShapeError(InputError):
    """A preset or width flag that the chosen network cannot take; one-line message."""


@dataclass(frozen=True)
class Shape:
    """A published model's widths.

    ``options``: network options (``hidden``, ``heads``, ``kv_heads``, ``ffn``, ``vocab``,
    ``layers``, ``seq``, ``dtype``, and ``experts``/``top_k`` for mixture of experts).
    ``builtins``: the built-in networks that have the model's architecture. ``missing``: what the
    built-ins lack, for the refusal, when ``builtins`` is empty.
    """

    options: dict
    builtins: tuple = ()
    missing: str = ""
    note: dict = field(default_factory=dict)


_LLAMA = ("llama", "mf-llama")
_MOE = ("moe",)

SHAPES: dict[str, Shape] = {
    # Touvron et al. 2023, "Llama 2", Table 1 (70B: GQA, 4k context) and the model card's
    # config.json (meta-llama/Llama-2-70b-hf: hidden_size 8192, num_attention_heads 64,
    # num_key_value_heads 8, intermediate_size 28672, num_hidden_layers 80, vocab_size 32000)
    "llama2-70b": Shape(dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000,
                             layers=80, seq=4096, dtype="float16"), _LLAMA),
    # Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (layers, model dimension, FFN
    # dimension, attention heads, key/value heads); vocab 128256 and context 8192 from the model
    # card's config.json (meta-llama/Meta-Llama-3-8B, -70B; Llama-3.1-405B)
    "llama3-8b": Shape(dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                            layers=32, seq=8192, dtype="float16"), _LLAMA),
    "llama3-70b": Shape(dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256,
                             layers=80, seq=8192, dtype="float16"), _LLAMA),
    "llama3-405b": Shape(dict(hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256,
                              layers=126, seq=8192, dtype="float16"), _LLAMA),
    # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (n_layers 96,
    # d_model 12288, n_heads 96, context 2048; FFN 4·d_model, GPT-2's 50257-token vocabulary).
    # Built-in bert has GPT-3's operators at these shapes (LayerNorm, four h×h projections with
    # bias, GELU FFN h→4h→h, Gather embeddings) but is an encoder: no causal mask (an
    # elementwise op on the scores, same shape), a pooler, post-norm; llama has RmsNorm/SwiGLU
    "gpt3-175b": Shape(dict(hidden=12288, heads=96, ffn=49152, vocab=50257, layers=96,
                            seq=2048, dtype="float16"), ("bert",),
                       note={"llama": "llama has RmsNorm and a 3-matrix SwiGLU MLP where GPT-3 "
                                      "has LayerNorm and a 2-matrix GELU MLP (use bert)",
                             "mf-llama": "mf-llama has RmsNorm and a 3-matrix SwiGLU MLP where "
                                         "GPT-3 has LayerNorm and a 2-matrix GELU MLP (use "
                                         "bert)"}),
    # Jiang et al. 2024, "Mixtral of Experts", Table 1 (dim 4096, n_layers 32, n_heads 32,
    # n_kv_heads 8, hidden_dim 14336, vocab 32000, context 32768, 8 experts, top-2)
    "mixtral-8x7b": Shape(dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000,
                               layers=32, seq=32768, dtype="float16", experts=8, top_k=2),
                          _MOE),
    # DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §4.2 (61 layers, hidden 7168, 128 heads,
    # MLA with KV compression 512, 1 shared + 256 routed experts of width 2048, 8 activated,
    # first 3 layers dense) and config.json (intermediate_size 18432, vocab_size 129280);
    # pre-training sequence 4096. The built-in moe has every layer MoE and multi-head attention
    # in place of MLA (no KV compression): its attention weights and FLOPs are those of
    # 128 full heads of width 56, not DeepSeek-V3's
    "deepseek-v3": Shape(dict(hidden=7168, heads=128, ffn=18432, vocab=129280, layers=61,
                              seq=4096, dtype="float16", experts=256, top_k=8, expert_ffn=2048,
                              shared_experts=1), _MOE,
                         note={"moe": "built with multi-head attention in place of multi-head "
                                      "latent attention, and MoE in all 61 layers (DeepSeek-V3's "
                                      "first 3 are dense)"}),
}

#: command-line flag → network option
WIDTH_FLAGS = {"hidden": "hidden", "heads": "heads", "kv_heads": "kv_heads", "ffn": "ffn",
               "vocab": "vocab", "experts": "experts", "top_k": "top_k", "attention": "attention"}
_EXPERT_OPTIONS = ("experts", "top_k")
#: built-in networks that take the expert options
_WITH_EXPERTS = ("moe",)


def resolve_shape(network: str, preset: str | None, given: dict) -> dict:
    """The network options of ``preset`` for ``network``, overridden by ``given``.

    Args:
        network: built-in name or ``package.module:function``.
        preset: a key of :data:`SHAPES`, or ``None``.
        given: options given explicitly (``None`` values are left out).

    Returns:
        The merged options (the network's own check of them comes later).

    Raises:
        ShapeError: unknown preset; a preset the built-in ``network`` cannot express; expert
            options for a built-in other than ``moe``.
    """
    from . import BUILTINS

    given = {k: v for k, v in given.items() if v is not None}
    experts = sorted(k for k in _EXPERT_OPTIONS if k in given)
    if experts and network in BUILTINS and network not in _WITH_EXPERTS:
        flags = "/".join("--" + k.replace("_", "-") for k in experts)
        raise ShapeError(f"{flags}: network '{network}' has no experts (use the built-in 'moe', "
                         f"or a package.module:function taking {'/'.join(experts)})")
    if preset is None:
        return given
    if preset not in SHAPES:
        raise ShapeError(f"unknown --shape '{preset}': choose one of {', '.join(SHAPES)}")
    shape = SHAPES[preset]
    if network in BUILTINS and network not in shape.builtins:
        if shape.missing:
            reason = f"it needs {shape.missing}, which no built-in network has"
        else:
            reason = shape.note.get(network) or (
                f"'{network}' is not its architecture (built-ins that are: "
                f"{', '.join(shape.builtins)})")
        raise ShapeError(f"--shape {preset} cannot be built with '{network}': {reason}")
    return {**shape.options, **given}


def shape_note(network: str, preset: str | None) -> str | None:
    """What the built-in ``network`` changes of ``preset``'s model when it builds it (DeepSeek-V3
    with the built-in ``moe``: no multi-head latent attention), or ``None``."""
    shape = SHAPES.get(preset or "")
    if shape is None or network not in shape.builtins:
        return None
    return shape.note.get(network)
