"""Network specs for the benchmark: mindformers LLaMA and mindcv models.

``smsg_ms.networks.external`` (mindformers_llama, mindcv_model) was not on main when this was
written; these minimal spec functions stand in for it. Use them as
``smsg_ms.compare.nets:mindformers_llama`` and ``smsg_ms.compare.nets:mindcv_model``.
"""
from __future__ import annotations

import numpy as np


def mindformers_llama(batch: int = 8, seq: int = 512, layers: int = 2, hidden: int = 4096,
                      heads: int = 32, ffn: int = 11008, vocab: int = 32000,
                      data_parallel: int = 1, model_parallel: int = 1, pipeline_stage: int = 1,
                      dtype: str = "float16"):
    """mindformers ``LlamaForCausalLM`` (training: it computes its own loss).

    Defaults: LLaMA-2-7B width (hidden 4096, 32 heads, FFN 11008, vocab 32000). The parallel
    config ``TransformerOpParallelConfig(data_parallel, model_parallel)`` makes mindformers call
    ``shard()`` on its primitives: that is the expert strategy. Input ``input_ids
    (batch, seq + 1)`` int32 (mindformers shifts it into tokens and labels).
    """
    import mindspore as ms
    from mindformers.models.llama import LlamaConfig, LlamaForCausalLM
    from mindformers.modules.transformer.transformer import TransformerOpParallelConfig

    config = LlamaConfig(
        batch_size=batch, seq_length=seq, hidden_size=hidden, num_layers=layers, num_heads=heads,
        intermediate_size=ffn, vocab_size=vocab, compute_dtype=dtype, param_init_type=dtype,
        parallel_config=TransformerOpParallelConfig(
            data_parallel=data_parallel, model_parallel=model_parallel,
            pipeline_stage=pipeline_stage, vocab_emb_dp=False),
        use_flash_attention=False, fused_rms_norm=False, use_rope_slice=True)
    config.disable_lazy_inline = True
    # Building under the GPU target crashes in the dry-run; build on CPU, compile on GPU
    # (shared/docs/mindspore-notes.md).
    target = ms.get_context("device_target")
    ms.set_context(device_target="CPU")
    try:
        net = LlamaForCausalLM(config)
    finally:
        ms.set_context(device_target=target)
    ids = ms.Tensor(np.zeros((batch, seq + 1), np.int32))
    return {"net": net, "inputs": (ids,)}


def mindcv_model(name: str = "resnet50", batch: int = 32, image: int = 224,
                 num_classes: int = 1000):
    """A mindcv classifier (``mindcv.create_model(name)``), input ``(batch, 3, image, image)``
    float32, labels ``(batch,)`` int32 with softmax cross-entropy."""
    import mindspore as ms
    import mindcv
    from mindspore import nn

    net = mindcv.create_model(name, num_classes=num_classes, pretrained=False)
    x = ms.Tensor(np.zeros((batch, 3, image, image), np.float32))
    y = ms.Tensor(np.zeros((batch,), np.int32))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return {"net": net, "inputs": (x,), "loss": loss, "labels": (y,)}


def vit_b_16(batch: int = 32):
    """mindcv ViT-B/16 at 224 px."""
    return mindcv_model("vit_b_16_224", batch=batch)


def swin_t(batch: int = 32):
    """mindcv Swin-T at 224 px."""
    return mindcv_model("swin_tiny", batch=batch)


def resnet50(batch: int = 32):
    """mindcv ResNet-50 at 224 px."""
    return mindcv_model("resnet50", batch=batch)


def gpt2_small_llama(batch: int = 8, seq: int = 512, layers: int = 12, data_parallel: int = 1,
                     model_parallel: int = 1):
    """mindformers LLaMA at GPT-2-small width: hidden 768, 12 heads, FFN 3072, vocab 50304."""
    return mindformers_llama(batch=batch, seq=seq, layers=layers, hidden=768, heads=12, ffn=3072,
                             vocab=50304, data_parallel=data_parallel,
                             model_parallel=model_parallel)
