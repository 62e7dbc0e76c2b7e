"""The plugin surface: ``search_mode="smsg"`` and the ``AutoParallel`` wrapper.

MindSpore's C++ accepts only its own search modes (``utils/parallel_context.cc``), so
:func:`set_auto_parallel_context` takes ``"smsg"`` out of the call, puts MindSpore in
semi_auto_parallel, and plans the network on its first compile; every other key and every other
search mode goes to ``mindspore.set_auto_parallel_context`` unchanged.

:class:`AutoParallel` wraps ``mindspore.parallel.auto_parallel.AutoParallel``: MindSpore copies the
wrapper's settings into the context at compile time only when the class is named
``AutoParallel`` (``mindspore/parallel/_utils.py``), so this subclass keeps that name.

A live network is planned in this process: :func:`smsg_ms.graph.capture.capture` (stand-alone
compile of the forward graph, global shapes), then ``planner(graph, devices, hardware=...,
memory_gib=...)``, by default ``smsg_ms.planner.plan_graph``. Every rank computes the same plan (the
planner is deterministic) or loads the same plan file; each logs the plan's content hash.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

from ..devices import check_device_count
from ..plan import Plan
from .plan_io import PlanError, load_plan
from .writeback import apply_plan_context, dataset_layout

log = logging.getLogger("smsg_ms")

SMSG_MODE = "smsg"
_SEARCH_KEYS = ("search_mode", "auto_parallel_search_mode")


@dataclass
class SmsgSettings:
    """What ``set_auto_parallel_context(search_mode="smsg", ...)`` asked for."""

    devices: int
    plan_file: str | None = None
    hardware: str = "ascend910b"
    memory_gib: float | None = None
    planner: Callable | None = None
    plan: Plan | None = None


_settings: SmsgSettings | None = None


def smsg_settings() -> SmsgSettings | None:
    """The active smsg settings, ``None`` when another search mode (or none) is set."""
    return _settings


def _ensure_log_handler() -> None:
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[smsg-ms] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def set_auto_parallel_context(*, smsg_plan_file: str | None = None,
                              smsg_hardware: str = "ascend910b",
                              smsg_memory_gib: float | None = None,
                              smsg_planner: Callable | None = None, **kwargs) -> None:
    """``mindspore.set_auto_parallel_context`` that also accepts ``search_mode="smsg"``.

    With ``search_mode`` (or its alias ``auto_parallel_search_mode``) ``"smsg"``: the search-mode
    key is removed, ``parallel_mode`` becomes ``semi_auto_parallel``, and the first compile of a
    network plans it (or loads ``smsg_plan_file``) and shards its primitives. Any other value
    passes through untouched (MindSpore validates it).

    Args:
        smsg_plan_file: plan file to load instead of planning.
        smsg_hardware: hardware preset name for the planner.
        smsg_memory_gib: memory limit per device (GiB) for the planner.
        smsg_planner: ``planner(graph, devices, hardware=, memory_gib=) -> Plan``; default
            ``smsg_ms.planner.plan_graph``.
        kwargs: MindSpore's keys (``parallel_mode``, ``device_num``, ...).

    Raises:
        PlanError: ``device_num`` missing with search mode smsg.
        smsg_ms.devices.DeviceCountError: ``device_num`` refused by MindSpore.
    """
    import mindspore as ms

    global _settings
    modes = {k: kwargs[k] for k in _SEARCH_KEYS if k in kwargs}
    if SMSG_MODE not in modes.values():
        ms.set_auto_parallel_context(**kwargs)
        if modes or kwargs.get("parallel_mode") not in (None, "semi_auto_parallel"):
            _settings = None
            uninstall_compile_hook()
        return
    for k in _SEARCH_KEYS:
        kwargs.pop(k, None)
    mode = kwargs.get("parallel_mode", "auto_parallel")
    if mode not in ("auto_parallel", "semi_auto_parallel"):
        raise PlanError(f"search mode 'smsg' needs parallel_mode 'auto_parallel', not '{mode}'")
    kwargs["parallel_mode"] = "semi_auto_parallel"
    devices = kwargs.get("device_num") or int(os.environ.get("RANK_SIZE", "0") or 0)
    if not devices:
        raise PlanError("search mode 'smsg' needs device_num (or RANK_SIZE from msrun)")
    check_device_count(int(devices))
    kwargs["device_num"] = int(devices)
    ms.set_auto_parallel_context(**kwargs)
    _settings = SmsgSettings(int(devices), smsg_plan_file, smsg_hardware, smsg_memory_gib,
                             smsg_planner)
    _ensure_log_handler()
    install_compile_hook()


def _shapes(inputs) -> list:
    return [tuple(getattr(t, "shape", ())) for t in inputs]


def _rank() -> int:
    try:
        from mindspore.communication import get_rank
        return int(get_rank())
    except Exception:  # not initialised: stand-alone
        return int(os.environ.get("RANK_ID", "0") or 0)


def forward_cell(cell):
    """The forward part of a training wrapper: descends ``TrainOneStepCell``-like cells (those
    with ``network`` and ``optimizer``) to their ``network``; other cells are returned as is."""
    while hasattr(cell, "optimizer") and hasattr(cell, "network"):
        cell = cell.network
    return cell


def default_planner() -> Callable:
    """``smsg_ms.planner.plan_graph`` (imported late: the planner is a separate module).

    Raises:
        PlanError: the planner is not available in this installation.
    """
    try:
        from .. import planner
    except ImportError as exc:
        raise PlanError(f"the smsg planner is not available ({exc}); give a plan file") from exc
    return planner.plan_graph


def plan_live(net, inputs, devices: int, *, planner: Callable | None = None,
              hardware: str = "ascend910b", memory_gib: float | None = None) -> Plan:
    """Capture ``net`` on ``inputs`` (global shapes) in this process and plan it.

    The capture is a stand-alone compile (the parallel mode is switched off around it and
    restored), so it sees global shapes whatever the context says.
    """
    import mindspore as ms

    from ..graph.capture import capture

    keys = ("parallel_mode", "full_batch", "init_param_in_compile")
    saved = {k: ms.get_auto_parallel_context(k) for k in keys}
    # weights built under no_init_parameters have no data: do not initialise them to capture
    ms.set_auto_parallel_context(parallel_mode="stand_alone", init_param_in_compile=False)
    try:
        graph = capture(forward_cell(net), *inputs)
    finally:
        ms.set_auto_parallel_context(**saved)
    plan = (planner or default_planner())(graph, devices, hardware=hardware,
                                          memory_gib=memory_gib)
    return plan if plan.content_hash else plan.seal()


def plan_and_apply(net, inputs, settings: SmsgSettings) -> Plan:
    """Load or compute the plan for ``net`` and apply it (strategies and data layout)."""
    from .annotate import apply_plan

    if settings.plan_file:
        plan, source = load_plan(settings.plan_file), f"file {settings.plan_file}"
    else:
        plan = plan_live(net, inputs, settings.devices, planner=settings.planner,
                         hardware=settings.hardware, memory_gib=settings.memory_gib)
        source = "planned"
    apply_plan(net, plan, devices=settings.devices, set_context=False)
    apply_plan_context(plan, _shapes(inputs))
    log.info("rank %d: plan %s (%s, %d devices, %d strategies, write-back %s)", _rank(),
             plan.content_hash, source, plan.devices, len(plan.strategies), plan.write_back)
    settings.plan = plan
    return plan


# ---- first-compile hook for plain networks -------------------------------------------------
_hooked: dict[str, Any] = {}


def install_compile_hook() -> None:
    """Plan a plain network on its first compile (``_cell_graph_executor.compile``).

    It also prepares an smsg :class:`AutoParallel` compiled through the executor directly
    (``Cell.compile`` is covered by the class itself). The hook is an attribute of MindSpore's executor object (not its class); it calls
    :func:`plan_and_apply` once, on the first Cell compiled while search mode smsg is set, and is
    removed by :func:`uninstall_compile_hook` or another search mode.
    """
    from mindspore.graph.api import _cell_graph_executor as executor

    if "compile" in _hooked:
        return
    original = executor.compile
    busy = []

    def compile_with_plan(obj, *args, **kwargs):
        if getattr(obj, "_smsg", False) and obj.smsg_plan is None and not busy:
            busy.append(1)
            try:
                obj.prepare(*args)
            finally:
                busy.pop()
        settings = _settings
        if (settings is not None and settings.plan is None and not busy
                and type(obj).__name__ != "AutoParallel" and hasattr(obj, "cells_and_names")):
            busy.append(1)
            try:
                plan_and_apply(obj, args, settings)
            finally:
                busy.pop()
        return original(obj, *args, **kwargs)

    executor.compile = compile_with_plan
    _hooked["compile"] = executor


def uninstall_compile_hook() -> None:
    """Remove the hook of :func:`install_compile_hook` (no-op when absent)."""
    executor = _hooked.pop("compile", None)
    if executor is not None:
        del executor.compile


def _ms_auto_parallel():
    from mindspore.parallel.auto_parallel import AutoParallel as MsAutoParallel
    return MsAutoParallel


def _make_wrapper_class():
    base = _ms_auto_parallel()

    class AutoParallel(base):  # the name must stay "AutoParallel" (see module docstring)
        """MindSpore's ``AutoParallel`` with ``parallel_mode="smsg"``.

        ``AutoParallel(net, parallel_mode="smsg", *, example_inputs=None, plan=None,
        hardware="ascend910b", memory_gib=None, planner=None)``: plans ``net`` from
        ``example_inputs`` (global shapes) at construction, else from the first compiled batch,
        or applies ``plan`` (a :class:`Plan` at construction; a plan file at construction with
        ``example_inputs``, else at the first compile). The data-input layout follows the
        plan (``full_batch`` or ``dataset_strategy``). Other ``parallel_mode`` values are
        MindSpore's and behave exactly as in MindSpore.
        """

        def __init__(self, network, parallel_mode=SMSG_MODE, *, example_inputs=None, plan=None,
                     hardware="ascend910b", memory_gib=None, planner=None):
            smsg = parallel_mode == SMSG_MODE
            super().__init__(network, "semi_auto" if smsg else parallel_mode)
            self._smsg = smsg
            self._smsg_plan = None
            if smsg:
                install_compile_hook()
            self._smsg_options = {"plan_file": plan if not isinstance(plan, Plan) else None,
                                  "hardware": hardware, "memory_gib": memory_gib,
                                  "planner": planner}
            if smsg and isinstance(plan, Plan):
                self._apply(plan, "given")
            elif smsg and example_inputs is not None:
                # without example inputs (a plan file alone) the first compile applies it: the
                # data layout depends on the shapes it is given
                self.prepare(*example_inputs)

        @property
        def smsg_plan(self) -> Plan | None:
            """The plan applied, ``None`` before the first compile."""
            return self._smsg_plan

        def _apply(self, plan: Plan, source: str, inputs=()) -> Plan:
            from .annotate import apply_plan

            from .writeback import wrapper_mode

            apply_plan(self.network, plan, devices=self._device_num, set_context=False)
            # MindSpore copies this into the context at compile (parallel/_utils.py)
            self._parallel_mode = wrapper_mode(plan)
            layout = dataset_layout(plan, _shapes(inputs))
            self.dataset_strategy("full_batch" if layout is None else layout)
            log.info("rank %d: plan %s (%s, %d devices, %d strategies, write-back %s)",
                     self._global_rank, plan.content_hash, source, plan.devices,
                     len(plan.strategies), plan.write_back)
            self._smsg_plan = plan
            return plan

        def prepare(self, *inputs) -> Plan:
            """Plan (or load the plan file) and shard; idempotent."""
            if self._smsg_plan is not None:
                return self._smsg_plan
            _ensure_log_handler()
            opts = self._smsg_options
            if opts["plan_file"]:
                return self._apply(load_plan(opts["plan_file"]), f"file {opts['plan_file']}",
                                   inputs)
            plan = plan_live(self.network, inputs, self._device_num, planner=opts["planner"],
                             hardware=opts["hardware"], memory_gib=opts["memory_gib"])
            return self._apply(plan, "planned", inputs)

        def compile(self, *args, **kwargs):
            if self._smsg and self._smsg_plan is None:
                self.prepare(*args)
            return super().compile(*args, **kwargs)

    AutoParallel.__module__ = __name__
    return AutoParallel


_wrapper_class = None


def wrapper_class():
    """smsg-ms's ``AutoParallel`` class (a ``mindspore.parallel.auto_parallel.AutoParallel``
    subclass of the same name), made on first use so that ``import smsg_ms`` stays light."""
    global _wrapper_class
    if _wrapper_class is None:
        _wrapper_class = _make_wrapper_class()
    return _wrapper_class


def AutoParallel(network, parallel_mode: str = SMSG_MODE, **options):  # noqa: N802
    """Wrap ``network`` in smsg-ms's ``AutoParallel`` (:func:`wrapper_class`); see the class
    docstring for ``options``.
    """
    return wrapper_class()(network, parallel_mode, **options)
