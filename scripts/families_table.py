"""Capture, plan and check every model family of :mod:`smsg_ms.networks.families`; write
``docs/networks.md``.

Per family, each step through the CLI in a subprocess, as a user runs it: ``graph`` (capture),
``plan --devices 8`` and ``--devices 16``, ``check`` of the 8-device plan (single stage), then
``plan --devices 8 --pipeline 2 --micro-batches 2`` and its ``check`` (families with repeated
blocks; a plan without two blocks is refused by the planner and the row says so). A step that
fails records the first line of its error; the steps after a failed plan are skipped.

Outside CI (minutes per family): ``nice python scripts/families_table.py [--only NAME ...]
[--timeout S] [--out docs/networks.md]``. Results accumulate in ``--results`` (JSON, default
``families_results.json`` in the working folder) so a run can be resumed family by family.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from smsg_ms.networks.families import FAMILIES  # noqa: E402

STEPS = ("capture", "plan 8", "plan 16", "check 8", "plan 8 p2", "check 8 p2")


def _cli(args: list[str], cwd: Path, timeout: float) -> tuple[bool, str, float]:
    """Run ``smsg-ms ARGS``; ``(ok, first line of the reason or a summary, seconds)``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000")  # one line per message
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "smsg_ms.cli", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s", time.monotonic() - t0
    seconds = time.monotonic() - t0
    text = proc.stdout + proc.stderr
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if proc.returncode == 0:
        verdict = [ln for ln in lines if ln.startswith("check:")]
        return True, verdict[-1] if verdict else "ok", seconds
    errors = [ln for ln in lines if ln.startswith("smsg-ms: error:") or ln.startswith("check:")]
    reason = errors[-1] if errors else (lines[-1] if lines else f"exit {proc.returncode}")
    rejected = [ln for ln in lines if "MindSpore rejected" in ln]
    mismatched = [" ".join(c.strip() for c in ln.split("│")[1:-1] if c.strip())
                  for ln in lines if "MISMATCH" in ln]
    if rejected:  # the first rank's reason, then the summary
        reason = f"{rejected[0]} — {reason}"
    elif mismatched:
        reason = f"{reason}: {'; '.join(mismatched[:3])}"
    return False, reason.removeprefix("smsg-ms: error: "), seconds


def run_family(spec: str, timeout: float) -> dict:
    """``{step: {"ok", "note", "seconds"}}`` of one family (skipped steps absent)."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="smsg-family-") as tmp:
        work = Path(tmp)

        def step(name, args):
            ok, note, sec = _cli(args, work, timeout)
            out[name] = {"ok": ok, "note": note, "seconds": round(sec, 1)}
            print(f"  {name}: {'ok' if ok else 'FAILED'} ({sec:.0f} s) {note}", flush=True)
            return ok

        if not step("capture", ["graph", spec]):
            return out
        if step("plan 8", ["plan", spec, "--devices", "8", "--out", "p8.json"]):
            step("check 8", ["check", "p8.json"])
        step("plan 16", ["plan", spec, "--devices", "16", "--out", "p16.json"])
        if step("plan 8 p2", ["plan", spec, "--devices", "8", "--pipeline", "2",
                              "--micro-batches", "2", "--out", "pp.json"]):
            step("check 8 p2", ["check", "pp.json"])
    return out


def _cell(result: dict, step: str) -> str:
    if step not in result:
        return "–"
    r = result[step]
    return "ok" if r["ok"] else "fails"


#: everything from this line on in the existing file is kept (hand-written notes)
NOTES_MARK = "<!-- notes: kept by scripts/families_table.py -->"


def write_markdown(results: dict, path: Path) -> None:
    """The table, then the first line of the reason of every failed step, then the notes
    already in ``path`` below :data:`NOTES_MARK`. A family without results here keeps its
    row and reasons from ``path`` (a run of ``--only`` on a machine without the saved
    results)."""
    old = path.read_text() if path.exists() else ""
    notes = old[old.index(NOTES_MARK):] if NOTES_MARK in old else NOTES_MARK + "\n"
    lines = [
        "# Model families: capture, plan, check",
        "",
        "Written by `scripts/families_table.py` (mindformers 1.9.0, mindcv 0.3.0, MindSpore 2.10, "
        "CPU dry-run); each family is the `module:function` spec in "
        "`smsg_ms/networks/families.py` at reduced size (LLMs: 2 layers, hidden 256, 4 heads, "
        "2 KV heads, FFN 512, vocabulary 1024, sequence 64, batch 4, parallel_core models 16 "
        "(their data-parallel size is the device count); vision models: batch 8, "
        "10 classes, 64 px, ViT and Swin 224 px). `plan 8 p2`: 8 devices, "
        "`--pipeline 2 --micro-batches 2`; checks compile the plan with MindSpore's parallel "
        "compiler (`smsg-ms check`). `–`: not run (an earlier step failed).",
        "",
        "| family | spec | " + " | ".join(STEPS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in STEPS) + " |",
    ]
    # a family not run here (no saved results on this machine) keeps its lines of the page
    old_rows = {line.split(" | ")[0][2:]: line for line in old.splitlines()
                if line.startswith("| ") and line.split(" | ")[0][2:] in FAMILIES}
    old_reasons = [line for line in old.split(NOTES_MARK)[0].splitlines()
                   if line.startswith("- **")]
    for family, spec in FAMILIES.items():
        if family not in results:
            if family in old_rows:
                lines.append(old_rows[family])
            continue
        res = results[family]
        lines.append(f"| {family} | `{spec.split(':')[1]}` | "
                     + " | ".join(_cell(res, s) for s in STEPS) + " |")
    lines += ["", "## Reasons of the failed steps", ""]
    for family in FAMILIES:
        if family not in results:
            lines += [line for line in old_reasons if line.startswith(f"- **{family}**, ")]
            continue
        for step in STEPS:
            r = results.get(family, {}).get(step)
            if r and not r["ok"]:
                note = r["note"].replace("|", "\\|")
                lines.append(f"- **{family}**, {step}: {note}")
    path.write_text("\n".join(lines) + "\n\n" + notes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="family names (default: all)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per step")
    ap.add_argument("--results", type=Path, default=Path("families_results.json"))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "networks.md")
    ap.add_argument("--merge", type=Path, nargs="*", default=(),
                    help="other results files to merge in (no family is run)")
    args = ap.parse_args(argv)
    if args.merge:
        merged: dict = {}
        for extra in args.merge:
            merged.update(json.loads(extra.read_text()))
        write_markdown(merged, args.out)
        return 0
    unknown = sorted(set(args.only or ()) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown families {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    for family, spec in FAMILIES.items():
        if args.only is not None and family not in args.only:
            continue
        print(f"{family} ({spec})", flush=True)
        results[family] = run_family(spec, args.timeout)
        args.results.write_text(json.dumps(results, indent=1, sort_keys=True))
        write_markdown(results, args.out)
    write_markdown(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
