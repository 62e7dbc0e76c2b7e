"""The held-out second source, OneFlow's DLPerf benchmark of NVIDIA Megatron-LM GPT on V100
nodes (benchmarks/measured/megatron_v100_dlperf.csv): it parses, every row cites the DLPerf
README and one of its test cases, and the row's configuration agrees with that case's name
(DLPerf's naming rule, reports/GPT/dlperf_gpt_test_report_210512.md "Test case Naming Rules":
``<prefix>_<dp>x<tp>x<pp>_<global batch>_<hidden>x<layers>``)."""
from __future__ import annotations

import csv
import os
import re

import pytest

from smsg_ms.compare.measured import group_rows, load_measured
from smsg_ms.cost.hardware import get_hardware

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "benchmarks", "measured", "megatron_v100_dlperf.csv")
README = "https://github.com/Oneflow-Inc/DLPerf/blob/master/Megatron-LM/README.md"
CASE = re.compile(r"case (?:[A-Z0-9]+_)+?(\d+)x(\d+)x(\d+)_(\d+)_(\d+)x(\d+)\b")


def _raw_rows():
    with open(PATH, newline="") as fh:
        return list(csv.DictReader(fh))


def test_parses_into_groups_of_the_same_work():
    rows = load_measured(PATH)
    groups = group_rows(rows)
    assert len(rows) == 9 and len(groups) == 3
    assert all(r["p2p_paired"] and not r["p2p_partitioned"] and not r["fp32_main_grads"]
               for r in rows)


@pytest.mark.parametrize("row", _raw_rows(), ids=lambda r: r["source"].split("case ")[-1][:24])
def test_every_row_cites_its_case_and_matches_it(row):
    assert row["source"].startswith(README), row["source"]
    match = CASE.search(row["source"])
    assert match, f"no DLPerf case name in {row['source']!r}"
    dp, tp, pp, gbs, hidden, layers = (int(x) for x in match.groups())
    assert (int(row["dp"]), int(row["tp"]), int(row["pp"])) == (dp, tp, pp)
    assert (int(row["global_batch"]), int(row["hidden"]), int(row["layers"])) == (
        gbs, hidden, layers)
    # the published latency (ms) is quoted in the note; the row holds it in seconds
    ms = re.search(r"ms / 1000: ([0-9.]+) ms", row["note"])
    assert ms and float(row["measured_seconds"]) == pytest.approx(float(ms.group(1)) / 1000)


def test_machine_file_holds_the_datasheet_figures():
    # V100 SXM2 datasheet: 125 TFLOPS tensor, 900 GB/s HBM2, 16 GB; one 100 Gb/s EDR link per
    # 8-GPU node: 12.5e9 / 8 bytes/s per GPU
    m = get_hardware(os.path.join(os.path.dirname(PATH), "dlperf-v100.yaml"))
    assert (m.cube_flops, m.hbm_bandwidth, m.memory) == (125e12, 900e9, 16 * 2**30)
    assert m.levels[-1].bandwidth == pytest.approx(100e9 / 8 / 8)
