"""The device counts MindSpore accepts (smsg_ms.devices), against MindSpore's own init()."""
from __future__ import annotations

import pytest

from smsg_ms.dryrun.runner import DryRunError, run_child
from smsg_ms.devices import DeviceCountError, check_device_count


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
    except DeviceCountError:
        ours = False
    assert ours == accepted


def test_refused_count_names_nearest_working_counts():
    with pytest.raises(DeviceCountError, match="use 8 or 16"):
        check_device_count(12)
    with pytest.raises(DeviceCountError, match="at least 1"):
        check_device_count(0)
