"""``search_mode="smsg"`` through MindSpore's own API, after ``import smsg_ms``.

MindSpore's C++ accepts only its own search modes (``utils/parallel_context.cc``), and
``mindspore.parallel.auto_parallel.AutoParallel`` only ``semi_auto``, ``sharding_propagation`` and
``recursive_programming``. :func:`install` (called by ``import smsg_ms``) therefore intercepts, in
Python, where users reach them:

* ``set_auto_parallel_context`` (``mindspore`` and ``mindspore.context``, every alias that is the
  same function object): a user's call goes through
  :func:`smsg_ms.integration.context.set_auto_parallel_context`, which handles
  ``search_mode="smsg"`` / ``auto_parallel_search_mode="smsg"`` (and the ``smsg_*`` keys) and
  hands every other call to MindSpore unchanged;
* ``get_auto_parallel_context``: ``"search_mode"`` / ``"auto_parallel_search_mode"`` read
  ``"smsg"`` while smsg is the search mode (MindSpore itself is in ``semi_auto_parallel`` then);
  every other key is MindSpore's answer;
* ``reset_auto_parallel_context``: MindSpore's reset, and smsg stops being the search mode;
* ``AutoParallel(net, parallel_mode="smsg", ...)``: MindSpore's class builds smsg-ms's
  subclass (:func:`smsg_ms.integration.context.wrapper_class`) for that value only; every other
  value is MindSpore's class as it is.

Calls made by MindSpore's own modules and by smsg-ms's reach MindSpore's functions directly:
MindSpore reads ``get_auto_parallel_context`` internally (``nn/optim``, ``nn/wrap``) and must see
its real state, and smsg-ms switches the mode itself while it captures and applies a plan.

``import smsg_ms`` does not import MindSpore: the functions are patched when ``mindspore.context``
and ``mindspore.parallel.auto_parallel`` are first imported (an import hook), or at once when they
already are.
"""
from __future__ import annotations

import functools
import importlib.abc
import sys
from typing import Callable

_SEARCH_KEYS = ("search_mode", "auto_parallel_search_mode")
_CONTEXT_FUNCTIONS = ("set_auto_parallel_context", "get_auto_parallel_context",
                      "reset_auto_parallel_context")
#: MindSpore's functions as they were before the patch: name → function
originals: dict[str, Callable] = {}


def _from_user(depth: int = 2) -> bool:
    """Whether the caller of the patched function (``depth`` frames up) is a user's code, not
    MindSpore's or smsg-ms's own modules."""
    module = sys._getframe(depth).f_globals.get("__name__", "")
    return not (module.split(".")[0] in ("mindspore", "smsg_ms"))


def _replace_everywhere(old, new) -> None:
    """Point every module attribute that is ``old`` (``mindspore.set_auto_parallel_context``,
    ``mindspore.context.set_auto_parallel_context``, a user's ``from mindspore import ...``)
    at ``new``."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            if value is old:
                setattr(module, key, new)


def _patched_set(original):
    @functools.wraps(original)
    def set_auto_parallel_context(**kwargs):
        if not _from_user():
            return original(**kwargs)
        from .context import set_auto_parallel_context as smsg_set
        return smsg_set(**kwargs)

    return set_auto_parallel_context


def _patched_get(original):
    @functools.wraps(original)
    def get_auto_parallel_context(attr_key):
        if attr_key in _SEARCH_KEYS and _from_user():
            from .context import SMSG_MODE, smsg_settings
            if smsg_settings() is not None:
                return SMSG_MODE
        return original(attr_key)

    return get_auto_parallel_context


def _patched_reset(original):
    @functools.wraps(original)
    def reset_auto_parallel_context():
        original()
        if _from_user():
            from .context import set_auto_parallel_context as smsg_set
            # a mode other than smsg ends smsg's settings and its compile hook; stand_alone is
            # also what the reset just set, so MindSpore's state is the reset one
            smsg_set(parallel_mode="stand_alone")

    return reset_auto_parallel_context


def _patch_context(module) -> None:
    if originals:
        return
    makers = {"set_auto_parallel_context": _patched_set,
              "get_auto_parallel_context": _patched_get,
              "reset_auto_parallel_context": _patched_reset}
    for name in _CONTEXT_FUNCTIONS:
        original = getattr(module, name)
        originals[name] = original
        patched = makers[name](original)
        patched.__smsg_original__ = original
        setattr(module, name, patched)
        _replace_everywhere(original, patched)


def _patch_auto_parallel(module) -> None:
    base = module.AutoParallel
    if "__smsg_new__" in base.__dict__:
        return
    inherited_new = base.__new__

    def __new__(cls, *args, **kwargs):  # noqa: N807
        mode = args[1] if len(args) > 1 else kwargs.get("parallel_mode")
        if cls is base and mode == "smsg":
            from .context import wrapper_class
            cls = wrapper_class()  # a subclass: Python then calls its __init__ with these args
        return inherited_new(cls, *args, **kwargs)

    base.__new__ = __new__
    base.__smsg_new__ = True


_PATCHES = {"mindspore.context": _patch_context,
            "mindspore.parallel.auto_parallel": _patch_auto_parallel}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Runs the patch of a module of :data:`_PATCHES` right after the module is executed, before
    any importer sees its names."""

    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            _PATCHES[name](module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Let MindSpore's own API take ``search_mode="smsg"`` (see the module docstring); idempotent.
    """
    if not any(isinstance(f, _PatchAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
    for name, patch in _PATCHES.items():
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__file__"):
            patch(module)
