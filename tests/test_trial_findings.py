"""Findings of a new user's trial of the CLI: every message says what is wrong and what to do, in
one line, before any work (capture, compile) is spent."""
from __future__ import annotations

import json

import pytest

from test_cli import one_line_error, smsg

NOT_A_NET = "def build(batch: int = 8):\n    return 3\n"

#: a strategy checkpoint of the mlp on 2 devices (``smsg-ms export``'s keys for it)
MLP_STRATEGY = {"device_num": 2, "current_stage": 0, "parallel_strategy_item": {
    "BiasAdd_fc1.bias": {"parallel_strategy": [[1, 2], [2]], "stage": 0},
    "MatMul_fc1.weight": {"parallel_strategy": [[2, 1], [1, 1]], "stage": 0}}}


def _write_json(path, data) -> str:
    path.write_text(json.dumps(data))
    return path.name


# 1. output paths are checked before any capture or compile

def test_compare_json_into_a_missing_folder_is_refused_first(tmp_path):
    proc = smsg(["compare", "mlp", "--devices", "2", "--json", "missing/r.json"], tmp_path)
    one_line_error(proc, "missing/r.json", "does not exist")
    assert proc.stdout == ""        # no table: nothing was compiled


def test_score_out_into_a_missing_folder_is_refused_first(tmp_path):
    (tmp_path / "c.csv").write_text("devices,global_batch,micro_batch,tp,dp,pp\n2,8,4,1,2,1\n")
    proc = smsg(["score", "mlp", "--configs", "c.csv", "--out", "missing/o.csv"], tmp_path)
    one_line_error(proc, "missing/o.csv", "does not exist")


# 2 and 9. no Python class name; the spec the user typed, not the function's name

@pytest.mark.parametrize("command", [["graph"], ["plan", "--out", "p.plan.json"]])
def test_network_error_names_the_spec_without_a_class_name(tmp_path, command):
    (tmp_path / "mynets.py").write_text(NOT_A_NET)
    proc = smsg([command[0], "mynets:build", *command[1:]], tmp_path)
    one_line_error(proc, "network 'mynets:build' must return (net, inputs)")
    assert "Error:" not in proc.stderr


# 3. check STRATEGY.json names only the flag that is missing

@pytest.mark.parametrize("given,missing,present", [(["--network", "mlp"], "--devices", "--network"),
                                                   (["--devices", "2"], "--network", "--devices")])
def test_strategy_check_names_only_the_missing_flag(tmp_path, given, missing, present):
    name = _write_json(tmp_path / "s.json", MLP_STRATEGY)
    proc = smsg(["check", name, *given], tmp_path)
    one_line_error(proc, f"give {missing}")
    assert present not in proc.stderr


# 4. a hardware file whose levels cannot place the devices

@pytest.mark.parametrize("counts,fragments", [
    ((3, None), ["levels[0] (node) count 3", "does not divide --devices 8"]),
    ((4, 1), ["levels[1] (cluster) count 1", "hold 4 devices, fewer than --devices 8"])])
def test_hardware_levels_that_cannot_place_the_devices(tmp_path, counts, fragments):
    from smsg_ms.cost.hardware import get_hardware

    data = get_hardware("atlas-800t-a2").to_dict()
    for level, count in zip(data["levels"], counts):
        level["count"] = count
    name = _write_json(tmp_path / "hw.json", data)
    proc = smsg(["plan", "mlp", "--devices", "8", "--hardware", name, "--out", "p.plan.json"],
                tmp_path)
    one_line_error(proc, *fragments)
    assert not (tmp_path / "p.plan.json").exists()


# 5. check of a JSON that is neither a plan file nor a strategy checkpoint

def test_check_of_another_json_says_what_it_reads(tmp_path):
    name = _write_json(tmp_path / "other.json", {"model": "llama"})
    one_line_error(smsg(["check", name], tmp_path), "neither a plan file",
                   "'smsg-ms plan'", "'smsg-ms export'")


# 6. a strategy-file field of the wrong type: refused by name, not by MindSpore's JSON reader

@pytest.mark.parametrize("edit,fragments", [
    (lambda d: d["parallel_strategy_item"]["BiasAdd_fc1.bias"].update(stage="x"),
     ["parallel_strategy_item['BiasAdd_fc1.bias'].stage", "'x'"]),
    (lambda d: d["parallel_strategy_item"]["BiasAdd_fc1.bias"].update(
        parallel_strategy=[["a", 2], [2]]),
     ["parallel_strategy_item['BiasAdd_fc1.bias'].parallel_strategy", "positive integers"]),
    (lambda d: d.update(device_num="2"), ["device_num must be an integer", "'2'"])])
def test_strategy_field_of_the_wrong_type_is_named(tmp_path, edit, fragments):
    data = json.loads(json.dumps(MLP_STRATEGY))
    edit(data)
    name = _write_json(tmp_path / "s.json", data)
    proc = smsg(["check", name, "--network", "mlp", "--devices", "2"], tmp_path)
    one_line_error(proc, *fragments)
    assert "MindSpore" not in proc.stderr


# 7. presets shown by their names, the old names as aliases

def test_plan_help_shows_preset_names_and_aliases(tmp_path):
    proc = smsg(["plan", "--help"], tmp_path)
    text = " ".join(proc.stdout.split())
    assert "atlas-800t-a2 (default)" in text and "(aliases: ascend910b, a100, h100)" in text
    assert "default ascend910b" not in text and "atlas-800t-a2 = ascend910b" not in text


def test_compare_header_and_json_show_the_preset_name(tmp_path):
    """The alias given, the preset's name shown; the JSON file written whole (no temporary
    file left next to it)."""
    proc = smsg(["compare", "mlp", "--devices", "2", "--planners", "data_parallel",
                 "--hardware", "ascend910b", "--quiet", "--json", "r.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hardware atlas-800t-a2" in proc.stdout and "ascend910b" not in proc.stdout
    assert json.loads((tmp_path / "r.json").read_text())["hardware"] == "atlas-800t-a2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# 8. a count of one takes the singular

def test_at_most_one_stage(tmp_path):
    proc = smsg(["plan", "llama", "--layers", "1", "--pipeline", "2", "--out", "p.plan.json"],
                tmp_path)
    one_line_error(proc, "use at most 1 stage (or --pipeline auto)")


def test_score_config_of_one_micro_batch(tmp_path):
    proc = smsg(["score", "mlp", "--devices", "2", "--config",
                 "dp=2,tp=1,pp=1,micro_batch=4,global_batch=8"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 micro-batch on 2 devices per stage" in proc.stdout, proc.stdout


# 10. in a pipe, text wraps between words, never inside a name

def test_plan_hash_whole_in_a_narrow_pipe(tmp_path):
    proc = smsg(["plan", "mlp", "--devices", "2", "--out", "p.plan.json"], tmp_path, columns=50)
    assert proc.returncode == 0, proc.stderr[-2000:]
    digest = json.loads((tmp_path / "p.plan.json").read_text())["content_hash"]
    assert digest in proc.stdout.split(), proc.stdout


@pytest.mark.parametrize("command", ["plan", "compare", "score", "check"])
def test_help_wraps_between_words(tmp_path, command):
    """Every word of the help at 200 columns is whole at 60 (argparse cut the file pattern of
    ``plan --out`` at a hyphen: ``[-`` / ``mem<GiB>]``)."""
    wide, narrow = (smsg([command, "--help"], tmp_path, columns=c).stdout for c in (200, 60))
    assert set(wide.split()) - set(narrow.split()) == set(), narrow
