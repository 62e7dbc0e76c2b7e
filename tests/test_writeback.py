"""Write-back by sharding propagation (``Plan.write_back == "propagate"``).

Network: ``smsg_ms.networks.window_bias`` (blocks of 3, 6 and 12 heads, 8 devices). Its bias is
built by functional calls that no ``shard()`` reaches. Derivation of the expected collectives:

* semi_auto_parallel: ``expand_dims`` of ``(heads, N, N)`` takes the batch-parallel default, a
  ``gcd(heads, 8)``-way cut of the heads: 1, 2, 4 for 3, 6, 12 heads; the Add with the
  batch-parallel attention needs the bias whole, so one AllGather (forward) and one
  ReduceScatter (backward) over 2 and over 4 devices.
* sharding propagation seeded with the same strategies: the Add's layout comes from its
  planned neighbours (attention cut on the batch, heads whole), the bias chain inherits
  "heads whole", so nothing is gathered: no AllGather or ReduceScatter over 2 or 4 devices.
  MindSpore keeps every seed: the strategies it reports for the planned primitives are the plan's.
"""
from __future__ import annotations

from collections import Counter

import pytest

from smsg_ms.compare import measures
from smsg_ms.compare.runner import _compile
from smsg_ms.integration.plan_io import PlanError, plan_from_text
from smsg_ms.integration.writeback import parallel_context, wrapper_mode
from smsg_ms.planner import plan_graph
from smsg_ms.planner.write_back import (choose_write_back, set_write_back,
                                        unreached_with_collectives)

SPEC = "smsg_ms.networks.window_bias:build"


@pytest.fixture(scope="module")
def plans(captured):
    graph = captured(SPEC)
    return {mode: plan_graph(graph, 8, network=SPEC, progress=False, write_back=mode)
            for mode in ("auto", "shard", "propagate")}


@pytest.fixture(scope="module")
def compiled(plans):
    """The same strategies compiled once per write-back mode (planner_compile job)."""
    return {"shard": _compile(SPEC, 8, "semi_auto", {}, plans["shard"].strategies),
            "propagate": _compile(SPEC, 8, "sharding_propagation", {},
                                  plans["propagate"].strategies)}


def _gathers(result) -> Counter:
    return Counter((c["type"], int(c["group_size"]), measures.phase_of(c))
                   for c in result["collectives"]
                   if c["type"] in ("AllGather", "ReduceScatter"))


def test_auto_writes_shard_even_when_functional_calls_communicate(plans):
    """The gathers above sit on functional operators (labelled Type@scope); propagation would
    lay them out otherwise than the plan predicts (``test_check_compiles_with_the_plans_write_
    back``: 1 predicted, 0 inserted), so ``auto`` keeps the write-back whose collectives the
    plan predicts: ``shard``."""
    unreached = unreached_with_collectives(plans["shard"])
    assert unreached and all("@" in name for name in unreached)
    assert plans["auto"].write_back == "shard"
    assert plans["shard"].write_back == "shard"
    assert plans["auto"].strategies == plans["shard"].strategies


def test_write_back_recorded_and_hashed(plans):
    shard, prop = plans["shard"], plans["propagate"]
    assert "write_back" not in shard.to_dict()          # older plan files keep their hash
    assert prop.to_dict()["write_back"] == "propagate"
    assert shard.content_hash != prop.content_hash
    assert plan_from_text(prop.to_json()).write_back == "propagate"
    assert parallel_context(prop) == {"parallel_mode": "auto_parallel",
                                      "search_mode": "sharding_propagation"}
    assert parallel_context(shard) == {"parallel_mode": "semi_auto_parallel"}
    assert (wrapper_mode(prop), wrapper_mode(shard)) == ("sharding_propagation", "semi_auto")


def test_bad_write_back_mode(plans):
    with pytest.raises(PlanError, match="write-back mode must be one of"):
        choose_write_back(plans["shard"], "sideways")
    pipelined = plan_from_text(plans["shard"].to_json())
    pipelined.pipeline = {"stages": 2}
    with pytest.raises(PlanError, match="pipelined"):
        set_write_back(pipelined, "propagate")
    assert choose_write_back(pipelined, "auto") == "shard"


def test_semi_auto_gathers_the_bias(compiled):
    got = _gathers(compiled["shard"])
    for group in (2, 4):
        assert got[("AllGather", group, "forward")] == 1
        assert got[("ReduceScatter", group, "backward")] == 1


def test_propagation_keeps_seeds_and_drops_the_gathers(plans, compiled):
    result = compiled["propagate"]
    seeds = plans["propagate"].strategies
    assert {p: result["strategies"].get(p) for p in seeds} == seeds
    got = _gathers(result)
    assert not [k for k in got if k[1] in (2, 4)], got
    # nothing is added: the propagated graph's collectives are a part of the semi-auto ones
    def every(r):
        return Counter((c["type"], int(c["group_size"]), measures.phase_of(c))
                       for c in r["collectives"])
    assert not every(result) - every(compiled["shard"])


def test_check_compiles_with_the_plans_write_back(plans):
    """``smsg-ms check`` route (plan_compile job): the propagated plan is compiled by
    propagation, so the bias gathers it predicts under the semi-auto default are not found."""
    from smsg_ms.integration.check import check_plan

    rank = check_plan(plans["propagate"], [0]).ranks[0]
    assert rank.error is None, rank.error
    inserted = {row.key: row.inserted for row in rank.rows}
    predicted = {row.key: row.predicted for row in rank.rows}
    for group in (2, 4):
        assert predicted.get(("AllGather", "forward", group)) == 1
        assert not inserted.get(("AllGather", "forward", group))


def test_exported_strategy_file_loads_under_the_plans_write_back(captured, plans, tmp_path):
    """Strategy-file route: the exported file, loaded with ``load_context`` (auto_parallel,
    sharding propagation), seeds the propagation like ``shard()``: no bias gathers. The file
    holds only the primitives that read a Parameter (the Dense MatMuls, BiasAdds); the rest
    is propagated."""
    from smsg_ms.dryrun.runner import run_child
    from smsg_ms.integration.strategy_files import load_context, write_strategy_ckpt

    ckpt = tmp_path / "strategy.json"
    plan = plans["propagate"]
    write_strategy_ckpt(plan, captured(SPEC), ckpt)
    context = load_context(plan, ckpt)
    mode = context.pop("parallel_mode")
    assert (mode, context["search_mode"]) == ("auto_parallel", "sharding_propagation")
    result = run_child({"job": "compile", "spec": SPEC, "options": {}, "strategies": {},
                        "parallel_mode": mode, "context": dict(context, full_batch=True)},
                       devices=8)
    got = _gathers(result)
    assert not [k for k in got if k[1] in (2, 4)], got


def _example(tmp_path, *extra) -> list[str]:
    """Run scripts/msrun_example.py on window_bias over 2 simulated ranks; rank 0's mode line."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]))
    proc = subprocess.run([sys.executable, str(root / "scripts" / "msrun_example.py"),
                           "--simulate-ranks", "2", "--network", SPEC, "--options", "{}",
                           *extra], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
    return [l for l in proc.stdout.splitlines() if l.strip().startswith("rank 0: parallel_mode")]


@pytest.mark.parametrize("route", ["search_mode", "AutoParallel"])
def test_training_script_routes_honour_the_write_back(captured, tmp_path, route):
    """On 2 devices the semi-auto default cuts 6 and 12 heads 2-way (gcd), so a ``shard`` plan
    gathers twice over 2 devices; the ``propagate`` plan runs sharding propagation, no gather."""
    from smsg_ms.integration.plan_io import save_plan

    wrapper = ["--wrapper"] if route == "AutoParallel" else []
    got = {}
    for mode in ("shard", "propagate"):
        path = tmp_path / f"{mode}.plan.json"
        save_plan(plan_graph(captured(SPEC), 2, network=SPEC, progress=False, write_back=mode),
                  path)
        (line,) = _example(tmp_path, "--plan", str(path), *wrapper)
        got[mode] = line
    assert got["shard"].count('"AllGather/2"') == 2
    assert "AllGather" not in got["propagate"]
    if not wrapper:  # the wrapper sets MindSpore's context only during its compile
        # the script reads the context through MindSpore's API, which reports the search mode
        # the user set ("smsg", issue #18); that MindSpore ran sharding propagation underneath
        # shows in the collectives above (no gather)
        assert "parallel_mode semi_auto_parallel" in got["shard"]
        assert "parallel_mode auto_parallel search_mode smsg" in got["propagate"]
