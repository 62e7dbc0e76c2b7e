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

from ..errors import InputError
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


class SpecError(NetworkSpecError, InputError):
    """A spec that names no network (:func:`resolve_spec`), or options its function does not
    take: bad input (the CLI's exit 2). A function that raises while building is a plain
    :class:`NetworkSpecError` (the network cannot be built: exit 1)."""


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
        SpecError: not a built-in name nor ``package.module:function`` (an empty part, more
            than one ``:``, a part that is not a Python name), a module that does not exist or
            fails to import (a syntax error, an import inside it), a name the module lacks or
            that is not a function (a class or other callable is taken). One line naming the
            spec, the cause and what to give.
    """
    name = spec
    if spec in BUILTINS:
        spec = BUILTINS[spec][0]
    elif ":" not in spec:
        known = ", ".join(sorted(BUILTINS))
        raise SpecError(f"unknown network '{spec}': give a built-in name ({known}) or "
                        "'package.module:function'")
    module_name, func_name = _spec_parts(spec)
    module = _import_spec_module(spec, module_name)
    func = getattr(module, func_name, None)
    if func is None:
        raise SpecError(f"network spec '{spec}': module '{module_name}' has no '{func_name}' "
                        f"({_functions_of(module)})")
    if not callable(func):
        raise SpecError(f"network spec '{spec}': '{func_name}' in module '{module_name}' is "
                        f"{_a(type(func).__name__)}, not a function ({_functions_of(module)})")
    if name == spec:
        name = func_name if func_name not in ("build", "network", "main") else module_name
    return name, func


_SPEC_FORM = "give package.module:function, e.g. mymodels:build"


def _spec_parts(spec: str) -> tuple[str, str]:
    """``(module, function)`` of ``package.module:function``. Raises: SpecError."""
    module_name, _, func_name = spec.partition(":")
    if ":" in func_name:
        raise SpecError(f"network spec '{spec}': more than one ':' ({_SPEC_FORM})")
    if not module_name.strip():
        raise SpecError(f"network spec '{spec}': no module before ':' ({_SPEC_FORM})")
    if not func_name.strip():
        raise SpecError(f"network spec '{spec}': no function after ':' ({_SPEC_FORM})")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise SpecError(f"network spec '{spec}': '{module_name}' is not a module name "
                        f"({_SPEC_FORM})")
    if not func_name.isidentifier():
        raise SpecError(f"network spec '{spec}': '{func_name}' is not a function name "
                        f"({_SPEC_FORM})")
    return module_name, func_name


def _import_spec_module(spec: str, module_name: str):
    """The module of ``spec``. Raises: SpecError naming why it does not import."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise SpecError(f"network spec '{spec}': no module '{exc.name}' in the working "
                            "folder or on the Python path (run from the folder that holds it, "
                            "or add that folder to PYTHONPATH)") from None
        raise SpecError(f"network spec '{spec}': module '{module_name}' fails to import: "
                        f"{_first_line(exc)}") from None
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
        raise SpecError(f"network spec '{spec}': module '{module_name}' has a syntax error "
                        f"({exc.msg}: {where})") from None
    except Exception as exc:  # noqa: BLE001 (a module runs any code when imported)
        raise SpecError(f"network spec '{spec}': module '{module_name}' fails to import: "
                        f"{type(exc).__name__}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _functions_of(module) -> str:
    """``its functions: build, small`` (those the module defines, not imports; at most 5)."""
    names = sorted(k for k, v in vars(module).items()
                   if inspect.isfunction(v) and not k.startswith("_")
                   and getattr(v, "__module__", None) == module.__name__)
    if not names:
        return "it defines no function"
    return "its functions: " + ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def check_options(spec: str, options: dict) -> tuple[str, Callable, dict]:
    """Resolve ``spec`` and check ``options`` against its function's signature (nothing is built).

    Returns:
        ``(name, function, options without None values)``.

    Raises:
        SpecError: the spec does not resolve or an option is not accepted.
    """
    name, func = resolve_spec(spec)
    params = inspect.signature(func).parameters
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    given = {k: v for k, v in options.items() if v is not None}
    if not takes_any:
        bad = sorted(set(given) - set(params))
        if bad:
            raise SpecError(f"network '{spec}' takes no option {', '.join(bad)} (it takes: "
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
