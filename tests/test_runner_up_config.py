"""The runner-up configuration of a single-stage plan (issue #17 item 7): the best plan whose
data-parallel degree differs from the chosen one, found by the constrained re-solve of
:mod:`smsg_ms.planner.runner_up`, equals a brute force over every assignment of the search
problem (numpy, no solver), and ``explain --runner-up`` prints it."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from smsg_ms.cli import main

FLAGS = ["mlp", "--devices", "4"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("runner_up") / "mlp4.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["plan", *FLAGS, "--out", str(path)]) == 0
    return path


def _brute_force(problem, variables, chosen_dp):
    """Every assignment of ``problem`` at once (177,147 for the MLP on 4 devices): for each
    batch cut ``d`` other than ``chosen_dp``, the cheapest assignment in which every variable
    that has an option cutting its first input's first axis ``d`` ways takes such an option;
    the cheapest of those: ``(d, total)``."""
    sizes = [len(v.keys) for v in problem.variables]
    grid = np.indices(sizes).reshape(len(sizes), -1)
    total = np.zeros(grid.shape[1])
    for vi, var in enumerate(problem.variables):
        total += var.cost[grid[vi]]
    for e in problem.edges:
        total += e.cost[grid[e.u], grid[e.v]]
    cut = []          # batch cut of each option (0: the option has no strategy)
    for var in variables:
        row = []
        for opt in var.options:
            s = opt[0].strategy
            row.append(int(s[0][0]) if s and s[0] else 0)
        cut.append(np.array(row))
    best = None
    for d in sorted({int(c) for row in cut for c in row if c} - {chosen_dp}):
        ok = np.ones(grid.shape[1], dtype=bool)
        for vi, row in enumerate(cut):
            if (row == d).any():
                ok &= row[grid[vi]] == d
        if ok.any():
            t = float(total[ok].min())
            if best is None or t < best[1]:
                best = (d, t)
    return best, float(total.min())


def test_runner_up_configuration_equals_brute_force(plan_file):
    from smsg_ms.integration.plan_io import load_plan
    from smsg_ms.planner.runner_up import plan_runner_up
    from smsg_ms.planner.stays_best import reproduce
    from smsg_ms.report.degrees import chosen_degrees

    plan = load_plan(str(plan_file))
    _, _, _, problem, variables, choice = reproduce(plan)
    chosen_dp = int(chosen_degrees(plan)["dp"])
    (dp, seconds), optimum = _brute_force(problem, variables, chosen_dp)
    # the brute force finds the plan's step as the unconstrained optimum
    assert optimum == pytest.approx(plan.totals["step_seconds"], rel=1e-9)
    got = plan_runner_up(plan, chosen_dp)
    assert got["dp"] == dp != chosen_dp
    assert got["search_seconds"] == pytest.approx(seconds, rel=1e-9)
    assert got["difference_seconds"] == pytest.approx(seconds - optimum, rel=1e-6)
    assert got["difference_seconds"] > 0
    assert got["dp"] * got["tp"] <= plan.devices


def test_explain_prints_the_runner_up_configuration(plan_file, capsys):
    from smsg_ms.report.units import fmt_seconds

    assert main(["explain", str(plan_file), "--runner-up", "--json"]) == 0
    runner = json.loads(capsys.readouterr().out)["runner_up"]
    assert set(runner) == {"dp", "tp", "search_seconds", "difference_seconds", "step_seconds"}
    assert main(["explain", str(plan_file), "--runner-up"]) == 0
    text = capsys.readouterr().out
    assert (f"runner-up configuration: dp {runner['dp']}, tp {runner['tp']}: step "
            f"{fmt_seconds(runner['step_seconds'])} "
            f"(+{fmt_seconds(runner['difference_seconds'])} vs the chosen)") in text
    # without the flag, a single-stage plan's explain is as before: no configuration line
    assert main(["explain", str(plan_file)]) == 0
    assert "runner-up configuration" not in capsys.readouterr().out
