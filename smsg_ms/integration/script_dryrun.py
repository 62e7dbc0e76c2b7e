"""``smsg-ms dryrun SCRIPT.py [--ranks N] [-- ARGS]``: a user's training script through
MindSpore's parallel compiler on this CPU machine.

The script runs unmodified, as one rank of ``N`` simulated ranks, in the dry-run environment of
:mod:`smsg_ms.dryrun.toolchain` (fake CUDA toolchain, ``MS_SIMULATION_LEVEL=1``,
``MS_DEV_PRECOMPILE_ONLY=1``), under this module as its launcher (``python -m
smsg_ms.integration.script_dryrun RESULT SCRIPT ARGS``), which:

* makes ``device_target`` GPU whatever the script sets (the dry-run compiles for the GPU plugin;
  the parallel front end is the same on every target);
* stops the script right after MindSpore compiled its first training step (the first Cell
  compiled with ``set_train(True)``, or a ``nn.TrainOneStepCell`` without it; else the last Cell compiled when the script ends) and
  records, from that compile, the collectives MindSpore inserted
  (:func:`smsg_ms.dryrun.collectives.read_collectives`), the strategies it used and every
  parameter's per-device slice (``parameter_layout_dict``);
* on a rejected strategy, records MindSpore's error; the parent adds the reason MindSpore logged
  (:func:`smsg_ms.dryrun.runner.parallel_error`).

The result is JSON (never pickled). Memory per device is that of the parameters the step holds
(weights, optimizer state, accumulators: each parameter's slice bytes), not activations.
"""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

_ITEMSIZE = {"Float16": 2, "BFloat16": 2, "Float32": 4, "Float64": 8, "Int32": 4, "Int64": 8,
             "Int8": 1, "UInt8": 1, "Bool": 1, "Int16": 2}


class _StepCompiled(BaseException):
    """Ends the user's script after its first training-step compile (a BaseException, so a
    script's ``except Exception`` does not swallow it)."""


def _force_gpu(ms) -> None:
    original = ms.context.set_context

    def set_context(*args, **kwargs):
        if "device_target" in kwargs:
            kwargs["device_target"] = "GPU"
        return original(*args, **kwargs)

    ms.set_context = ms.context.set_context = set_context
    original(device_target="GPU")


def _record(cell, phase) -> dict:
    import numpy as np
    from mindspore.graph.api import _cell_graph_executor

    from ..dryrun.collectives import read_collectives

    layouts = getattr(cell, "parameter_layout_dict", None) or {}
    params, total = [], 0
    for p in sorted(cell.get_parameters(), key=lambda q: q.name):
        lay = layouts.get(p.name)
        shape = [int(d) for d in (lay[2] if lay else p.shape)]
        size = int(np.prod(shape)) * _ITEMSIZE.get(str(p.dtype), 4)
        total += size
        params.append({"name": p.name, "shape": [int(d) for d in p.shape],
                       "slice_shape": shape, "bytes": size})
    strategies = _cell_graph_executor._graph_executor.get_strategy(phase)
    return {"cell": type(cell).__name__, "collectives": read_collectives(cell, phase),
            "strategies": {k: v for k, v in strategies.items()}, "parameters": params,
            "parameter_bytes": total}


def child_main(argv: list[str]) -> int:
    result_path, script, *args = argv
    import mindspore as ms
    from mindspore.graph.api import _cell_graph_executor as executor

    from ..graph.capture import CAPTURE_PHASE

    _force_gpu(ms)
    original = executor.compile
    seen: dict = {}

    def compile_and_record(obj, *a, **kw):
        out = original(obj, *a, **kw)
        phase = out[0] if isinstance(out, tuple) else out
        if str(kw.get("phase", "")).startswith(CAPTURE_PHASE):
            return out     # smsg-ms capturing the network to plan it: not the script's step
        if hasattr(obj, "cells_and_names"):
            seen["last"] = (obj, phase)
            if getattr(obj, "training", False) or isinstance(obj, train_step_cells):
                seen["step"] = (obj, phase)
                raise _StepCompiled()
        return out

    # a TrainOneStepCell (and its loss-scale and mindformers subclasses) is a training step
    # even when the script never calls set_train() (MindSpore's Model does; a hand-written
    # loop often does not)
    train_step_cells = (ms.nn.TrainOneStepCell,)
    executor.compile = compile_and_record
    result: dict
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    try:
        runpy.run_path(script, run_name="__main__")
        result = ({"ok": True, "training": False, **_record(*seen["last"])} if "last" in seen
                  else {"ok": False, "error": "the script compiled no Cell"})
    except _StepCompiled:
        result = {"ok": True, "training": True, **_record(*seen["step"])}
    except SystemExit as exc:
        result = ({"ok": True, "training": False, **_record(*seen["last"])}
                  if "last" in seen and not exc.code else
                  {"ok": False, "error": f"the script exited with status {exc.code}"})
    except Exception as exc:  # MindSpore's rejection or the script's own error
        text = str(exc).strip().splitlines()
        result = {"ok": False, "error": f"{type(exc).__name__}: {text[0] if text else ''}"}
    Path(result_path).write_text(json.dumps(result))
    return 0


def dryrun_script(script: str, args: list[str], ranks: int, rank: int = 0,
                  timeout: float = 900.0) -> dict:
    """Run ``script`` with ``args`` as ``rank`` of ``ranks`` in the dry-run (see the module
    docstring).

    Returns:
        ``{"ok": True, "training", "cell", "collectives", "strategies", "parameters",
        "parameter_bytes"}`` or ``{"ok": False, "error", "reason"}`` (``reason``: MindSpore's
        logged rejection, ``None`` when it logged none).

    Raises:
        FileNotFoundError: no such script. DryRunSetupError: the toolchain cannot be built.
    """
    from ..dryrun.runner import parallel_error
    from ..dryrun.toolchain import ensure_toolchain

    if not Path(script).is_file():
        raise FileNotFoundError(f"no script {script}")
    env = ensure_toolchain().environment(ranks, rank)
    with tempfile.TemporaryDirectory(prefix="smsg-dryrun-script-") as tmp:
        result_file = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "smsg_ms.integration.script_dryrun", str(result_file),
               str(Path(script).resolve()), *args]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=os.getcwd())
        log = proc.stdout + proc.stderr
        if not result_file.exists():
            tail = " | ".join(log.strip().splitlines()[-3:])
            return {"ok": False, "error": f"the script crashed (status {proc.returncode}): "
                                          f"{tail}", "reason": parallel_error(log)}
        result = json.loads(result_file.read_text())
    if not result["ok"]:
        result["reason"] = parallel_error(log)
    return result


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
