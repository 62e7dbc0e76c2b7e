"""Real networks end to end, as a user runs them: ``smsg-ms plan`` then ``smsg-ms check`` in a
subprocess on a clean working folder; MindSpore's parallel compiler (CPU dry-run) is the oracle.

mindformers 1.9.0 LLaMA (2 layers at LLaMA-2-7B width) and mindcv ViT-B/16, 8 devices: no
strategy rejected, every compared (collective, phase, group) row equal in count and bytes.
"""
from __future__ import annotations

import re

import pytest

from test_cli import smsg

NETWORKS = {
    "mf-llama": ("mindformers", ["--layers", "2", "--batch", "8", "--seq", "2048"]),
    "vit-b16": ("mindcv", ["--batch", "64"]),
}


@pytest.fixture(scope="module", params=sorted(NETWORKS))
def checked(request, tmp_path_factory):
    """``(plan process, check process)`` of one network, planned and checked once."""
    network = request.param
    package, options = NETWORKS[network]
    pytest.importorskip(package)
    work = tmp_path_factory.mktemp(network)
    plan = smsg(["plan", network, "--devices", "8", *options, "--out", "plan.json"], work)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert sorted(p.name for p in work.iterdir()) == ["plan.json"]
    return plan, smsg(["check", "plan.json"], work)


def _rows(text: str) -> list[list[str]]:
    """Cells of the side-by-side table's data rows (first cell a collective kind)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] in ("AllGather", "AllReduce", "ReduceScatter", "AlltoAll"):
            out.append(cells)
    return out


def test_compiles_with_zero_rejections_and_zero_mismatches(checked):
    _, check = checked
    out = check.stdout + check.stderr
    assert check.returncode == 0, out[-3000:]
    assert "MindSpore rejected" not in out
    rows = _rows(check.stdout)
    compared = [r for r in rows if not r[1].endswith("(loss)")]
    assert compared, check.stdout[-3000:]
    for kind, phase, group, pred, pred_mib, ins, ins_mib, verdict in compared:
        assert verdict == "ok" and pred == ins, (kind, phase, group, pred, ins)
        assert float(pred_mib) == pytest.approx(float(ins_mib), rel=0.01, abs=1e-3)
    # MindSpore inserted collectives: the plan is not trivially empty of communication
    assert sum(int(r[5]) for r in compared) > 0
    assert check.stdout.rstrip().endswith("check: passed (0 rejected, 0 mismatches)")
