"""Network specs: built-in reference networks and user ``package.module:function`` specs.

A network function takes keyword options (those it declares; unknown ones are refused) and returns
``(net, inputs)`` or a dict with ``net``, ``inputs`` and optionally ``loss`` (a Cell taking the
network's outputs and ``labels``), ``labels`` and ``train_inputs`` (inputs of the training step when
the network computes its own loss from them). :func:`build_network` calls it, under
``mindspore.nn.utils.no_init_parameters`` when asked, so no weight is allocated.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from .construction import construct, fill_unset_options, undo_lazy_inline

#: Built-in networks: name → (``module:function``, one-line description).
BUILTINS: dict[str, tuple[str, str]] = {
    "mlp": ("smsg_ms.networks.mlp:build", "3-layer MLP (Dense + ReLU), the smallest example"),
    "llama": ("smsg_ms.networks.llama:build",
              "LLaMA-style decoder: RmsNorm, GQA attention, SwiGLU MLP, tied-free LM head"),
    "moe": ("smsg_ms.networks.moe:build",
            "mixture-of-experts decoder: GQA attention, top-k router with capacity, batched "
            "SwiGLU experts (expert parallel), optional shared experts"),
    "gpt": ("smsg_ms.networks.gpt:build",
            "GPT decoder (Megatron layout): learned positions, LayerNorm, GeLU 4h MLP, tied head"),
    "bert": ("smsg_ms.networks.bert:build",
             "BERT-style encoder: Gather embeddings, LayerNorm, BatchMatMul attention, GeLU FFN"),
    "mf-llama": ("smsg_ms.networks.external:mindformers_llama",
                 "mindformers 1.9.0 LlamaForCausalLM (needs mindformers; LLaMA-2-7B width)"),
    "vit-b16": ("smsg_ms.networks.external:vit_b16", "mindcv ViT-B/16 224 (needs mindcv)"),
    "swin-t": ("smsg_ms.networks.external:swin_t", "mindcv Swin-T (needs mindcv)"),
    "resnet50": ("smsg_ms.networks.external:resnet50", "mindcv ResNet-50 (needs mindcv)"),
}
DEFAULT_NETWORK = "llama"


class NetworkSpecError(ValueError):
    """A network spec does not resolve or its function fails; the message says which and why."""


@dataclass
class BuiltNetwork:
    """A built network with its example inputs (global shapes)."""

    name: str
    net: Any
    inputs: tuple
    loss: Any = None
    labels: tuple = ()
    options: dict = field(default_factory=dict)
    #: inputs of the training step when they differ from ``inputs`` (mindformers LLMs take
    #: ``seq + 1`` tokens in training and compute their own loss)
    train_example: tuple = ()

    def train_cell(self, ms):
        """``TrainOneStepCell(WithLoss(net), Momentum)`` for a training-graph compile; without a
        ``loss``, the mean of the output (summed over the outputs of a network that returns
        several: :func:`smsg_ms.networks.default_loss.outputs_mean`)."""
        from mindspore import nn

        from .default_loss import outputs_mean

        net, loss = self.net, self.loss

        class _WithLoss(nn.Cell):
            def __init__(self):
                super().__init__(auto_prefix=False)
                self.network = net
                self.loss_fn = loss
                self.mean = outputs_mean()

            def construct(self, *args):
                n = len(args) - n_labels
                out = self.network(*args[:n])
                if self.loss_fn is None:
                    return self.mean(out)
                return self.loss_fn(out, *args[n:])

        n_labels = len(self.labels) if self.loss is not None else 0
        wrapped = _WithLoss()
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
        cell = nn.TrainOneStepCell(wrapped, opt)
        cell.set_train(True)
        return cell

    @property
    def train_inputs(self) -> tuple:
        if self.train_example:
            return tuple(self.train_example)
        return tuple(self.inputs) + (tuple(self.labels) if self.loss is not None else ())


def resolve_spec(spec: str) -> tuple[str, Callable]:
    """Spec → ``(name, function)``.

    Raises:
        NetworkSpecError: unknown built-in name, malformed spec, module or function not found.
    """
    name = spec
    if spec in BUILTINS:
        spec = BUILTINS[spec][0]
    elif ":" not in spec:
        known = ", ".join(sorted(BUILTINS))
        raise NetworkSpecError(f"unknown network '{spec}': give a built-in name ({known}) or "
                               "'package.module:function'")
    module_name, _, func_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise NetworkSpecError(f"network spec '{spec}': cannot import module '{module_name}' "
                               f"({exc})") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise NetworkSpecError(f"network spec '{spec}': module '{module_name}' has no function "
                               f"'{func_name}'")
    if name == spec:
        name = func_name if func_name not in ("build", "network", "main") else module_name
    return name, func


def check_options(spec: str, options: dict) -> tuple[str, Callable, dict]:
    """Resolve ``spec`` and check ``options`` against its function's signature (nothing is built).

    Returns:
        ``(name, function, options without None values)``.

    Raises:
        NetworkSpecError: the spec does not resolve or an option is not accepted.
    """
    name, func = resolve_spec(spec)
    params = inspect.signature(func).parameters
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    given = {k: v for k, v in options.items() if v is not None}
    if not takes_any:
        bad = sorted(set(given) - set(params))
        if bad:
            raise NetworkSpecError(f"network '{spec}' takes no option {', '.join(bad)} (it takes: "
                                   f"{', '.join(params) or 'none'})")
    return name, func, given


def build_network(spec: str, no_init: bool = False, **options) -> BuiltNetwork:
    """Build the network of ``spec`` with ``options`` (only those its function accepts).

    Every spec, built-in or ``package.module:function``, is built the same way
    (:func:`construct`): on MindSpore's CPU target, under ``no_init_parameters`` when
    ``no_init`` (retried with weights allocated when the constructor reads its own weights), with
    lazy inline undone afterwards and mindformers' training options left ``None`` given the value
    training uses (:func:`~.construction.fill_unset_options`).

    Raises:
        NetworkSpecError: the spec does not resolve, an option is not accepted, the function
            raises or returns something else than ``(net, inputs)`` / a dict.
    """
    name, func, given = check_options(spec, options)
    try:
        out = construct(func, given, no_init)
    except NetworkSpecError:
        raise
    except Exception as exc:
        raise NetworkSpecError(f"network '{spec}' failed to build: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    if isinstance(out, dict):
        built = BuiltNetwork(name, out["net"], tuple(out["inputs"]), out.get("loss"),
                             tuple(out.get("labels", ())), given,
                             tuple(out.get("train_inputs", ())))
    elif isinstance(out, (tuple, list)) and len(out) == 2:
        built = BuiltNetwork(name, out[0], tuple(out[1]), options=given)
    else:
        raise NetworkSpecError(f"network '{spec}' must return (net, inputs) or a dict with 'net' "
                               f"and 'inputs', got {type(out).__name__}")
    undo_lazy_inline(built.net)
    fill_unset_options(built.net)
    return built
