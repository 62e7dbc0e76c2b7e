"""Shared fixtures: compiled graphs are captured once per session and reused."""
from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=None)
def _captured(spec: str, items: tuple):
    from smsg_ms.graph.capture import capture_network

    return capture_network(spec, **dict(items))


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
