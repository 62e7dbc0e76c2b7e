"""Committed reference plans (``strategies/``) equal what the planner produces now."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("regenerate_strategies",
                                               ROOT / "scripts" / "regenerate_strategies.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

CASES = [pytest.param(stem, spec, options, package, devices, id=f"{stem}-{devices}",
                      marks=[pytest.mark.slow] if package else [])
         for stem, spec, options, package in regen.REFERENCE for devices in regen.DEVICES]


@pytest.mark.parametrize("stem, spec, options, package, devices", CASES)
def test_committed_plan_matches_the_planner(stem, spec, options, package, devices):
    if importlib.util.find_spec("smsg_ms.planner") is None:
        pytest.skip("smsg_ms.planner is not importable yet: nothing to compare against")
    if regen.missing_package(package):
        pytest.skip(f"{package} is not installed (scripts/install_model_packages.sh)")
    path = regen.plan_path(stem, devices)
    if not path.exists():
        pytest.skip(f"{path.name} is not generated yet: run scripts/regenerate_strategies.py "
                    "and commit strategies/")
    assert path.read_text() == regen.plan_text(spec, options, devices), (
        f"{path.name} differs from the planner's output: run scripts/regenerate_strategies.py "
        "and review the diff")
