"""Entry point of the dry-run child process: ``python -m smsg_ms.dryrun.child JOB OUT``.

Reads a JSON job, does it under the CPU dry-run environment set by
:func:`smsg_ms.dryrun.runner.run_child`, writes a JSON result. The jobs (:data:`JOBS`, one
module per family under :mod:`smsg_ms.dryrun.jobs`):

* ``capture``, ``capture_train``, ``read_shard``: :mod:`smsg_ms.dryrun.jobs.capture`;
* ``compile``, ``compile_each``, ``plan_compile``, ``init``: :mod:`smsg_ms.dryrun.jobs.compile`;
* ``pipeline_compile``: :mod:`smsg_ms.dryrun.jobs.pipeline`;
* ``planner_compile``: :mod:`smsg_ms.dryrun.jobs.planners`.

Errors become ``{"ok": false, "error": one paragraph, "kind": ...}``; the full traceback is only
written to stderr.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

from .jobs.capture import job_capture, job_capture_train, job_read_shard
from .jobs.compile import job_compile, job_compile_each, job_init, job_plan_compile
from .jobs.pipeline import job_pipeline_compile
from .jobs.planners import job_planner_compile

JOBS = {"capture": job_capture, "compile": job_compile, "compile_each": job_compile_each,
        "init": job_init,
        "pipeline_compile": job_pipeline_compile, "planner_compile": job_planner_compile,
        "read_shard": job_read_shard, "capture_train": job_capture_train,
        "plan_compile": job_plan_compile}


def main(argv: list[str]) -> int:
    """Do the job of the JSON file ``argv[1]`` and write the result to ``argv[2]`` (atomically,
    so the parent never reads half a result). Returns 0: a failed job is a result too."""
    job_file, result_file = argv[1], argv[2]
    with open(job_file) as fh:
        job = json.load(fh)
    try:
        result = JOBS[job["job"]](job)
        result["ok"] = True
    except Exception as exc:  # report every failure as data; the parent raises
        traceback.print_exc()
        text = str(exc).strip()
        head = text.split("\n\n")[0].split("----")[0].strip()
        # smsg-ms's own errors are one-line messages for the user: no class name before them
        own = type(exc).__module__.startswith("smsg_ms.")
        result = {"ok": False, "error": head if own else f"{type(exc).__name__}: {head}",
                  "kind": type(exc).__name__}
    with open(result_file + ".tmp", "w") as fh:
        json.dump(result, fh)
    os.replace(result_file + ".tmp", result_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
