"""The model a mindformers run configuration (``run_mindformer.py``'s YAML) describes, as a network
spec: ``smsg_ms.networks.mf_run:build`` with the option ``run_config=PATH``.

The model is resolved the way mindformers 1.9.0 resolves it for ``use_legacy: False``
(``mindformers/models/build_model.py`` ``build_model``): the ``model.model_config`` mapping (merged
over the Hugging Face ``config.json`` of ``pretrained_model_dir`` when the YAML names one,
``models/build_config.py`` ``get_model_config``) gives the configuration class by its
``model_type`` and the model class by ``architectures[0]``, both from mindformers' registry
(``MindFormerRegister``); no table of model names is kept here.

Depth and width options replace the YAML's values (``layers`` → ``num_hidden_layers``, ``hidden``
→ ``hidden_size``, ``heads``/``kv_heads``, ``ffn`` → ``intermediate_size``, ``vocab``); with
``hidden`` or ``heads`` given, ``head_dim = hidden // heads``. The per-stage layer ``offset`` is
reset to 0 (the plan chooses the stages). Shapes: ``input_ids (batch, seq)`` int32, labels the
same; ``batch`` defaults to the YAML's global batch (:func:`global_batch`), ``seq`` to
``model_config.seq_length``.
"""
from __future__ import annotations

import math
import os

from . import NetworkSpecError

#: option → ``model_config`` key
WIDTH_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
              "kv_heads": "num_key_value_heads", "ffn": "intermediate_size", "vocab": "vocab_size"}
#: ``model_config`` keys naming a routed-expert count (a mixture-of-experts model)
EXPERT_KEYS = ("num_experts", "n_routed_experts")


class RunConfigError(NetworkSpecError):
    """A mindformers run configuration that cannot be read or resolved (one-line message)."""


def load_run_config(path: str) -> dict:
    """The YAML at ``path`` as plain data (``yaml.safe_load``: anchors and aliases such as
    mindformers' ``&dp``/``*dp`` resolve; a custom ``!tag`` is refused, as nothing here may
    construct arbitrary objects).

    Raises:
        RunConfigError: unreadable file, invalid YAML, or not a mapping with ``model``.
    """
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise RunConfigError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise RunConfigError(f"{path} is not YAML that safe_load reads{at}: "
                             f"{str(getattr(exc, 'problem', exc)).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance((data.get("model") or {}).get("model_config"),
                                                    dict):
        raise RunConfigError(f"{path} has no model.model_config mapping: not a mindformers run "
                             "configuration")
    return data


def model_config_of(data: dict, path: str = "the configuration") -> dict:
    """``model.model_config`` merged over ``pretrained_model_dir``'s ``config.json`` (the YAML's
    keys win, as ``merge_model_config`` does).

    Raises:
        RunConfigError: no ``architectures``/``model_type`` and no readable ``config.json``.
    """
    import json

    model_config = dict(data["model"]["model_config"])
    folder = data.get("pretrained_model_dir") or data["model"].get("pretrained_model_dir")
    if folder:
        # relative to the working folder (as mindformers reads it), else to the YAML's folder
        hf = os.path.join(folder if os.path.isdir(folder) else os.path.join(
            os.path.dirname(os.path.abspath(path)), folder), "config.json")
        try:
            with open(hf, encoding="utf-8") as fh:
                model_config = {**json.load(fh), **model_config}
        except (OSError, ValueError) as exc:
            if not model_config.get("architectures"):
                raise RunConfigError(
                    f"{path}: model_config names no architectures and pretrained_model_dir "
                    f"'{folder}' has no readable config.json ({exc.__class__.__name__}); point "
                    "pretrained_model_dir at the model's Hugging Face folder") from None
    if not model_config.get("architectures") or not model_config.get("model_type"):
        raise RunConfigError(f"{path}: model_config lacks architectures/model_type (mindformers "
                             "resolves the model class from them)")
    return model_config


def global_batch(data: dict) -> int:
    """Samples per training step of the run: ``runner_config.batch_size · data_parallel ·
    micro_batch_num · micro_batch_interleave_num`` with pipeline stages, ``batch_size ·
    data_parallel · micro_batch_interleave_num · gradient_accumulation_steps`` without (mindformers
    1.9.0 ``trainer/base_trainer.py`` ``_check_global_batch_size_for_auto_parallel``, which
    resets ``micro_batch_num`` to 1 when ``pipeline_stage`` is 1)."""
    runner = data.get("runner_config") or {}
    par = data.get("parallel_config") or {}
    batch = int(runner.get("batch_size", 1))
    dp = int(par.get("data_parallel", 1))
    interleave = int(data.get("micro_batch_interleave_num", 1) or 1)
    if int(par.get("pipeline_stage", 1)) > 1:
        return batch * dp * int(par.get("micro_batch_num", 1)) * interleave
    return batch * dp * interleave * int(runner.get("gradient_accumulation_steps", 1) or 1)


def architecture(model_config: dict) -> str:
    """The model class ``architectures`` names (a list or one name, as mindformers accepts)."""
    arch = model_config["architectures"]
    return arch if isinstance(arch, str) else arch[0]


def is_moe(model_config: dict) -> bool:
    """Whether the model routes tokens to experts: a routed-expert count above 0, or any
    ``moe_*`` / ``num_experts_per_tok`` key (DeepSeek-V3's YAMLs leave the expert count to the
    configuration class's default)."""
    return any(int(model_config.get(k) or 0) > 0 for k in EXPERT_KEYS) or any(
        k.startswith("moe_") or k == "num_experts_per_tok" for k in model_config)


def sized_model_config(model_config: dict, **sizes) -> dict:
    """``model_config`` with the depth/width options of :data:`WIDTH_KEYS` (``None``: the YAML's)
    and ``seq`` applied (below 2048, ``use_attn_mask_compression`` off); ``offset`` reset to
    0."""
    out = dict(model_config)
    for option, key in WIDTH_KEYS.items():
        if sizes.get(option) is not None:
            out[key] = int(sizes[option])
    if sizes.get("hidden") is not None or sizes.get("heads") is not None:
        out["head_dim"] = int(out["hidden_size"]) // int(out["num_attention_heads"])
    if sizes.get("seq") is not None:
        out["seq_length"] = int(sizes["seq"])
        out["max_position_embeddings"] = max(int(sizes["seq"]),
                                             int(out.get("max_position_embeddings") or 0))
        if int(sizes["seq"]) < 2048 and out.get("use_attn_mask_compression"):
            # mindformers' compressed causal mask is a fixed 2048 x 2048 tile ("seq_length
            # should be larger than 2048 when use mask_compression", mask_generate.py): a
            # shorter sequence takes the full causal mask
            out["use_attn_mask_compression"] = False
    out["offset"] = 0
    return out


def build(run_config: str, batch: int | None = None, seq: int | None = None,
          layers: int | None = None, hidden: int | None = None, heads: int | None = None,
          kv_heads: int | None = None, ffn: int | None = None, vocab: int | None = None,
          expert_parallel: int | None = None):
    """The model of the mindformers run configuration ``run_config`` (a YAML path), in training,
    without the YAML's tensor parallelism (its primitives' strategies are the plan's to give).

    ``expert_parallel``: the expert-parallel degree of a MoE model's layers (mindformers fixes
    their layout from it, :mod:`smsg_ms.cost.expert_dispatch`), applied where it divides the
    stage's devices (a capture on 1 device builds ``ep = 1``, the same graph); default 1.

    Raises:
        RunConfigError: the YAML is unreadable or names no model; an inference-only class.
    """
    return _build(run_config, batch, dict(seq=seq, layers=layers, hidden=hidden, heads=heads,
                                      kv_heads=kv_heads, ffn=ffn, vocab=vocab),
                  {"expert_parallel": expert_parallel} if expert_parallel else None)


def build_expert(run_config: str, batch: int | None = None, seq: int | None = None,
                 layers: int | None = None, hidden: int | None = None, heads: int | None = None,
                 kv_heads: int | None = None, ffn: int | None = None, vocab: int | None = None,
                 data_parallel: int | None = None, model_parallel: int | None = None,
                 use_seq_parallel: bool | None = None, expert_parallel: int | None = None):
    """:func:`build` with the YAML's ``parallel_config`` (or the sizes given) on the model's
    parallel config, so mindformers' layers call ``shard()`` with the expert's strategies (the
    ``expert`` row of ``smsg-ms compare``): ``data_parallel·model_parallel`` must be the device
    count of the compile (one pipeline stage).

    Raises:
        RunConfigError: as :func:`build`.
    """
    par = load_run_config(run_config).get("parallel_config") or {}
    given = {"data_parallel": data_parallel, "model_parallel": model_parallel,
             "use_seq_parallel": use_seq_parallel, "expert_parallel": expert_parallel}
    parallel = {k: (v if v is not None else par.get(k, 1 if k != "use_seq_parallel" else False))
                for k, v in given.items()}
    return _build(run_config, batch, dict(seq=seq, layers=layers, hidden=hidden, heads=heads,
                                      kv_heads=kv_heads, ffn=ffn, vocab=vocab), parallel)


def _build(config: str, batch: int | None, sizes: dict, parallel: dict | None):
    from .external import require_package
    from .families import (import_object, model_parallel_groups_skipped, token_ids,
                           with_labels, world_size)
    from .world import declared

    data = load_run_config(config)
    mc = sized_model_config(model_config_of(data, config), **sizes)
    require_package("mindformers", architecture(mc))
    import mindspore as ms

    import_object("mindformers.core.context.build_context.set_context")(
        mode=ms.get_context("mode"), use_legacy=False)
    register = import_object("mindformers.tools.register.MindFormerRegister")
    kinds = import_object("mindformers.tools.register.MindFormerModuleType")
    mf_config = import_object("mindformers.tools.register.MindFormerConfig")
    get_model_config = import_object("mindformers.models.build_config.get_model_config")
    cfg = get_model_config(mf_config(model_config=mc))
    # mindformers' GPTModel wants data × pipeline parallel = the world size, as the trainer
    # sets them from parallel_config; the plan replaces the strategies they make
    stages = int(ms.get_auto_parallel_context("pipeline_stages"))
    seq_len = int(mc["seq_length"])
    batch = int(batch) if batch is not None else global_batch(data)
    # the layouts its Morph primitives keep cut the batch data_parallel-way: a data-parallel
    # size that divides the batch, the rest of the stage's devices model-parallel
    per_stage = max(world_size() // stages, 1)
    dp = math.gcd(per_stage, batch)
    if dp < per_stage and declared():
        # built on one device for more (a capture built for the plan's devices): mindformers'
        # model-parallel groups are not created and its parallel linears refuse
        # model_parallel > 1 without them ("Tensor model parallel group is not initialized"),
        # while a data-parallel size alone would keep Morph layouts over fewer devices than
        # the plan's: built for one device, as --no-build-for-devices (the compile on
        # the plan's devices builds dp and mp as below)
        per_stage = dp = 1
    cfg.parallel_config.data_parallel = dp
    if dp < per_stage:
        cfg.parallel_config.model_parallel = per_stage // dp
        if is_moe(mc):  # mindformers' MoELayer refuses model_parallel > 1 without it
            cfg.parallel_config.use_seq_parallel = True
    cfg.parallel_config.pipeline_stage = stages
    for key, value in (parallel or {}).items():
        if key == "expert_parallel" and (per_stage % int(value) or not is_moe(mc)
                                         or declared()):
            # a capture on fewer devices, or built for more than it has (the plan's capture,
            # at ep 1: the plan prices the experts' layout itself), or no experts: ep 1
            continue
        setattr(cfg.parallel_config, key, value)
    with model_parallel_groups_skipped():
        model = register.get_instance_from_cfg(cfg.to_dict(), kinds.MODELS,
                                               default_args={"config": cfg})
    if type(model).__name__.startswith("Inference"):
        raise RunConfigError(f"mindformers builds only {type(model).__name__} for "
                             f"{architecture(mc)} (inference, no training graph to plan)")
    return {"net": with_labels(model, sum_losses=True), "inputs": (token_ids(batch, seq_len),),
            "train_inputs": (token_ids(batch, seq_len), token_ids(batch, seq_len))}
