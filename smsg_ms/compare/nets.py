"""The expert row of the comparison: mindformers LLaMA with its own parallel config.

``smsg_ms.networks.external.mindformers_llama`` (spec ``mf-llama``) builds the model without a
parallel config. :func:`mindformers_llama_expert` builds the same model with
``TransformerOpParallelConfig(data_parallel, model_parallel, pipeline_stage)``, so mindformers calls
``shard()`` on its own primitives: that is the hand-written (expert) strategy.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np

#: Network spec → spec of the same network whose primitives carry the expert's ``shard()``.
EXPERT_SPECS = {"mf-llama": "smsg_ms.compare.nets:mindformers_llama_expert",
                "smsg_ms.networks.external:mindformers_llama":
                    "smsg_ms.compare.nets:mindformers_llama_expert",
                # a mindformers run configuration with its own parallel_config (dp, mp)
                "smsg_ms.networks.mf_run:build": "smsg_ms.networks.mf_run:build_expert"}


def mindformers_llama_expert(data_parallel: int = 1, model_parallel: int = 1,
                             pipeline_stage: int = 1, layers: int = 32, hidden: int = 4096,
                             heads: int = 32, kv_heads: int | None = None,
                             ffn: int | None = 11008, vocab: int = 32000, seq: int = 4096,
                             batch: int = 1, dtype: str = "float16"):
    """``mf-llama`` (same options, same shapes) with mindformers' parallel config applied.

    Raises:
        smsg_ms.networks.external.MissingPackage: mindformers is not installed.
    """
    from smsg_ms.networks.external import cpu_target, require_package

    require_package("mindformers", "mindformers_llama_expert")
    logging.getLogger("mindformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mindspore as ms
        from mindformers.models.llama import LlamaConfig, LlamaForCausalLM
        from mindformers.modules.transformer.transformer import TransformerOpParallelConfig
    parallel = TransformerOpParallelConfig(data_parallel=data_parallel,
                                           model_parallel=model_parallel,
                                           pipeline_stage=pipeline_stage, vocab_emb_dp=False)
    config = LlamaConfig(batch_size=batch, seq_length=seq, hidden_size=hidden, num_layers=layers,
                         num_heads=heads, n_kv_heads=kv_heads, intermediate_size=ffn,
                         vocab_size=vocab, compute_dtype=dtype, param_init_type=dtype,
                         use_rope_slice=True, use_flash_attention=False, fused_rms_norm=False,
                         parallel_config=parallel)
    config.disable_lazy_inline = True
    with cpu_target():
        net = LlamaForCausalLM(config)
    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    train_ids = ms.Tensor(np.zeros((batch, seq + 1), np.int32))
    return {"net": net, "inputs": (ids,), "train_inputs": (train_ids,), "loss_inside": True}
