"""``smsg-ms score --configs FILE.csv`` refuses a file it would misread, in one line naming the
problem (the column, or the line) and what to do, with exit 2, before any row is priced: an
misspelt or repeated column (a misspelt optional column was silently ignored), a row with more or
fewer cells than the header (an extra cell was silently dropped), text that is not UTF-8 (a raw
decode error)."""
from __future__ import annotations

import csv

import pytest

from test_cli import one_line_error, smsg

HEADER = "devices,global_batch,micro_batch,tp,dp,pp"
COLUMNS = "columns: devices, global_batch, micro_batch, tp, dp, pp, optional recompute"


@pytest.mark.parametrize("text, fragments", [
    (f"{HEADER},recompte\n2,8,4,1,2,1,true\n",
     ["unknown column 'recompte' (did you mean 'recompute'?)", COLUMNS]),
    (f"{HEADER},tp\n2,8,4,1,2,1,1\n", ["c.csv: column 'tp' is given twice"]),
    # the header is line 1: the second row has a cell too many, the first one too few
    (f"{HEADER}\n2,8,4,1,2,1\n2,8,4,1,2,1,9\n",
     ["c.csv, line 3: 7 cells for the header's 6 columns", "one cell per column"]),
    (f"{HEADER}\n2,8,4,1,2\n", ["c.csv, line 2: 5 cells for the header's 6 columns"]),
    ("devices,tp\n2,1\n", ["c.csv: configuration CSV lacks the column(s) global_batch, "
                           "micro_batch, dp, pp"]),
])
@pytest.mark.parametrize("out", [[], ["--out", "o.csv"]])
def test_a_csv_it_would_misread_exits_2(tmp_path, text, fragments, out):
    (tmp_path / "c.csv").write_text(text)
    proc = smsg(["score", "mlp", "--configs", "c.csv", *out], tmp_path)
    one_line_error(proc, *fragments)
    assert proc.returncode == 2 and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv"]      # no output, no temporary


def test_a_binary_file_is_one_line(tmp_path):
    # the start of a PNG, then of an xlsx (zip): bytes no UTF-8 text holds (0x89)
    (tmp_path / "c.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00PK\x03\x04\xff\xfe")
    proc = smsg(["score", "mlp", "--configs", "c.csv"], tmp_path)
    one_line_error(proc, "c.csv: not UTF-8 text", "export it as CSV UTF-8")
    assert proc.returncode == 2 and "codec" not in proc.stderr


def test_accepted_columns_are_scored_and_a_scored_file_scores_again(tmp_path):
    """``name`` and the optional columns are read; the scored CSV (``step_seconds`` and
    ``error`` added) is itself a valid input, giving the same scores."""
    (tmp_path / "c.csv").write_text(f"name,{HEADER},recompute,layers\nsmall,2,8,4,1,2,1,,\n")
    first = smsg(["score", "mlp", "--configs", "c.csv", "--out", "o.csv"], tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    again = smsg(["score", "mlp", "--configs", "o.csv"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "o.csv").open()))
    assert [r["name"] for r in rows] == ["small"] and rows[0]["error"] == ""
    assert float(rows[0]["step_seconds"]) > 0
    assert list(csv.DictReader(again.stdout.splitlines())) == rows


def test_an_unknown_column_unlike_any_known_one_is_copied_through_with_a_note(tmp_path):
    """A measured time or a label beside the configuration is the user's: copied to the
    output as it is, and one note on stderr names it (so a misspelling no rule catches is
    seen)."""
    (tmp_path / "c.csv").write_text(f"{HEADER},measured_seconds\n2,8,4,1,2,1,0.5\n")
    proc = smsg(["score", "mlp", "--configs", "c.csv"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "columns copied through, not read: measured_seconds" in proc.stderr
    (row,) = list(csv.DictReader(proc.stdout.splitlines()))
    assert row["measured_seconds"] == "0.5" and float(row["step_seconds"]) > 0
