"""Shared fixtures: compiled graphs are captured once per session and reused."""
from __future__ import annotations

import functools

import pytest

from smsg_ms.graph import capture as _capture_module

#: the real capture, kept before any test module shares it (``shared_capture``)
_CAPTURE = _capture_module.capture_network


#: (spec, options without ``world``) → graph of the specs whose capture built for a ``world``
#: did not read it: the same graph for every ``world`` or none (``built_for`` None)
_UNREAD: dict = {}


def _captured(spec: str, items: tuple):
    plain = (spec, tuple(sorted((k, v) for k, v in items if k != "world")))
    if plain in _UNREAD:
        return _UNREAD[plain]
    graph = _captured_once(spec, items)
    if graph.built_for is None and any(k == "world" for k, _ in items):
        # built for a world it did not read: any world (or none) captures the same graph
        _UNREAD[plain] = graph
    return graph


@functools.lru_cache(maxsize=None)
def _captured_once(spec: str, items: tuple):
    return _CAPTURE(spec, **dict(items))


@pytest.fixture(scope="session")
def captured():
    """``captured(spec, **options)`` → OpGraph, cached for the whole session."""
    def get(spec: str, **options):
        return _captured(spec, tuple(sorted(options.items())))
    return get


@pytest.fixture(scope="session")
def capture_of(captured):
    """``capture_of(spec, **options)`` → ``batch -> OpGraph`` from the session cache: the
    ``capture=`` of ``plan_network_pipelined`` and ``StageCosts`` (the same
    ``capture_network(spec, batch=b, **options)`` they call by default), so pipelined plans of
    one network share its captures with each other and with ``captured``."""
    def of(spec: str, **options):
        return lambda b: captured(spec, batch=b, **options)
    return of


@pytest.fixture(scope="module")
def shared_capture(captured):
    """For the module that uses it, ``smsg_ms.graph.capture.capture_network`` answers from the
    session cache of ``captured``: the real capture (a dry-run child) runs once per (spec,
    options), and ``check_plan``'s fingerprint capture (``verify_network``) of a network the
    test captured already reuses that graph instead of starting another child. Same graph,
    same fingerprint (captures are deterministic): the check compares what it did before.
    The graphs are shared: a test using this must not modify a captured graph."""
    def shared(spec: str, devices: int = 1, world: int | None = None, **options):
        if devices != 1:
            options["devices"] = devices
        if world is not None:
            options["world"] = world
        return captured(spec, **options)
    _capture_module.capture_network = shared
    yield shared
    _capture_module.capture_network = _CAPTURE
