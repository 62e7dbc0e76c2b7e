"""What a user of a fresh clone reads (README.md, docs/, scripts/) cites only files the clone
holds: scripts/install_model_packages.sh cited ``shared/docs/mindspore-notes.md``, a note of the
developers' workspace that is not in the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: a path inside the repository (or the workspace's ``shared/``) naming a file by its suffix
CITED = re.compile(r"(?<![\w/.-])((?:shared|docs|scripts|smsg_ms|tests|benchmarks|strategies)/"
                   r"[\w./-]*\w\.(?:md|py|sh|yaml|yml|csv|json))")
READ = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("scripts/*.sh"),
               *ROOT.glob("scripts/*.py")])


@pytest.mark.parametrize("path", READ, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_files_are_in_the_clone(path):
    cited = set(CITED.findall(path.read_text(encoding="utf-8")))
    missing = sorted(c for c in cited if not (ROOT / c).is_file())
    assert not missing, f"{path.relative_to(ROOT)} cites files the clone lacks: {missing}"


def test_the_pattern_finds_a_workspace_note():
    """The check can fail: the old comment of the install script is caught."""
    assert CITED.findall("(shared/docs/mindspore-notes.md, \"Networks written by others\")") == [
        "shared/docs/mindspore-notes.md"]
