"""Network specs for models written by others: mindformers ``LlamaForCausalLM`` and mindcv models.

Each function returns ``{"net", "inputs"}`` like the built-ins and raises :class:`MissingPackage`
(a :class:`~smsg_ms.networks.NetworkSpecError`) with the install command when the package is absent.
Facts used (``shared/docs/mindspore-notes.md``, "Capturing networks of real size"): mindformers
networks must be constructed under ``device_target="CPU"`` (the dry-run sets GPU, which is restored
before the compile), with ``config.disable_lazy_inline = True`` (read by mindformers'
``get_lazy_inline`` from the ``config`` keyword only) and ``use_rope_slice=True``.
"""
from __future__ import annotations

import importlib
import logging
import warnings

import numpy as np

from . import NetworkSpecError
from .construction import REUSE_SUFFIX, cpu_target

INSTALL_HINT = "install it with scripts/install_model_packages.sh"


class MissingPackage(NetworkSpecError):
    """A built-in network needs a model package that is not installed."""


def require_package(package: str, network: str):
    """Import ``package`` for the built-in ``network``; :class:`MissingPackage` (naming the
    install script) when it is not importable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(package)
    except ImportError as exc:
        raise MissingPackage(f"network '{network}' needs the package '{package}', which is not "
                             f"importable ({exc}); {INSTALL_HINT}") from exc




def mindformers_llama(layers: int = 32, hidden: int = 4096, heads: int = 32,
                      kv_heads: int | None = None, ffn: int | None = 11008, vocab: int = 32000,
                      seq: int = 4096, batch: int = 1, dtype: str = "float16",
                      reuse_layers: bool = False):
    """mindformers 1.9.0 ``LlamaForCausalLM``; defaults are the LLaMA-2-7B width, sequence 4096.

    Shapes (elements): forward ``input_ids (batch, seq)`` int32; training ``(batch, seq + 1)`` (the
    model computes its own loss on the shifted sequence, so the training cell adds none). The
    capture takes the training path (``train_inputs``, train mode: the token slices and
    mindformers' ``CrossEntropyLoss`` are planned with the rest), as the compile runs it. Per layer: ``attention.wq (hidden, hidden)``,
    ``wk, wv (kv_heads·hidden/heads, hidden)``, ``wo (hidden, hidden)``, ``feed_forward.w1, w3
    (ffn, hidden)``, ``w2 (hidden, ffn)``; ``lm_head (vocab, hidden)``. LLaMA-2-70B is
    ``layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672``.

    ``reuse_layers``: mark the decoder layers as one reusable cell (MindSpore's cell reuse, the
    mechanism behind ``mindspore.lazy_inline``: every layer carries the same ``cell_init_args``),
    so the front end compiles one layer graph and calls it ``layers`` times instead of optimising
    ``layers`` inlined copies; the 70B training graph then compiles in seconds rather than minutes
    (``scripts/bench_capture.py``). The captured operators and primitive paths are the same (the
    MindIR reader renames each call's paths after the weights passed in, and drops the
    ``TensorMove`` copies at the layer boundary) as a multiset (tests/test_networks.py); their
    order differs, plans made from a reused capture are not yet checked against inlined ones, and
    the dry-run compile jobs read collectives and strategies from the top graph only, so it is off
    by default; ``scripts/bench_capture.py`` turns it on. mindformers' own
    ``@lazy_inline`` sits on
    ``LlamaForCausalLM.__init__`` and is switched off (``disable_lazy_inline``).

    Raises:
        MissingPackage: mindformers is not installed.
    """
    require_package("mindformers", "mindformers_llama")
    logging.getLogger("mindformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mindformers.models.llama import LlamaConfig, LlamaForCausalLM
        import mindspore as ms
    config = LlamaConfig(batch_size=batch, seq_length=seq, hidden_size=hidden, num_layers=layers,
                         num_heads=heads, n_kv_heads=kv_heads, intermediate_size=ffn,
                         vocab_size=vocab, compute_dtype=dtype, param_init_type=dtype,
                         use_rope_slice=True, use_flash_attention=False, fused_rms_norm=False)
    config.disable_lazy_inline = True
    # mindformers refuses a pipeline_stages context that its parallel config does not repeat, and
    # puts the embedding on stage 0, the final norm and the head on the last stage from it
    config.parallel_config.pipeline_stage = int(ms.get_auto_parallel_context("pipeline_stages"))
    with cpu_target():
        # keyword: mindformers' lazy_inline decorator reads ``kwargs["config"]`` only
        net = LlamaForCausalLM(config=config)
    if reuse_layers:
        for layer in net.model.layers:
            # identical key for identical layers: MindSpore parses the first and reuses its graph
            layer.cell_init_args = f"lazy_inline_{type(layer).__name__}{REUSE_SUFFIX}"
    ids = ms.Tensor(np.zeros((batch, seq), np.int32))
    train_ids = ms.Tensor(np.zeros((batch, seq + 1), np.int32))
    return {"net": net, "inputs": (ids,), "train_inputs": (train_ids,), "loss_inside": True}


#: mindcv model names this spec accepts, with their default image size.
MINDCV_MODELS = {"vit_b_16_224": 224, "swin_tiny": 224, "resnet50": 224}


def mindcv_model(name: str = "resnet50", batch: int = 2, image: int | None = None,
                 num_classes: int = 1000):
    """A mindcv 0.3.0 model from ``mindcv.create_model(name, pretrained=False)``.

    Inputs: ``x (batch, 3, image, image)`` float32; output logits ``(batch, num_classes)``.

    Raises:
        MissingPackage: mindcv is not installed.
        ValueError: ``name`` is not one of :data:`MINDCV_MODELS`.
    """
    if name not in MINDCV_MODELS:
        raise ValueError(f"mindcv model '{name}' is not supported (choose from "
                         f"{', '.join(sorted(MINDCV_MODELS))})")
    mindcv = require_package("mindcv", f"mindcv_model({name})")
    import mindspore as ms

    image = image or MINDCV_MODELS[name]
    with cpu_target():
        net = mindcv.create_model(name, pretrained=False, num_classes=num_classes)
    x = ms.Tensor(np.zeros((batch, 3, image, image), np.float32))
    return {"net": net, "inputs": (x,)}


def vit_b16(batch: int = 2, image: int = 224, num_classes: int = 1000):
    """mindcv ViT-B/16 (``vit_b_16_224``); see :func:`mindcv_model`."""
    return mindcv_model("vit_b_16_224", batch, image, num_classes)


def swin_t(batch: int = 2, image: int = 224, num_classes: int = 1000):
    """mindcv Swin-T (``swin_tiny``); see :func:`mindcv_model`."""
    return mindcv_model("swin_tiny", batch, image, num_classes)


def resnet50(batch: int = 2, image: int = 224, num_classes: int = 1000):
    """mindcv ResNet-50; see :func:`mindcv_model`."""
    return mindcv_model("resnet50", batch, image, num_classes)
