"""The published measured-data table (benchmarks/measured/) is well-formed, and the ranking
figures of scripts/bench_measured.py (Kendall tau, top-1 regret) match hand computations."""
from __future__ import annotations

import csv
import glob
import math
import os

import pytest

from smsg_ms.compare.measured import (MEASURED_COLUMNS, MeasuredDataError, kendall_tau,
                                      load_measured, pair_weighted_tau, top1_regret)
from smsg_ms.cost.hardware import ALIASES, PRESETS, get_hardware

#: the names a row may give: presets and their aliases (a100 = dgx-a100)
NAMES = set(PRESETS) | set(ALIASES)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "measured", "*.csv")))


def test_there_is_measured_data():
    assert FILES, "benchmarks/measured/ holds no CSV"


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_measured_rows_are_well_formed(path):
    # checked with the csv module directly, not through load_measured
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    groups: dict[str, list[dict]] = {}
    for row in rows:
        assert set(MEASURED_COLUMNS) <= set(row)
        assert row["source"].strip(), row
        # a preset, or a machine description file beside the CSV that loads
        assert row["hardware"] in NAMES or get_hardware(
            os.path.join(os.path.dirname(path), row["hardware"])), row["hardware"]
        for key in ("layers", "hidden", "heads", "seq", "vocab", "devices", "global_batch",
                    "micro_batch", "tp", "dp", "pp"):
            assert int(row[key]) > 0, (key, row)
        assert float(row["measured_seconds"]) > 0
        assert int(row["dp"]) * int(row["tp"]) * int(row["pp"]) == int(row["devices"]), row
        assert int(row["global_batch"]) % (int(row["dp"]) * int(row["micro_batch"])) == 0, row
        assert int(row["layers"]) % int(row["pp"]) == 0, row     # equal layers per stage
        groups.setdefault(row["group"], []).append(row)
    for name, members in groups.items():
        assert len(members) >= 2, name
        for key in ("hardware", "layers", "hidden", "heads", "seq", "vocab", "devices",
                    "global_batch"):
            assert len({m[key] for m in members}) == 1, (name, key)
        configs = [(m["dp"], m["tp"], m["pp"], m["micro_batch"], m["recompute"]) for m in members]
        assert len(set(configs)) == len(configs), f"{name} lists a configuration twice"
    # and the loader accepts it
    assert len(load_measured(path, presets=NAMES)) == len(rows)


def test_kendall_tau_by_hand():
    # predicted 1<2<3<4; measured 10, 30, 20, 40. Pairs (i<j): (0,1) C, (0,2) C, (0,3) C,
    # (1,2) D (30 > 20), (1,3) C, (2,3) C: 5 concordant, 1 discordant, no ties -> 4/6
    assert kendall_tau([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(4 / 6)
    # predicted 3, 1, 2 against measured 100, 110, 105: every pair discordant -> -1
    assert kendall_tau([3, 1, 2], [100, 110, 105]) == pytest.approx(-1.0)
    assert math.isnan(kendall_tau([1.0], [2.0]))
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1, 2, 3])


def test_top1_regret_by_hand():
    # predicted best is row 0, also the measured best: no regret
    assert top1_regret([1, 2, 3, 4], [10, 30, 20, 40]) == 0.0
    # predicted best is row 1 (measured 110) against the best measured 100: 10 %
    assert top1_regret([3, 1, 2], [100, 110, 105]) == pytest.approx(0.10)
    # rows 0 and 1 tie as predicted best: the slower measured of them (6) is charged: 6/5 - 1
    assert top1_regret([1, 1, 2], [5, 6, 7]) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        top1_regret([], [])


def test_pair_weighted_tau_by_hand():
    # a 2-row group (1 pair) at tau 1 and a 3-row group (3 pairs) at tau -1/3:
    # (1·1 + 3·(-1/3)) / 4 = 0; a NaN tau is skipped
    assert pair_weighted_tau([(1.0, 2), (-1 / 3, 3), (float("nan"), 5)]) == pytest.approx(0.0)


def _write(tmp_path, rows):
    path = tmp_path / "m.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(MEASURED_COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def _row(**over):
    row = dict(group="g", hardware="a100", source="paper, Table 1", layers=4, hidden=64, heads=4,
               seq=32, vocab=128, dtype="bf16", devices=8, global_batch=16, micro_batch=1, tp=2,
               dp=4, pp=1, recompute="false", optimizer_shard="false", measured_seconds=1.5,
               approximate="false", note="")
    row.update(over)
    return row


@pytest.mark.parametrize("rows, message", [
    ([_row()], "needs two or more"),
    ([_row(), _row(tp=4, dp=4, micro_batch=2)], "dp·tp·pp = 16 is not devices 8"),
    ([_row(source=" "), _row(micro_batch=2)], "source is empty"),
    ([_row(), _row(micro_batch=2, measured_seconds=0)], "measured_seconds must be a positive"),
    ([_row(), _row(micro_batch=2, hardware="tpu")], "is not a preset"),
    ([_row(), _row(micro_batch=2, hardware="absent.yaml")], "cannot read it"),
    ([_row(), _row(micro_batch=2, global_batch=32)], "mixes global_batch"),
])
def test_bad_measured_data_is_refused(tmp_path, rows, message):
    with pytest.raises(MeasuredDataError, match=message):
        load_measured(_write(tmp_path, rows), presets=NAMES)
