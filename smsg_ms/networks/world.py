"""The world size a network is built for: the plan's device count in a capture on one device.

mindformers' ``parallel_core`` models (DeepSeek-V3, TeleChat3-MoE, Qwen3-MoE...) read the
world size while they are built: ``data_parallel`` = devices / pipeline stages, and from it
the router's ``reshape(scores, (dp, -1, E))`` and its ``dp``-sized statistics
(``transformer/moe/router.py``). A capture compiles on one device, so a network built from
MindSpore's group size would have ``dp = 1`` there and ``dp = devices`` in the plan's compile:
other shapes, other operators. :func:`built_for` makes the specs of this package
(:func:`world_size`) see the plan's device count instead, for the duration of a build: the
devices of one stage (``devices / stages``; a network reads ``world_size() //
pipeline_stages`` and the capture compiles one stage), by default in ``smsg-ms plan``
(``--no-build-for-devices`` opts out; :mod:`smsg_ms.planner.stage_graphs` for the pipeline
search).
"""
from __future__ import annotations

import contextlib

#: the device counts of the open :func:`built_for` blocks, innermost last
_BUILT_FOR: list["BuiltFor"] = []


class BuiltFor:
    """An open :func:`built_for` block: ``devices`` declared, ``read`` once a network built
    inside it asked :func:`world_size`."""

    def __init__(self, devices: int | None):
        self.devices = devices
        self.read = False


@contextlib.contextmanager
def built_for(devices: int | None):
    """Networks built inside the block read ``devices`` as their world size
    (:func:`world_size`); ``None`` leaves MindSpore's group size. Yields a :class:`BuiltFor`
    whose ``read`` says whether the network asked (its graph then depends on ``devices``). Not
    thread-safe (one build at a time, as in the dry-run child)."""
    block = BuiltFor(None if devices is None else int(devices))
    _BUILT_FOR.append(block)
    try:
        yield block
    finally:
        _BUILT_FOR.pop()


def communication_size() -> int:
    """Devices of MindSpore's initialised communication (1 before ``init()``)."""
    from mindspore.communication import get_group_size

    try:
        return int(get_group_size())
    except RuntimeError:
        return 1


def world_size() -> int:
    """The world size a network being built reads: the device count of the innermost
    :func:`built_for` block (marked read), else :func:`communication_size`."""
    if _BUILT_FOR and _BUILT_FOR[-1].devices is not None:
        _BUILT_FOR[-1].read = True
        return _BUILT_FOR[-1].devices
    return communication_size()


def declared() -> bool:
    """Whether a :func:`built_for` block declares a world size other than the
    communication's (the network cannot create its communication groups: it is built for
    devices the process does not have)."""
    return (bool(_BUILT_FOR) and _BUILT_FOR[-1].devices is not None
            and _BUILT_FOR[-1].devices != communication_size())
