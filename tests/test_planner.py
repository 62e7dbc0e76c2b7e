"""Planner glue: device counts MindSpore accepts, problem construction."""
from __future__ import annotations

import pytest

from smsg_ms.dryrun.runner import DryRunError, run_child
from smsg_ms.planner import PlanningError, check_device_count


@pytest.mark.parametrize("devices", [1, 2, 4, 6, 8, 12, 24])
def test_device_count_check_agrees_with_mindspore(devices):
    """The oracle is MindSpore's own ``init()`` in the dry-run, not the planner's rule."""
    try:
        run_child({"job": "init"}, devices=devices, timeout=120)
        accepted = True
    except DryRunError:
        accepted = False
    try:
        check_device_count(devices)
        ours = True
    except PlanningError:
        ours = False
    assert ours == accepted


def test_refused_count_names_nearest_working_counts():
    with pytest.raises(PlanningError, match="nearest counts that work: 8 and 16"):
        check_device_count(12)
    with pytest.raises(PlanningError, match="positive"):
        check_device_count(0)
