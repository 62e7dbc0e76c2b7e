"""Network functions written the way a user writes them (``package.module:function`` specs):
plain mindformers / mindcv construction, nothing for the dry-run (no CPU target, no
``disable_lazy_inline``, no care for weights read in ``__init__``). smsg-ms must build them like
its built-ins (``tests/test_user_factories.py``).
"""
from __future__ import annotations

import numpy as np


def mindformers_llama(batch: int = 4, seq: int = 64):
    """mindformers 1.9.0 ``LlamaForCausalLM``, 2 layers, hidden 256, 4 heads, vocab 1024;
    training input ``(batch, seq + 1)`` int32 (the model computes its own loss)."""
    import mindspore as ms
    from mindformers.models.llama import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(batch_size=batch, seq_length=seq, hidden_size=256, num_layers=2,
                         num_heads=4, intermediate_size=512, vocab_size=1024,
                         use_rope_slice=True, use_flash_attention=False)
    net = LlamaForCausalLM(config=config)
    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": net, "inputs": (ids,),
            "train_inputs": (ms.Tensor(np.zeros((batch, seq + 1), np.int32)),)}


def mindcv_convnext(batch: int = 8, image: int = 64):
    """mindcv 0.3.0 ConvNeXt-Tiny at ``image`` pixels, 10 classes; its constructor scales
    ``classifier.weight`` (reads a weight)."""
    import mindspore as ms
    import mindcv

    net = mindcv.create_model("convnext_tiny", pretrained=False, num_classes=10)
    return net, (ms.Tensor(np.zeros((batch, 3, image, image), np.float32)),)


def mindformers_llama_default_rope(batch: int = 4, seq: int = 64):
    """:func:`mindformers_llama` with mindformers' default RoPE path (``use_rope_slice``
    False: half of each head rotated by ``BatchMatMul(x (B, N, S, D), swap_mask (D, D))``, a
    broadcast MindSpore refuses on CPU/GPU)."""
    import mindspore as ms
    from mindformers.models.llama import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(batch_size=batch, seq_length=seq, hidden_size=256, num_layers=2,
                         num_heads=4, intermediate_size=512, vocab_size=1024,
                         use_flash_attention=False)
    net = LlamaForCausalLM(config=config)
    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    return {"net": net, "inputs": (ids,),
            "train_inputs": (ms.Tensor(np.zeros((batch, seq + 1), np.int32)),)}


def qwen3_moe_lm_loss_alone(batch: int = 16, seq: int = 64):
    """smsg-ms's Qwen3-MoE family spec trained on its LM loss alone (not on the sum of its
    losses, as mindformers' training and the spec by default do): the router's auxiliary loss
    crosses a pipeline stage boundary unused."""
    from smsg_ms.networks.families import mf_qwen3_moe

    return mf_qwen3_moe(batch, seq, all_losses=False)
