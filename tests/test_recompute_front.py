"""The numpy front over (whole, selective) recompute counts equals the reference built with
``_pareto`` option by option: values (bit for bit), count vectors and order."""
from __future__ import annotations

import random
import struct

import pytest

from smsg_ms.search.recompute import _selective_front, _selective_front_reference


def _bits(front):
    return [(tuple(struct.pack("<d", float(x)) for x in opt[:3]), opt[3]) for opt in front]


@pytest.mark.parametrize("seed", range(60))
def test_selective_front_equals_reference(seed):
    """Random kinds drawn from a small pool (ties in every coordinate), kinds that save nothing
    (whole or selective), zero counts, and inexact sums (0.1-multiples) where the order of the
    additions shows in the last bit."""
    rng = random.Random(seed)
    fwd = [0.0, 0.1, 0.5, 1.0, 0.3, 1.5]
    saved = [-1.0, 0.0, 0.7, 2.0, 3.0, 6.0]
    pool = [(rng.choice(fwd), rng.choice(saved), rng.choice(fwd), rng.choice(saved))
            for _ in range(3)]
    key = []
    for _ in range(rng.randint(1, 4)):
        f, s, sf, ss = pool[rng.randrange(3)]
        key.append((f, s, rng.randint(0, 7), sf, ss))
    key = tuple(key)
    got, want = _selective_front(key), _selective_front_reference(key)
    assert got == want
    assert _bits(got) == _bits(want)


def test_selective_front_can_differ_from_a_wrong_order():
    """The comparison above can fail: the front's order and values matter (a front sorted the
    other way round is not equal)."""
    key = ((1.0, 2.0, 3, 0.5, 1.0), (0.3, 0.7, 2, 0.1, 0.7))
    want = _selective_front_reference(key)
    assert len(want) > 2
    assert list(reversed(_selective_front(key))) != want
