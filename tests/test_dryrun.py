"""The CPU dry-run set-up: toolchain build and a real parallel compile of MindSpore."""
from __future__ import annotations

import pytest

from smsg_ms.dryrun import runner, toolchain


def test_toolchain_builds_stub_for_every_cuda_soname(tmp_path, monkeypatch):
    monkeypatch.setenv("SMSG_MS_CACHE", str(tmp_path))
    chain = toolchain.ensure_toolchain()
    names = {p.name for p in chain.lib_dir.iterdir()}
    assert set(toolchain.CUDA_SONAMES) <= names
    assert (chain.cuda_home / "bin" / "nvcc").stat().st_mode & 0o111
    # second call reuses the cache (same folder, nothing rebuilt)
    assert toolchain.ensure_toolchain() == chain


def test_environment_rejects_bad_rank():
    chain = toolchain.DryRunToolchain(cuda_home=None, lib_dir=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rank 8 is outside"):
        chain.environment(8, 8)
    with pytest.raises(ValueError, match="at least 1"):
        chain.environment(0)


def test_missing_objdump_names_the_step(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    with pytest.raises(toolchain.DryRunSetupError, match="read plugin symbols.*binutils"):
        toolchain.undefined_cuda_symbols([tmp_path / "x.so"])


def test_megatron_mlp_collectives_from_mindspore():
    """dp=2 x mp=4 MLP: fc1 columns cut, fc2 reduction dim cut (shared/docs/mindspore-dryrun.md).

    Expected from the Megatron derivation: one forward AllReduce over the 4-device model-parallel
    group (fc2's partial sums), one backward AllReduce over the same group (dx of fc1), and
    gradient AllReduces of fc1/fc2 weights over the 2-device data-parallel group.
    """
    result = runner.run_child({
        "job": "compile", "spec": "mlp",
        "options": {"batch": 64, "d_in": 64, "hidden": 128, "d_out": 32},
        "strategies": {"fc1.matmul": [[2, 1], [4, 1]], "fc2.matmul": [[2, 4], [1, 4]]},
    }, devices=8)
    coll = result["collectives"]
    fwd_ar = [c for c in coll if c["type"] == "AllReduce" and c["pass"] == "forward"
              and c["group_size"] == 4]
    assert len(fwd_ar) == 1 and "fc2" in fwd_ar[0]["scope"]
    bwd_ar = [c for c in coll if c["type"] == "AllReduce" and c["pass"] == "backward"
              and not c["grad_sync"] and c["group_size"] == 4]
    assert len(bwd_ar) == 1
    weight_sync = [c for c in coll if c["grad_sync"] and c["group_size"] == 2]
    # fc1.weight (hidden, d_in) = (128, 64) cut 4-way on rows -> (32, 64);
    # fc2.weight (hidden, hidden) = (128, 128) cut 4-way on columns -> (128, 32)
    assert sorted(tuple(c["in_shape"]) for c in weight_sync) == [(32, 64), (128, 32)]


def test_invalid_strategy_is_rejected_with_mindspore_message():
    with pytest.raises(runner.DryRunError, match="MatMul"):
        runner.run_child({
            "job": "compile", "spec": "mlp",
            "options": {"batch": 64, "d_in": 64, "hidden": 128, "d_out": 32},
            "strategies": {"fc1.matmul": [[2, 4], [2, 1]]},
        }, devices=8)


def test_child_reports_an_unknown_job_as_data(tmp_path):
    """The child's entry point turns any failure into a result file (``ok: false``), here
    without MindSpore: the job name is looked up before anything is built."""
    import json

    from smsg_ms.dryrun import child

    job, out = tmp_path / "job.json", tmp_path / "result.json"
    job.write_text(json.dumps({"job": "no_such_job"}))
    assert child.main(["child", str(job), str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["ok"] is False and result["kind"] == "KeyError"
    assert "no_such_job" in result["error"]
    assert not (tmp_path / "result.json.tmp").exists()


def test_runner_launches_the_child_module():
    """The parent starts the child by module name: that module must exist and be the one with
    the job table."""
    import importlib

    module = importlib.import_module(runner.CHILD_MODULE)
    assert {"capture", "compile", "plan_compile", "pipeline_compile", "planner_compile",
            "read_shard", "capture_train", "init", "compile_each"} == set(module.JOBS)


@pytest.mark.parametrize("case", ["shadowing folder", "module without a spec"])
def test_mindspore_folder_is_the_installed_package(case, tmp_path, monkeypatch):
    """The folder found is the installed package's, the one whose ``__init__.py`` Python
    imports (``mindspore.__file__``), whatever the import state: a ``mindspore`` folder in the
    working folder first on ``sys.path``, or a ``sys.modules`` entry without a spec (as a
    module object replaced in ``sys.modules`` leaves it; the import system's ``find_spec``
    then raises ValueError)."""
    import sys
    import types
    from pathlib import Path

    import mindspore

    want = Path(mindspore.__file__).parent
    if case == "shadowing folder":
        (tmp_path / "mindspore").mkdir()
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
        monkeypatch.delitem(sys.modules, "mindspore")
    else:
        monkeypatch.setitem(sys.modules, "mindspore", types.ModuleType("mindspore"))
    assert toolchain.mindspore_dir() == want
