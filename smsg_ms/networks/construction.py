"""How every network function is called: the same way for built-ins and user specs.

Facts this relies on (``shared/docs/mindspore-notes.md``, "Capturing networks of real size";
checked with mindformers 1.9.0 and mindcv 0.3.0 in the dry-run):

* mindformers (and mindcv) networks constructed under the dry-run's GPU target crash the process
  (segmentation fault); constructed under ``device_target="CPU"``, then compiled under the GPU
  target, they compile. :func:`cpu_target` does that for every spec.
* Under ``mindspore.nn.utils.no_init_parameters`` a constructor that reads its own weights
  (mindcv ConvNeXt scales ``classifier.weight`` by ``head_init_scale``) fails with "... is
  uninitialized"; such a network is built again with its weights allocated. Semi/auto parallel
  also defers a weight's data (``Parameter.__new__`` keeps the initializer when
  ``_is_in_auto_parallel_mode()``, ``mindspore/common/parameter.py``), so that second
  construction runs in the stand-alone mode, the caller's mode restored after it.
* ``mindspore.lazy_inline`` (mindformers' ``get_lazy_inline`` on its models' ``__init__``)
  marks a cell by a ``cell_init_args`` string starting ``lazy_inline_``; the front end then
  compiles the cell once as a sub-graph, and the dry-run jobs read strategies and collectives
  from the top graph only. :func:`undo_lazy_inline` removes the mark after construction, which is
  what mindformers' ``config.disable_lazy_inline = True`` does before it.
* mindformers 1.9.0 leaves some training options of its ``parallel_core`` models ``None`` unless
  the run's YAML gives them, and its training graph then computes with the ``None``
  (:data:`UNSET_OPTIONS`); :func:`fill_unset_options` gives them the value training uses.
* mindformers' legacy models (LLaMA, GLM2) refuse a context with more pipeline stages than
  their config's, and a config built without a ``parallel_config`` has mindformers' shared
  default (1 stage): such a constructor is called again with that default at the context's
  stage count (:func:`_default_stages_to_context`).
"""
from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Callable

#: ``cell_init_args`` prefix of :func:`mindspore.lazy_inline` (``mindspore/graph/lazy_inline.py``)
LAZY_INLINE_PREFIX = "lazy_inline_"
#: suffix of the marks a network function sets on purpose to reuse its layers' graph (kept)
REUSE_SUFFIX = "_smsg_reuse"
#: words of MindSpore's errors when a constructor reads a weight built under no_init_parameters
#: MindSpore's words for a weight without data (``no_init_parameters``): a read ("... is
#: uninitialized", ``init_data``) or an element written (``w.data[i, j] = v``, mindcv ConViT's
#: ``_initialize_weights``: "The pointer[device_address] is null", ``CreateInputAddressForViewOp``)
_UNINITIALISED = ("uninitialized", "uninitialised", "init_data", "has not been initialized",
                  "pointer[device_address] is null")

log = logging.getLogger(__name__)

#: option of a mindformers model config (``parallel_core/transformer_config.py``) → the value
#: training uses when the config leaves it ``None``; each is read as a number by the training
#: graph, which fails on ``None`` at compile:
#:
#: * ``moe_router_topk_scaling_factor``: ``training_graph/transformer/moe/router.py:295``
#:   ``self.mul(self.config.moe_router_topk_scaling_factor, probs)`` ("Failed calling Mul with
#:   input=None", Qwen3-MoE). The field's description: "Defaults to None, which means no
#:   scaling"; mindformers' PyNative router (``pynative/transformers/moe/router.py:58``) reads
#:   ``None`` as ``1.0``.
#: * ``mtp_loss_scaling_factor``: ``training_graph/transformer/multi_token_prediction.py:515``
#:   divides it by ``mtp_num_layers`` ("unsupported operand type(s) for /: 'NoneType' and
#:   'int'", DeepSeek-V3, TeleChat3-MoE; the block copies it at ``__init__``, line 325). The field
#:   is Megatron's (``ParamSource.MEGATRON``); Megatron-LM trains with ``0.1``
#:   (``megatron/training/arguments.py``, ``--mtp-loss-scaling-factor`` default).
UNSET_OPTIONS = {"moe_router_topk_scaling_factor": 1.0, "mtp_loss_scaling_factor": 0.1}


@contextlib.contextmanager
def cpu_target():
    """Construct on the CPU target, then restore the caller's target (GPU in the dry-run)."""
    import mindspore as ms

    old = ms.get_context("device_target")
    if old != "CPU":
        ms.set_context(device_target="CPU")
    try:
        yield
    finally:
        if old != "CPU":
            ms.set_context(device_target=old)


def reads_own_weights(exc: BaseException) -> bool:
    """Whether ``exc`` is MindSpore refusing to read a weight that has no data yet."""
    text = str(exc).lower()
    return any(word in text for word in _UNINITIALISED)


def construct(func: Callable[..., Any], options: dict, no_init: bool) -> Any:
    """Call the network function ``func(**options)`` on the CPU target.

    With ``no_init`` it runs under ``no_init_parameters`` (no weight allocated); when the
    constructor reads one of its own weights (:func:`reads_own_weights`) it is called once more
    with weights allocated (stand-alone mode during that call), so the network still builds (at
    the cost of its weights' memory). When the call switches MindSpore's execution mode
    (mindformers' first ``get_context`` creates its ``Context``, which sets MindSpore's defaults,
    PyNative mode among them, and its model classes then pick their PyNative variant), the
    caller's mode is restored, in mindformers' context too (its ``set_context``), and the
    function called again.

    Raises:
        whatever ``func`` raises (the last call's error).
    """
    import mindspore as ms

    with cpu_target(), _semi_auto_for_propagation():
        mode = ms.get_context("mode")
        try:
            out = _call_staged(func, options, no_init)
        except Exception:  # retried below only when the mode moved under it
            if ms.get_context("mode") == mode:
                raise
        if ms.get_context("mode") == mode:
            return out
        _restore_mode(mode)
        log.warning("the network's constructor switched MindSpore's execution mode; building "
                    "it again in the caller's mode")
        try:
            return _call_staged(func, options, no_init)
        finally:
            if ms.get_context("mode") != mode:
                _restore_mode(mode)


def _restore_mode(mode: int) -> None:
    """Set MindSpore's execution mode, through mindformers' context when it has one (its model
    classes read the mode from that context's cache, not from MindSpore)."""
    import mindspore as ms

    mf_context = sys.modules.get("mindformers.core.context.build_context")
    if mf_context is not None and mf_context.Context.is_exists():
        mf_context.set_context(mode=mode)
    ms.set_context(mode=mode)


def _call_staged(func: Callable[..., Any], options: dict, no_init: bool) -> Any:
    """:func:`_call`; when a mindformers legacy model refuses the context's pipeline stages
    (:data:`_STAGES_REFUSED`) and its config took mindformers' shared default parallel config,
    that default is given the context's stage count and the function called again."""
    try:
        return _call(func, options, no_init)
    except ValueError as exc:  # retried only for the pipeline-stage check, re-raised otherwise
        if _STAGES_REFUSED not in str(exc) or not _default_stages_to_context():
            raise
        log.warning("the network's mindformers config has 1 pipeline stage where the plan has "
                    "more; building it again with mindformers' default parallel config at the "
                    "plan's stage count")
    return _call(func, options, no_init)


#: mindformers' refusal (``modules/transformer/op_parallel_config.py``, ``_check_config``)
_STAGES_REFUSED = "in auto_parallel_context is not equal to the pipeline_stage"


def _default_stages_to_context() -> bool:
    """Set ``pipeline_stage`` of mindformers' shared ``default_transformer_config``
    (``modules/transformer/transformer.py``; the ``parallel_config`` of every legacy model
    config built without one, e.g. ``LlamaConfig``) to the context's ``pipeline_stages``, as
    mindformers' training path does (its YAML's ``parallel_config.pipeline_stage`` is the
    context's). Legacy models check the two agree in their constructor (``_check_config``)
    and put the embedding on stage 0, the final norm and the head on the last stage from it.
    False when that default already has the context's count (the config is the user's own)."""
    import mindspore as ms

    module = sys.modules.get("mindformers.modules.transformer.transformer")
    default = getattr(module, "default_transformer_config", None)
    stages = int(ms.get_auto_parallel_context("pipeline_stages"))
    if default is None or int(default.pipeline_stage) == stages:
        return False
    default.pipeline_stage = stages
    return True


def _call(func: Callable[..., Any], options: dict, no_init: bool) -> Any:
    """``func(**options)``, under ``no_init_parameters`` when ``no_init`` (see :func:`construct`)."""
    if not no_init:
        return func(**options)
    from mindspore.nn.utils import no_init_parameters
    try:
        with no_init_parameters():
            return func(**options)
    except Exception as exc:  # retried only for a weight read, re-raised otherwise
        if not reads_own_weights(exc):
            raise
        log.warning("the network's constructor reads its own weights (%s); building it "
                    "again with weights allocated", str(exc).splitlines()[0])
    with _stand_alone():
        _drain_pending_ops()
        try:
            return func(**options)
        except Exception as exc:  # a stale error of the failed build, once; re-raised otherwise
            if not reads_own_weights(exc):
                raise
            log.warning("the weight-allocated build still met an uninitialised weight (%s); "
                        "draining MindSpore's op queue and building once more",
                        str(exc).splitlines()[0])
        _drain_pending_ops()
        return func(**options)


def _drain_pending_ops() -> None:
    """Wait for the PyNative ops still queued. MindSpore runs them asynchronously (pyboost) and
    reports an op's error at a later read (``tensor_memory.cc`` ``CreateInputTensorAddress``), so
    an error of the failed no-init build can surface in the next build's first read; it is the
    failed build's and is dropped here."""
    from mindspore.graph.api import _pynative_executor

    try:
        _pynative_executor.sync()
    except RuntimeError as exc:
        log.debug("dropped an error of the failed build: %s", str(exc).splitlines()[0])


@contextlib.contextmanager
def _semi_auto_for_propagation():
    """Construct in ``semi_auto_parallel`` when the caller compiles in ``auto_parallel`` with
    sharding propagation (``check`` of a plan written back by propagation): a network's own
    strategies are replaced by the plan's either way, and mindformers 1.9.0's ``parallel_core``
    layers call a ``sharding_propagation`` method in that mode that ``FlashAttention`` lacks
    (AttributeError at construction)."""
    import mindspore as ms

    old = ms.get_auto_parallel_context("parallel_mode")
    propagate = old == "auto_parallel" and \
        ms.get_auto_parallel_context("search_mode") == "sharding_propagation"
    if propagate:
        ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    try:
        yield
    finally:
        if propagate:
            ms.set_auto_parallel_context(parallel_mode=old, search_mode="sharding_propagation")


@contextlib.contextmanager
def _stand_alone():
    """``parallel_mode="stand_alone"`` for the block, the caller's mode restored after it."""
    import mindspore as ms

    old = ms.get_auto_parallel_context("parallel_mode")
    if old != "stand_alone":
        ms.set_auto_parallel_context(parallel_mode="stand_alone")
    try:
        yield
    finally:
        if old != "stand_alone":
            ms.set_auto_parallel_context(parallel_mode=old)


def fill_unset_options(net) -> list[str]:
    """Give every :data:`UNSET_OPTIONS` option that a mindformers cell of ``net`` (or its
    ``config``) holds as ``None`` the value training uses, so a model built outside mindformers'
    YAML path compiles. Cells and configs of other packages are left alone; a value already set
    is kept.

    Returns:
        ``"path.option"`` of each option filled (``path`` the cell's, ``path.config`` for its
        config), in ``cells_and_names`` order, each config once.
    """
    filled, seen = [], set()
    for name, cell in net.cells_and_names():
        if not type(cell).__module__.startswith("mindformers"):
            continue
        config = cell.__dict__.get("config")
        holders = [(name, cell.__dict__)]
        if config is not None and id(config) not in seen \
                and type(config).__module__.startswith("mindformers"):
            seen.add(id(config))
            holders.append((f"{name}.config" if name else "config", vars(config)))
        for path, attrs in holders:
            for option, value in UNSET_OPTIONS.items():
                if option in attrs and attrs[option] is None:
                    attrs[option] = value
                    filled.append(f"{path}.{option}")
    if filled:
        log.info("mindformers options left None, set as training sets them: %s",
                 ", ".join(filled))
    return filled


def undo_lazy_inline(net) -> list[str]:
    """Drop the ``lazy_inline`` marks of the cells of ``net`` (those not ending in
    :data:`REUSE_SUFFIX`), so the front end inlines them like any cell.

    Returns:
        the paths of the cells unmarked, in ``cells_and_names`` order.
    """
    undone = []
    for name, cell in net.cells_and_names():
        mark = cell.__dict__.get("_cell_init_args")
        if isinstance(mark, str) and mark.startswith(LAZY_INLINE_PREFIX) \
                and not mark.endswith(REUSE_SUFFIX):
            del cell.__dict__["_cell_init_args"]
            undone.append(name)
    return undone
