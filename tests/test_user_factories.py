"""User ``package.module:function`` specs are built like the built-ins (issue #14, part 1).

``tests/user_factories.py`` builds mindformers and mindcv models plainly, as a user does: nothing
for the dry-run. Before, the dry-run child died (segmentation fault: mindformers constructed under
the GPU target) or refused ConvNeXt ("classifier.weight is uninitialized": its constructor reads
a weight built under ``no_init_parameters``). MindSpore's parallel compiler is the oracle of the
check.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from test_cli import smsg

FACTORIES = Path(__file__).with_name("user_factories.py")


@pytest.fixture()
def work(tmp_path):
    shutil.copy(FACTORIES, tmp_path / "user_factories.py")
    return tmp_path


def test_mindformers_user_factory_plans_and_checks(work):
    pytest.importorskip("mindformers")
    plan = smsg(["plan", "user_factories:mindformers_llama", "--devices", "8",
                 "--out", "plan.json"], work)
    assert plan.returncode == 0, plan.stderr[-2000:]
    check = smsg(["check", "plan.json"], work)
    assert check.returncode == 0, (check.stdout + check.stderr)[-3000:]
    assert check.stdout.rstrip().endswith("check: passed (0 rejected, 0 mismatches)")


def test_constructor_reading_its_weights_captures_and_plans(work):
    pytest.importorskip("mindcv")
    plan = smsg(["plan", "user_factories:mindcv_convnext", "--devices", "8",
                 "--out", "plan.json"], work)
    assert plan.returncode == 0, plan.stderr[-2000:]
    check = smsg(["check", "plan.json"], work)
    assert "MindSpore rejected" not in check.stdout + check.stderr
    assert "(0 rejected," in check.stdout, (check.stdout + check.stderr)[-3000:]


_RETRY_SCRIPT = """
import numpy as np
import mindspore as ms
from mindspore import nn
from mindspore.nn.utils import no_init_parameters
from smsg_ms.networks.construction import construct


def reads_weight():
    net = nn.Dense(4, 3)
    net.weight.set_data(net.weight * 0.5)
    return net, (ms.Tensor(np.zeros((2, 4), np.float32)),)


ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
try:
    with no_init_parameters():
        reads_weight()
    raise SystemExit("expected: the constructor fails without its weights")
except RuntimeError as exc:
    assert "uninitialized" in str(exc), exc
net, _ = construct(reads_weight, {}, no_init=True)
assert net.weight.shape == (3, 4)
assert ms.get_auto_parallel_context("parallel_mode") == "semi_auto_parallel"
print("retried ok")
"""


def test_weight_reading_constructor_is_retried_with_weights():
    # in a fresh interpreter, as `plan` builds a user's network: what earlier tests left in this
    # process's MindSpore (runtime, contexts) is not the state a user's construction starts from
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _RETRY_SCRIPT], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "retried ok" in proc.stdout, proc.stderr[-2000:]


def test_other_constructor_errors_are_not_retried():
    from smsg_ms.networks.construction import construct

    calls = []

    def broken():
        calls.append(1)
        raise ValueError("hidden 10 is not a multiple of heads 3")

    with pytest.raises(ValueError, match="multiple of heads"):
        construct(broken, {}, no_init=True)
    assert calls == [1]


def test_lazy_inline_marks_are_undone_except_reuse():
    from mindspore import lazy_inline, nn

    from smsg_ms.networks.construction import REUSE_SUFFIX, undo_lazy_inline

    class Block(nn.Cell):
        @lazy_inline
        def __init__(self, width):
            super().__init__()
            self.dense = nn.Dense(width, width)

        def construct(self, x):
            return self.dense(x)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a, self.b = Block(4), Block(4)
            self.b.cell_init_args = "lazy_inline_Block" + REUSE_SUFFIX

        def construct(self, x):
            return self.b(self.a(x))

    net = Net()
    assert net.a.cell_init_args.startswith("lazy_inline_")
    assert undo_lazy_inline(net) == ["a"]
    assert not hasattr(net.a, "cell_init_args")
    assert net.b.cell_init_args.endswith(REUSE_SUFFIX)
