"""Misleading messages replaced by the true cause (issue #14 item 4): each bad request gets one
line that says what is wrong and what to do, and writes no plan file."""
from __future__ import annotations

import pytest

from test_cli import one_line_error, smsg

TIED = "smsg_ms.networks.tied:build"


@pytest.mark.parametrize("args,fragments", [
    # was "no plan fits in 64.0 GiB per device" for a 1 MiB network
    (["plan", "mlp", "--pipeline", "2"], ["no repeated blocks"]),
    (["plan", "llama", "--layers", "2", "--pipeline", "4"],
     ["4 pipeline stages need at least 4 repeated blocks", "has 2"]),
    # was "give --batch", then "takes no option batch"
    (["plan", TIED, "--pipeline", "2"], ["needs a network with a 'batch' option"]),
    # one stage does not fit: the way out is named (pipeline stages where there are blocks)
    (["plan", "llama", "--layers", "2", "--memory", "0.01"],
     ["no plan fits", "2 repeated blocks", "--pipeline auto"]),
    (["plan", "mlp", "--memory", "0.0001"], ["no plan fits", "larger --memory"]),
    (["plan", "mlp", "--time-limit", "0"], ["positive number of seconds"]),
    (["plan", "mlp", "--time-limit", "nan"], ["positive number of seconds"]),
])
def test_bad_request_names_the_cause(tmp_path, args, fragments):
    proc = smsg(args + ["--out", "p.plan.json"], tmp_path)
    one_line_error(proc, *fragments)
    assert not (tmp_path / "p.plan.json").exists()


def test_changed_input_shape_is_named(tmp_path):
    """``check --network`` of a network whose input grew: both shapes named, not a fingerprint."""
    (tmp_path / "grown.py").write_text(
        "from smsg_ms.networks.mlp import build as mlp\n\n\n"
        "def build(batch: int = 8):\n    return mlp(batch=batch * 2, d_in=32, hidden=64, "
        "d_out=16)\n")
    made = smsg(["plan", "smsg_ms.networks.mlp:build", "--batch", "8", "--out", "p.plan.json"],
                tmp_path)
    assert made.returncode == 0, made.stderr
    proc = smsg(["check", "p.plan.json", "--network", "grown:build"], tmp_path)
    one_line_error(proc, "input shapes [[8, 512]] vs [[16, 32]]")


def test_plan_checked_against_another_network_names_both(tmp_path):
    made = smsg(["plan", "llama", "--layers", "2", "--out", "p.plan.json"], tmp_path)
    assert made.returncode == 0, made.stderr
    proc = smsg(["check", "p.plan.json", "--network", "mlp"], tmp_path)
    one_line_error(proc, "plan for 'llama' does not fit the network 'mlp'")


@pytest.mark.parametrize("text,fragment", [('{"decisions": [', "truncated"),
                                           ("hello, not json\n", "not JSON")])
def test_check_reads_a_bad_file_like_explain(tmp_path, text, fragment):
    (tmp_path / "bad.plan.json").write_text(text)
    one_line_error(smsg(["check", "bad.plan.json"], tmp_path), fragment)


def test_out_folder_refused_before_capture(tmp_path):
    (tmp_path / "d").mkdir()
    one_line_error(smsg(["plan", "mlp", "--out", "d"], tmp_path), "it is a folder")


def test_time_limit_in_the_default_file_name(tmp_path):
    proc = smsg(["plan", "mlp", "--time-limit", "5"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mlp-8dev-t5.plan.json").exists()


@pytest.mark.parametrize("text,fragment", [(None, "does not exist"),
                                           ('{"parallel_strategy_item": {', "truncated")])
def test_check_of_a_missing_or_truncated_strategy_file_says_so(tmp_path, text, fragment):
    """``check FILE --network --devices`` (the strategy-file form): a missing or truncated FILE
    is named as such (it read '--devices and network options are for a strategy file: a plan
    file carries its own')."""
    if text is not None:
        (tmp_path / "s.json").write_text(text)
    one_line_error(smsg(["check", "s.json", "--network", "mlp", "--devices", "8"], tmp_path),
                   fragment)
