"""One ``package.module:function`` network spec per model family of mindformers 1.9.0 and mindcv
0.3.0, at reduced depth and width, built as a user would build them (no option chosen for
smsg-ms: each family's defaults except its size). ``scripts/families_table.py`` captures, plans
and checks each; ``docs/networks.md`` holds the result.

Shapes: the LLMs take ``input_ids (batch, seq)`` int32 (legacy mindformers models that compute
their own loss train on ``(batch, seq + 1)``); the vision models ``x (batch, 3, image, image)``
float32 and return ``(batch, classes)`` logits. Sizes (elements): :data:`LLM_SIZE` and the
``image`` default of each vision family.
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import warnings

import numpy as np

from . import NetworkSpecError, world
from .external import require_package

#: reduced LLM size shared by every mindformers family (hidden, heads, layers, FFN, vocabulary)
LLM_SIZE = {"hidden": 256, "heads": 4, "kv_heads": 2, "layers": 2, "ffn": 512, "vocab": 1024,
            "experts": 4, "top_k": 2, "expert_ffn": 128}


def _import(path: str):
    """``"package.module.Name"`` → the object (mindformers' warnings silenced)."""
    module, _, name = path.rpartition(".")
    logging.getLogger("mindformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(importlib.import_module(module), name)


def _version() -> str:
    from importlib.metadata import version

    return version("mindformers")


def _world_size() -> int:
    """The world size the network is built for (:func:`smsg_ms.networks.world.world_size`: the
    plan's device count in a capture, else the initialised communication's, 1 before
    ``init()``)."""
    return world.world_size()


@contextlib.contextmanager
def _model_parallel_groups_skipped():
    """mindformers' ``GPTModel`` creates its model-parallel communication groups
    (``initialize_model_parallel``), which refuses ``dp·tp·pp·cp`` ≠ the process's devices
    (``parallel_state._valid_parallel_config``): skipped while a capture on one device builds
    the network for the plan's device count (:func:`smsg_ms.networks.world.declared`); the
    strategies, not the groups, make the captured graph."""
    if not world.declared():
        yield
        return
    module = importlib.import_module("mindformers.parallel_core.training_graph.base_models.gpt."
                                     "gpt_model")
    kept = module.initialize_model_parallel
    module.initialize_model_parallel = lambda *args, **kwargs: None
    try:
        yield
    finally:
        module.initialize_model_parallel = kept


def _ids(batch: int, seq: int):
    import mindspore as ms

    return ms.Tensor(np.zeros((batch, seq), np.int32))


def _legacy_llm(config_path: str, model_path: str, batch: int, seq: int,
                labels: bool = False, **config):
    """A mindformers legacy model (``TransformerOpParallelConfig`` era: LLaMA, GLM2) that
    computes its own loss in training: on ``seq + 1`` tokens it shifts itself (LLaMA), or on
    ``(input_ids, labels)`` of ``seq`` tokens each (``labels``: GLM2)."""
    require_package("mindformers", model_path)
    cfg = _import(config_path)(batch_size=batch, seq_length=seq, **config)
    net = _import(model_path)(config=cfg)
    train = (_ids(batch, seq), _ids(batch, seq)) if labels else (_ids(batch, seq + 1),)
    return {"net": net, "inputs": (_ids(batch, seq),), "train_inputs": train}


def _mcore_llm(config_path: str, model_path: str, batch: int, seq: int, moe: tuple = (),
               sum_losses: bool = False, **config):
    """A mindformers model of the ``parallel_core`` kind (Qwen3, DeepSeek-V3, TeleChat3...):
    Hugging Face style config, ``construct(input_ids, ...)``. ``moe``: the config keys of the
    routed-expert count (the family's own names) for a mixture-of-experts model;
    ``sum_losses``: train on the sum of the model's losses, as mindformers' training step does
    (a model with a multi-token prediction layer, whose weights only its loss reads)."""
    require_package("mindformers", model_path)
    import mindspore as ms

    # these models run with mindformers' ``use_legacy: False`` (their yaml files); creating
    # mindformers' context sets MindSpore's defaults, so the caller's mode is passed on
    _import("mindformers.core.context.build_context.set_context")(
        mode=ms.get_context("mode"), use_legacy=False)
    s = LLM_SIZE
    base = {"vocab_size": s["vocab"], "hidden_size": s["hidden"],
            "intermediate_size": s["ffn"], "num_hidden_layers": s["layers"],
            "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
            "head_dim": s["hidden"] // s["heads"], "max_position_embeddings": seq,
            "seq_length": seq}

    if moe:
        # mindformers 1.9.0 refuses its own default ("moe_grouped_gemm = 'False' is not
        # supported now"): the experts run as one GroupedMatmul
        base.update({key: s["experts"] for key in moe})
        base.update({"num_experts_per_tok": s["top_k"], "moe_intermediate_size": s["expert_ffn"],
                     "moe_grouped_gemm": True})
    base.update(config)
    cfg = _import(config_path)(**base)
    # their GPTModel requires data × pipeline parallel sizes = the world size (as a user's yaml
    # gives them); the plan replaces the strategies these sizes make
    stages = int(ms.get_auto_parallel_context("pipeline_stages"))
    cfg.parallel_config.data_parallel = max(_world_size() // stages, 1)
    cfg.parallel_config.pipeline_stage = stages
    with _model_parallel_groups_skipped():
        model = _import(model_path)(config=cfg)
    if type(model).__name__.startswith("Inference"):
        raise NetworkSpecError(f"mindformers {_version()} builds only {type(model).__name__} "
                               f"for {model_path.rpartition('.')[2]} (inference, no training "
                               "graph to plan)")
    net = _WithLabels(model, sum_losses)
    return {"net": net, "inputs": (_ids(batch, seq),),
            "train_inputs": (_ids(batch, seq), _ids(batch, seq))}


def _with_labels_class():
    from mindspore import nn

    class WithLabels(nn.Cell):
        """``construct(input_ids, labels=None)`` → ``model(input_ids, labels=labels)`` (its loss
        when it returns a tuple in training): these
        models take the labels fifth (after position ids, mask, decoder input) and compute
        their loss from them in training (without them their one-hot gets None); every data
        input stays a tensor."""

        def __init__(self, model, sum_losses=False):
            super().__init__(auto_prefix=False)
            self.model = model
            self.sum_losses = sum_losses

        def construct(self, input_ids, labels=None):
            out = self.model(input_ids, labels=labels)
            if isinstance(out, tuple):  # training: (loss, statistics...)
                if self.sum_losses and len(out) == 4:
                    # mcore GPTModel: (lm, mtp, aux, attention) losses, summed as mindformers'
                    # MFTrainOneStepCell does (wrapper/wrapper.py: lm + aux + indexer + mtp);
                    # the first alone left the MTP layer's MoE and norm dead, their weights
                    # read by no captured operator
                    return out[0] + out[1] + out[2] + out[3]
                return out[0]
            return out

    return WithLabels


def _WithLabels(model, sum_losses: bool = False):  # noqa: N802 (a class made on first use)
    return _with_labels_class()(model, sum_losses)


def mf_llama(batch: int = 4, seq: int = 64):
    """mindformers ``LlamaForCausalLM`` (legacy; default RoPE path, no flash attention)."""
    s = LLM_SIZE
    return _legacy_llm("mindformers.models.llama.LlamaConfig",
                       "mindformers.models.llama.LlamaForCausalLM", batch, seq,
                       hidden_size=s["hidden"], num_layers=s["layers"], num_heads=s["heads"],
                       n_kv_heads=s["kv_heads"], intermediate_size=s["ffn"],
                       vocab_size=s["vocab"])


def mf_glm2(batch: int = 4, seq: int = 64):
    """mindformers ``ChatGLM2ForConditionalGeneration`` (legacy, carries its own ``shard()``)."""
    s = LLM_SIZE
    return _legacy_llm("mindformers.models.glm2.ChatGLM2Config",
                       "mindformers.models.glm2.ChatGLM2ForConditionalGeneration", batch, seq, True,
                       hidden_size=s["hidden"], num_layers=s["layers"],
                       num_attention_heads=s["heads"], multi_query_group_num=s["kv_heads"],
                       kv_channels=s["hidden"] // s["heads"], ffn_hidden_size=s["ffn"],
                       padded_vocab_size=s["vocab"], vocab_size=s["vocab"])


def mf_qwen2(batch: int = 16, seq: int = 64):
    """mindformers ``Qwen2ForCausalLM``."""
    return _mcore_llm("mindformers.models.qwen2.Qwen2Config",
                      "mindformers.models.qwen2.Qwen2ForCausalLM", batch, seq)


def mf_qwen3(batch: int = 16, seq: int = 64):
    """mindformers ``Qwen3ForCausalLM`` (training class ``TrainingQwen3ForCausalLM``)."""
    return _mcore_llm("mindformers.models.qwen3.Qwen3Config",
                      "mindformers.models.qwen3.Qwen3ForCausalLM", batch, seq)


def mf_qwen3_moe(batch: int = 16, seq: int = 64, all_losses: bool = True):
    """mindformers ``Qwen3MoeForCausalLM`` (4 experts, top 2). ``all_losses`` (default): train
    on the sum of the LM loss and the auxiliary losses (the router's load-balancing
    ``extra_loss``), as mindformers' training step does (``wrapper/wrapper.py``,
    ``MFTrainOneStepCell.grads_for_mcore`` and its pipeline cell: ``lm_loss + aux_loss +
    indexer_loss + mtp_loss``, every loss given a sensitivity); ``False``: the LM loss alone,
    which leaves the auxiliary loss that crosses a pipeline stage boundary unused, and MindSpore
    2.10 refuses its constant gradient's Send (``docs/networks.md``, "Qwen3-MoE pipelined")."""
    return _mcore_llm("mindformers.models.qwen3_moe.Qwen3MoeConfig",
                      "mindformers.models.qwen3_moe.Qwen3MoeForCausalLM", batch, seq,
                      moe=("num_experts",), sum_losses=all_losses)


def mf_glm4(batch: int = 16, seq: int = 64):
    """mindformers ``Glm4ForCausalLM``."""
    return _mcore_llm("mindformers.models.glm4.Glm4Config",
                      "mindformers.models.glm4.Glm4ForCausalLM", batch, seq)


def mf_glm4_moe(batch: int = 16, seq: int = 64):
    """mindformers ``Glm4MoeForCausalLM`` (4 experts, top 2)."""
    return _mcore_llm("mindformers.models.glm4_moe.Glm4MoeConfig",
                      "mindformers.models.glm4_moe.Glm4MoeForCausalLM", batch, seq,
                      moe=("n_routed_experts",))


def mf_deepseek_v3(batch: int = 16, seq: int = 64):
    """mindformers ``DeepseekV3ForCausalLM`` (MLA attention, 4 routed experts, top 2)."""
    return _mcore_llm("mindformers.models.deepseek3.DeepseekV3Config",
                      "mindformers.models.deepseek3.DeepseekV3ForCausalLM", batch, seq,
                      moe=("n_routed_experts",), sum_losses=True,
                      first_k_dense_replace=1, n_group=1, topk_group=1)


def mf_telechat2(batch: int = 16, seq: int = 64):
    """mindformers ``TeleChat2ForCausalLM``."""
    return _mcore_llm("mindformers.models.telechat2.Telechat2Config",
                      "mindformers.models.telechat2.TeleChat2ForCausalLM", batch, seq)


def mf_telechat3(batch: int = 16, seq: int = 64):
    """mindformers ``TeleChat3ForCausalLM``."""
    return _mcore_llm("mindformers.models.telechat3.TeleChat3Config",
                      "mindformers.models.telechat3.TeleChat3ForCausalLM", batch, seq)


def mf_telechat3_moe(batch: int = 16, seq: int = 64):
    """mindformers ``TeleChat3MoeForCausalLM`` (4 experts, top 2)."""
    return _mcore_llm("mindformers.models.telechat3_moe.TeleChat3MoeConfig",
                      "mindformers.models.telechat3_moe.TeleChat3MoeForCausalLM", batch, seq,
                      moe=("num_experts", "n_routed_experts"), sum_losses=True,
                      n_group=1, topk_group=1,
                      first_k_dense_replace=1)


def _mindcv(name: str, batch: int, image: int, **kwargs):
    """``mindcv.create_model(name, pretrained=False, num_classes=10, **kwargs)``."""
    mindcv = require_package("mindcv", name)
    import mindspore as ms

    net = mindcv.create_model(name, pretrained=False, num_classes=10, **kwargs)
    return net, (ms.Tensor(np.zeros((batch, 3, image, image), np.float32)),)


def cv_resnet(batch: int = 8, image: int = 64):
    """mindcv ResNet-18."""
    return _mindcv("resnet18", batch, image)


def cv_convnext(batch: int = 8, image: int = 64):
    """mindcv ConvNeXt-Tiny (its constructor reads ``classifier.weight``)."""
    return _mindcv("convnext_tiny", batch, image)


def cv_vit(batch: int = 8, image: int = 224):
    """mindcv ViT-B/16 at 224 (its position embedding fixes the image size)."""
    return _mindcv("vit_b_16_224", batch, image)


def cv_swin(batch: int = 8, image: int = 224):
    """mindcv Swin-T at 224 (its windows fix the image size)."""
    return _mindcv("swin_tiny", batch, image)


def cv_mobilenet_v3(batch: int = 8, image: int = 64):
    """mindcv MobileNetV3-Small 1.0."""
    return _mindcv("mobilenet_v3_small_100", batch, image)


def cv_efficientnet(batch: int = 8, image: int = 64):
    """mindcv EfficientNet-B0."""
    return _mindcv("efficientnet_b0", batch, image)


#: public names of the helpers above, for the other mindformers specs (``mf_run``)
import_object = _import
token_ids = _ids
world_size = _world_size
with_labels = _WithLabels
model_parallel_groups_skipped = _model_parallel_groups_skipped

#: family name → network spec, in the order of the table
FAMILIES = {
    "LLaMA": "smsg_ms.networks.families:mf_llama",
    "GLM2": "smsg_ms.networks.families:mf_glm2",
    "Qwen2": "smsg_ms.networks.families:mf_qwen2",
    "Qwen3": "smsg_ms.networks.families:mf_qwen3",
    "Qwen3-MoE": "smsg_ms.networks.families:mf_qwen3_moe",
    "GLM4": "smsg_ms.networks.families:mf_glm4",
    "GLM4-MoE": "smsg_ms.networks.families:mf_glm4_moe",
    "DeepSeek-V3": "smsg_ms.networks.families:mf_deepseek_v3",
    "TeleChat2": "smsg_ms.networks.families:mf_telechat2",
    "TeleChat3": "smsg_ms.networks.families:mf_telechat3",
    "TeleChat3-MoE": "smsg_ms.networks.families:mf_telechat3_moe",
    "ResNet": "smsg_ms.networks.families:cv_resnet",
    "ConvNeXt": "smsg_ms.networks.families:cv_convnext",
    "ViT": "smsg_ms.networks.families:cv_vit",
    "Swin": "smsg_ms.networks.families:cv_swin",
    "MobileNetV3": "smsg_ms.networks.families:cv_mobilenet_v3",
    "EfficientNet": "smsg_ms.networks.families:cv_efficientnet",
}
