"""Run one job in a dry-run child process and turn its failure into one clear error.

The parent writes the job as JSON, starts ``python -m smsg_ms.dryrun.child JOB OUT`` in the
environment of :meth:`~smsg_ms.dryrun.toolchain.DryRunToolchain.environment`, and reads the JSON
result back: nothing is pickled, and a crash of MindSpore's C++ cannot take the caller with it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .toolchain import ensure_toolchain

#: The module the child process runs (``python -m``).
CHILD_MODULE = "smsg_ms.dryrun.child"


def in_dryrun() -> bool:
    """True inside a process started by :func:`run_child` (the dry-run environment is set)."""
    return os.environ.get("SMSG_MS_DRYRUN") == "1"


class DryRunError(RuntimeError):
    """A compile in the dry-run child failed; ``.kind`` is a short code, the message MindSpore's."""

    def __init__(self, message: str, kind: str = "compile", log: str = ""):
        super().__init__(message)
        self.kind = kind
        self.log = log


def run_child(job: dict, devices: int, rank: int = 0, timeout: float = 900.0) -> dict:
    """Run :data:`CHILD_MODULE` with ``job`` (JSON) in the dry-run environment.

    The child reads the job from a JSON file, writes a JSON result file and exits; nothing is
    pickled. The result is ``{"ok": True, ...}`` or ``{"ok": False, "error": ..., "kind": ...}``.

    Raises:
        DryRunSetupError: the toolchain cannot be built.
        DryRunError: the child failed (the message is the child's error, not a bare traceback).
    """
    chain = ensure_toolchain()
    env = chain.environment(devices, rank)
    with tempfile.TemporaryDirectory(prefix="smsg-dryrun-") as tmp:
        job_file, result_file = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_file.write_text(json.dumps(job))
        env["MS_DEV_SAVE_GRAPHS_PATH"] = str(Path(tmp) / "graphs")
        cmd = [sys.executable, "-m", CHILD_MODULE, str(job_file), str(result_file)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                                  cwd=tmp)
        except subprocess.TimeoutExpired as exc:
            raise DryRunError(f"dry-run compile timed out after {timeout:.0f} s", "timeout") from exc
        log = proc.stdout + proc.stderr
        if not result_file.exists():
            tail = "\n".join(line for line in log.splitlines()[-15:])
            raise DryRunError(f"dry-run child exited with status {proc.returncode} before writing "
                              f"a result:\n{tail}", "crash", log)
        result = json.loads(result_file.read_text())
    if not result.get("ok"):
        message = result.get("error", "unknown error")
        reason = parallel_error(log)
        if reason and reason not in message:
            advice = [why for what, why in PARALLEL_ADVICE.items() if what in reason]
            message = f"{message} (MindSpore: {reason}{''.join('; ' + a for a in advice)})"
        raise DryRunError(message, result.get("kind", "compile"), log)
    return result


#: a rejection of MindSpore's parallel front end (its ``[ERROR] PARALLEL`` reason) → what it
#: means and what to write instead, where the reason alone does not say
PARALLEL_ADVICE = {
    "all three input shapes are equal":
        "SelectInfo::CheckStrategy (select_info.cc) takes ops.where's condition and both values "
        "of one shape, whatever the strategy: write ops.masked_fill(x, ~condition, value), "
        "whose mask may broadcast, or ops.broadcast_to the condition and the other value to "
        "x's shape",
}

_PARALLEL_ERROR = re.compile(r"\[ERROR\] PARALLEL\([^)]*\):[^\]]*\] (?:\w+\] )?(.*)$")


def parallel_error(log: str) -> str | None:
    """The first reason MindSpore's parallel front end logged for rejecting a strategy, e.g.
    ``MatMulInfo11: Invalid strategy for mat_a [4, 1] and mat_b [1, 3] ...`` (its ``[ERROR]
    PARALLEL`` log lines; the exception itself only says "operator MatMul init failed")."""
    for line in log.splitlines():
        match = _PARALLEL_ERROR.search(line)
        if match:
            return match.group(1).strip()
    return None
