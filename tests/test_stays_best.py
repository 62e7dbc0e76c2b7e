"""Where a plan stays the best of its candidates (#16 item 6): the factor range of the bandwidth
and the latency, checked by hand on the interval arithmetic and, on a real captured network, by
pricing the problem afresh at factors just inside and just outside each end."""
from __future__ import annotations

import math

import pytest

from smsg_ms.planner.stays_best import PARAMETERS, factor_range, scale_flat, stays_best


def test_factor_range_by_hand():
    s_bw = PARAMETERS["bandwidth"]          # s = 1/f
    # Δ0 = -1 + 2/f >= 0  <=>  f <= 2;  Δ1 = 3 - 1/f >= 0  <=>  f >= 1/3;  Δ2 = 5 + 1/f: always
    low, high, low_by, high_by = factor_range([(-1.0, 2.0), (3.0, -1.0), (5.0, 1.0)], s_bw)
    assert (low, high, low_by, high_by) == (pytest.approx(1 / 3), pytest.approx(2.0), 1, 0)
    s_lat = PARAMETERS["latency"]           # s = f
    # Δ0 = 1 - 0.5 f >= 0 <=> f <= 2; Δ1 = -0.2 + 0.4 f >= 0 <=> f >= 0.5; Δ2 = 0.3 - 0.1 f: f <= 3
    low, high, low_by, high_by = factor_range([(1.0, -0.5), (-0.2, 0.4), (0.3, -0.1)], s_lat)
    assert (low, high, low_by, high_by) == (pytest.approx(0.5), pytest.approx(2.0), 1, 0)
    # nothing depends on f: the whole half-line, no candidate takes over
    assert factor_range([(1.0, 0.0)], s_lat) == (0.0, math.inf, None, None)


def test_scale_scales_one_level_or_every_level():
    from smsg_ms.cost.hardware import get_hardware

    hw = get_hardware("a100")            # dgx-a100: NVLink inside a node, InfiniBand across
    every = scale_flat(hw, "bandwidth", None, 2.0)
    assert [lv.bandwidth for lv in every.levels] == [2 * lv.bandwidth for lv in hw.levels]
    inner = scale_flat(hw, "latency", 0, 3.0)
    assert inner.levels[0].latency == 3 * hw.levels[0].latency
    assert inner.levels[1:] == hw.levels[1:]
    with pytest.raises(ValueError, match="no level"):
        scale_flat(hw, "bandwidth", len(hw.levels), 2.0)


@pytest.fixture(scope="module")
def gpt_case(captured):
    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import build_problem
    from smsg_ms.search import solve

    graph = captured("gpt", batch=8, layers=1, hidden=256, heads=4, seq=128, vocab=1024)
    hw = get_hardware("a100")

    def build(hardware):
        return build_problem(graph, CostModel(graph, 64, hardware))

    problem, _ = build(hw)
    choice = list(solve(problem, progress=False).choice)
    return graph, hw, build, choice, stays_best(graph, 64, hw, choice, build=build)


def _deviations(problem, choice):
    """Every single-variable deviation of ``choice`` (variable, option, full assignment)."""
    for vi, var in enumerate(problem.variables):
        for o in range(len(var.keys)):
            if o != choice[vi]:
                yield vi, o, choice[:vi] + [o] + choice[vi + 1:]


def _cheaper_deviations(build, hardware, choice):
    problem, _ = build(hardware)
    base = problem.total(choice)
    return [(problem.variables[vi].name, o) for vi, o, dev in _deviations(problem, choice)
            if problem.total(dev) < base * (1 - 1e-9)]


def test_ranges_hold_when_priced_afresh(gpt_case):
    graph, hw, build, choice, ranges = gpt_case
    assert [(r["parameter"], r["level"]) for r in ranges] == [("bandwidth", None),
                                                              ("latency", None)]
    for r in ranges:
        assert r["low"] <= 1.0 <= r["high"], r
        inside = [f for f in (r["low"] * 1.02, 1.0, min(r["high"] * 0.98, 1e6)) if f > 0]
        for f in inside:       # the plan stays the cheapest of its deviations
            assert not _cheaper_deviations(build, scale_flat(hw, r["parameter"], None, f),
                                           choice), (r, f)
        for end, side, f in (("high", "above", r["high"] * 1.02), ("low", "below",
                                                                   r["low"] * 0.98)):
            if r[side] is None:
                assert r[end] in (0.0, math.inf)
                continue
            # just beyond the end the named deviation is cheaper, priced afresh
            cheaper = _cheaper_deviations(build, scale_flat(hw, r["parameter"], None, f), choice)
            assert r[side]["variable"] in {name for name, _ in cheaper}, (r, f, cheaper)


def test_some_end_is_finite(gpt_case):
    # 64 devices over 8 nodes: the attention's batch cut needs gradient sync across nodes, the
    # head cut collectives; scaling the bandwidth far enough must make another strategy better
    # (at 8 devices, one node, the plan stays best at every factor: its sync is hidden)
    _, _, _, _, ranges = gpt_case
    bw = ranges[0]
    assert bw["high"] < math.inf or bw["low"] > 0.0, bw


GPT_FLAGS = ["gpt", "--devices", "64", "--batch", "8", "--layers", "1", "--hidden", "256",
             "--heads", "4", "--seq", "128", "--vocab", "1024", "--hardware", "a100"]


@pytest.fixture(scope="module")
def through_the_cli(tmp_path_factory):
    """``through_the_cli(*plan_flags)``: ``smsg-ms plan`` of the gpt_case network with the
    flags, then ``explain --stays-best --json`` of the plan file, in this process: (the plan
    read back, the JSON's ``stays_best`` rows); once per set of flags."""
    import contextlib
    import io
    import json

    from smsg_ms.cli import main
    from smsg_ms.integration.plan_io import load_plan

    folder, done = tmp_path_factory.mktemp("stays_best"), {}

    def run(*flags):
        if flags not in done:
            plan = folder / f"p{len(done)}.json"
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["plan", *GPT_FLAGS, *flags, "--out", str(plan)]) == 0
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(["explain", str(plan), "--stays-best", "--json"]) == 0
            done[flags] = (load_plan(str(plan)), json.loads(out.getvalue())["stays_best"])
        return done[flags]
    return run


def test_explain_stays_best_through_the_cli(through_the_cli):
    # the plan file's network is captured again and its plan reproduced: the ranges printed are
    # those of the plan's own choice, each containing the preset (factor 1)
    _, ranges = through_the_cli()
    # every level together, then each level of dgx-a100 (node, cluster) alone
    assert [(r["parameter"], r["level_name"]) for r in ranges] == [
        (p, lv) for p in ("bandwidth", "latency") for lv in ("every level", "node", "cluster")]
    for r in ranges:        # null: no upper end
        assert r["low"] <= 1.0 <= (math.inf if r["high"] is None else r["high"])
    # the same network and preset as gpt_case: a deviation overtakes below some bandwidth
    assert ranges[0]["low"] > 0.0 and ranges[0]["below"] is not None


def test_explain_stays_best_of_a_one_stage_pipeline_auto_plan(through_the_cli):
    """``--pipeline auto`` on a one-layer network can only choose one stage (one block to
    split), and with the whole batch fitting, one micro-batch of 8: its stage plan is the
    single-stage problem (64 devices, batch 8), so when its strategies are the single-stage
    plan's, the ranges must be the single-stage plan's too (explain refused the plan before:
    "computed for single-stage plans only")."""
    single, single_ranges = through_the_cli()
    piped, ranges = through_the_cli("--pipeline", "auto")
    rec = piped.pipeline
    assert (rec["stages"], rec["micro_batches"], piped.options["batch"]) == (1, 1, 8)
    assert piped.devices == 64 and piped.strategies == single.strategies
    assert ranges == single_ranges


def test_deviations_carry_their_out_strategy_apart():
    """The reference 64-device ``mlp`` plan (strategies/): below some bandwidth its
    ``fc3.matmul`` turns to another option with an out_strategy. Each deviation gives its
    in_strategy (one cut tuple per MatMul input, integers only) and its out_strategy apart,
    with the variable's chosen ones: the chosen fc3.matmul is the plan file's."""
    from pathlib import Path

    from smsg_ms.integration.plan_io import load_plan
    from smsg_ms.planner.stays_best import plan_stays_best

    plan = load_plan(Path(__file__).resolve().parents[1] / "strategies" / "mlp-64dev.plan.json")
    whos = [w for r in plan_stays_best(plan) for w in (r["below"], r["above"]) if w]
    assert any(w["out_strategy"] for w in whos), whos
    for w in whos:
        assert len(w["strategy"]) == 2 and all(isinstance(c, int) for s in w["strategy"]
                                               for c in s), w
        assert w["out_strategy"] is None or all(isinstance(c, int) for s in w["out_strategy"]
                                                for c in s), w
        assert w["chosen_strategy"] == plan.strategies[w["variable"]]
        assert w["chosen_out_strategy"] == plan.out_strategies.get(w["variable"])
