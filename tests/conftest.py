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
