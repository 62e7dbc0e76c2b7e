"""Plan files: atomic write, verified read, device counts, fit checks (no MindSpore needed)."""
from __future__ import annotations

import json
import os

import pytest

from smsg_ms.integration.plan_io import (PlanError, check_device_count, check_plan_fits,
                                         load_plan, save_plan)
from smsg_ms.plan import OpDecision, Plan


def make_plan(devices=8) -> Plan:
    return Plan(network="mlp", fingerprint="f" * 64, devices=devices, options={"batch": 64},
                input_shapes=[[64, 64]], hardware="ascend910b",
                decisions=[OpDecision("fc1.matmul", "MatMul", [[devices, 1], [1, 1]])])


def test_round_trip_is_byte_identical_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "p.json"
    save_plan(make_plan(), path)
    text = path.read_text()
    plan = load_plan(path)
    assert plan.strategies == {"fc1.matmul": [[8, 1], [1, 1]]}
    save_plan(plan, tmp_path / "q.json")
    assert (tmp_path / "q.json").read_text() == text
    assert sorted(os.listdir(tmp_path)) == ["p.json", "q.json"]


def test_truncated_file_is_refused(tmp_path):
    path = tmp_path / "p.json"
    save_plan(make_plan(), path)
    path.write_text(path.read_text()[:100])
    with pytest.raises(PlanError, match="truncated"):
        load_plan(path)


@pytest.mark.parametrize("content, message", [
    ("# smsg-ms\n\nA README {with braces}.\n", "not JSON, so not an smsg-ms plan file"),
    ("plan: {\n", "not JSON, so not an smsg-ms plan file"),
    ("  \n", "empty file"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe", "not UTF-8 text"),
])
def test_other_kinds_of_file_are_named_as_such(tmp_path, content, message):
    path = tmp_path / "p.json"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(PlanError, match=message) as info:
        load_plan(path)
    assert "truncated" not in str(info.value)


def test_json_that_ends_early_is_truncated_not_other(tmp_path):
    """A plan object cut anywhere (even inside a string) is truncated; a complete object with
    a syntax error in the middle is invalid JSON."""
    path = tmp_path / "p.json"
    save_plan(make_plan(), path)
    text = path.read_text()
    for cut in (1, 2, len(text) // 3, len(text) - 2):
        path.write_text(text[:cut])
        with pytest.raises(PlanError, match="truncated"):
            load_plan(path)
    path.write_text(text.replace(":", "", 1))
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(path)


def test_edited_file_is_refused(tmp_path):
    path = tmp_path / "p.json"
    save_plan(make_plan(), path)
    data = json.loads(path.read_text())
    data["decisions"][0]["strategy"] = [[4, 2], [2, 1]]
    path.write_text(json.dumps(data))
    with pytest.raises(PlanError, match="hash mismatch"):
        load_plan(path)


def test_other_json_is_not_a_plan(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"a": 1}')
    with pytest.raises(PlanError, match="not an smsg-ms plan"):
        load_plan(path)


@pytest.mark.parametrize("devices, message", [
    (0, "at least 1"), (-8, "at least 1"),
    # 1, 2, 4 or multiples of 8 work: the neighbours of 6 are 4 and 8, of 12 are 8 and 16
    (6, "use 4 or 8"), (3, "use 2 or 4"), (12, "use 8 or 16"), (30, "use 24 or 32"),
])
def test_device_counts_mindspore_refuses(devices, message):
    with pytest.raises(PlanError, match=message):
        check_device_count(devices)


@pytest.mark.parametrize("devices", [1, 2, 4, 8, 24, 64])
def test_device_counts_mindspore_accepts(devices):
    check_device_count(devices)


def test_read_only_folder_leaves_nothing(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(PlanError, match="cannot write"):
            save_plan(make_plan(), folder / "p.json")
        assert os.listdir(folder) == []
    finally:
        folder.chmod(0o755)


def test_fit_checks_name_the_mismatch():
    plan = make_plan().seal()
    check_plan_fits(plan, devices=8, input_shapes=[(64, 64)], fingerprint="f" * 64)
    with pytest.raises(PlanError, match="made for 8 devices, not 16"):
        check_plan_fits(plan, devices=16)
    with pytest.raises(PlanError, match="input shapes"):
        check_plan_fits(plan, input_shapes=[(32, 64)])
    with pytest.raises(PlanError, match="fingerprint"):
        check_plan_fits(plan, fingerprint="0" * 64)


def test_data_layout_follows_the_shapes_the_compile_gets():
    from smsg_ms.integration.writeback import dataset_layout

    plan = make_plan()
    plan.dataset_strategy = [[8, 1]]
    # global shapes → full_batch (MindSpore slices for the first operators)
    assert dataset_layout(plan, [(64, 64), (64, 32)]) is None
    # one rank's slice (64 / 8 = 8 rows) → the plan's layout; the label gets the batch cut
    assert dataset_layout(plan, [(8, 64), (8, 32)]) == ((8, 1), (8, 1))
    with pytest.raises(PlanError, match="neither the plan's global shapes"):
        dataset_layout(plan, [(16, 64)])
    plan.dataset_strategy = None
    assert dataset_layout(plan, [(8, 64)]) is None
