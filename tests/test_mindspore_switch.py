"""``import smsg_ms`` lets MindSpore's own API choose search mode smsg, and changes nothing else.

Each case runs in a fresh interpreter (the patch is made when MindSpore is imported); the
oracle for "nothing else" is the same script without ``import smsg_ms``. The compiles through
MindSpore's own API are in ``test_integration.py`` (msrun and dry-run ranks).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PASS_THROUGH = '''
import json, sys
if sys.argv[1] == "smsg":
    import smsg_ms  # noqa: F401
import mindspore as ms
from mindspore import context
from mindspore.parallel.auto_parallel import AutoParallel
KEYS = ("parallel_mode", "search_mode", "auto_parallel_search_mode", "device_num", "full_batch",
        "gradients_mean", "pipeline_stages", "dataset_strategy", "strategy_ckpt_config")
out = []
def state():
    return {k: str(ms.get_auto_parallel_context(k)) for k in KEYS}
calls = [dict(parallel_mode="auto_parallel", search_mode=m, device_num=8) for m in
         ("recursive_programming", "dynamic_programming", "sharding_propagation")]
calls += [dict(parallel_mode="auto_parallel", auto_parallel_search_mode="dynamic_programming"),
          dict(parallel_mode="data_parallel", gradients_mean=True),
          dict(parallel_mode="semi_auto_parallel", full_batch=True, pipeline_stages=2),
          dict(strategy_ckpt_config={"save_file": "x.json"}),
          dict(search_mode="no_such_mode"), dict(parallel_mode="nonsense"), dict(no_such_key=1)]
for setter in (ms.set_auto_parallel_context, context.set_auto_parallel_context):
    for kwargs in calls:
        try:
            setter(**kwargs)
            out.append(state())
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    context.reset_auto_parallel_context()
    out.append(state())
for mode in ("bogus", "smsg"):
    try:
        built = AutoParallel(None, parallel_mode=mode)
        out.append(f"built {type(built).__module__}")
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
'''

SMSG = '''
import mindspore as ms
from mindspore import set_auto_parallel_context, get_auto_parallel_context
import smsg_ms  # after MindSpore and after the user's own `from mindspore import ...`
from mindspore import context
from smsg_ms.integration.context import smsg_settings
assert (set_auto_parallel_context is ms.set_auto_parallel_context
        is context.set_auto_parallel_context)
set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="smsg", device_num=8)
print(get_auto_parallel_context("search_mode"), ms.get_auto_parallel_context("parallel_mode"),
      smsg_settings().devices)
ms.reset_auto_parallel_context()
print(context.get_auto_parallel_context("search_mode"), smsg_settings())
context.set_auto_parallel_context(parallel_mode="auto_parallel",
                                  auto_parallel_search_mode="smsg", device_num=4,
                                  smsg_hardware="h100")
print(context.get_auto_parallel_context("auto_parallel_search_mode"), smsg_settings().hardware)
ms.set_auto_parallel_context(search_mode="sharding_propagation")
print(ms.get_auto_parallel_context("search_mode"), smsg_settings())
ms.set_auto_parallel_context(search_mode="smsg", device_num=6)
'''


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_import_smsg_ms_changes_nothing_else_in_mindspores_context():
    """Every other mode, key, error and MindSpore's AutoParallel modes behave as without it."""
    plain, smsg = run(PASS_THROUGH, "plain"), run(PASS_THROUGH, "smsg")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert smsg.returncode == 0, smsg.stderr[-2000:]
    without, with_smsg = json.loads(plain.stdout), json.loads(smsg.stdout)
    assert with_smsg[:-1] == without[:-1]
    # the sequence did reach MindSpore: its values and its own errors are there
    assert without[1]["search_mode"] == "dynamic_programming"
    assert without[6]["strategy_ckpt_config"].startswith("{'load_file': '', 'save_file': 'x.json'")
    assert "no_such_mode" in without[7] and "no_such_key" in without[9]
    # the one difference: MindSpore's AutoParallel now takes "smsg" and builds smsg-ms's
    # subclass (the compile through it is in test_integration.py)
    assert "must be one of" in without[-1] and "'semi_auto'" in without[-1]
    assert with_smsg[-1] == "built smsg_ms.integration.context"


def test_mindspores_own_functions_take_search_mode_smsg():
    proc = run(SMSG)
    lines = proc.stdout.splitlines()
    assert lines == ["smsg semi_auto_parallel 8", "recursive_programming None", "smsg h100",
                     "sharding_propagation None"], proc.stderr[-2000:]
    # smsg_ms.set_auto_parallel_context's refusal, through MindSpore's function
    assert proc.returncode != 0 and "use 4 or 8" in proc.stderr.splitlines()[-1]


def test_import_smsg_ms_does_not_import_mindspore():
    proc = run("import sys, smsg_ms; print('mindspore' in sys.modules)")
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]
