"""``scripts/families_table.py`` rewrites ``docs/networks.md``: a run of some families on a
machine without the saved results keeps every other family's row and reasons as they were,
and the hand-written notes below the mark."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("families_table",
                                                  ROOT / "scripts" / "families_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_families_not_run_keep_their_lines(tmp_path):
    table = _script()
    page = tmp_path / "networks.md"
    page.write_text((ROOT / "docs" / "networks.md").read_text())
    table.write_markdown({}, page)
    assert page.read_text() == (ROOT / "docs" / "networks.md").read_text()
    family = next(iter(table.FAMILIES))
    ok = {"ok": True, "note": ""}
    bad = {"ok": False, "note": "RuntimeError: it broke"}
    result = {step: ok for step in table.STEPS}
    result[table.STEPS[-1]] = bad
    table.write_markdown({family: result}, page)
    new, old = page.read_text().splitlines(), (ROOT / "docs" / "networks.md").read_text()
    row = next(line for line in new if line.startswith(f"| {family} | "))
    assert row.endswith("| fails |")
    assert f"- **{family}**, {table.STEPS[-1]}: RuntimeError: it broke" in new
    others = [line for line in old.splitlines()
              if line.startswith("| ") and not line.startswith(f"| {family} | ")
              and line.split(" | ")[0][2:] in table.FAMILIES]
    assert others and all(line in new for line in others)
    assert page.read_text().split(table.NOTES_MARK)[1] == old.split(table.NOTES_MARK)[1]
