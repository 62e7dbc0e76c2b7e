"""A parameter read by two primitives (an embedding table tied to the output head) is one weight:
one layout, one gradient synchronisation, one copy in memory (MindSpore's rule; its parallel
compiler, in the dry-run, is the oracle for the collectives).

Expected memory is derived here from the plan's strategies: each distinct parameter's elements
divided by the cuts of its layout, times 4 bytes (fp32), counted once.
"""
from __future__ import annotations

import functools
from math import prod

import pytest

from smsg_ms.integration.check import check_plan

SPEC = "smsg_ms.networks.tied:build"
OPTIONS = {"tokens": 128, "vocab": 512, "hidden": 256}


@functools.lru_cache(maxsize=None)
def _plan(devices: int):
    from smsg_ms.planner import plan_network

    return plan_network(SPEC, devices, **OPTIONS)


@pytest.mark.parametrize("devices", [8])
def test_tied_weight_counted_once_and_checked_by_mindspore(devices):
    plan = _plan(devices)
    strategy = {d.name: d.strategy for d in plan.decisions}
    table_cuts = strategy["gather"][0]               # Gather(table, ids): the table's layout
    assert strategy["head"][1] == table_cuts         # one layout for both readers
    w_cuts = strategy["proj"][1]
    want = 4 * (OPTIONS["vocab"] * OPTIONS["hidden"] // prod(table_cuts)
                + OPTIONS["hidden"] ** 2 // prod(w_cuts))
    assert plan.totals["parameter_bytes"] == want
    assert plan.totals["gradient_bytes"] == want
    syncs = [c for d in plan.decisions for c in d.collectives if c.get("phase") == "grad_sync"]
    assert sorted(c["tensor"] for c in syncs) == sorted({c["tensor"] for c in syncs})
    report = check_plan(plan, [0])
    assert report.ok, [row for r in report.ranks for row in r.rows if not row.ok]
