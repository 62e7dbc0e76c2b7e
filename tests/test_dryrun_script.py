"""``smsg-ms dryrun SCRIPT.py``: an unmodified training script (``scripts/plain_training.py``)
compiled by MindSpore's parallel compiler on simulated ranks, through the CLI. Oracles: the
parameter sizes of the MLP derived by hand, and the collectives of the plan applied by smsg-ms
as MindSpore compiles them (``run_child``)."""
from __future__ import annotations

import json
from pathlib import Path

from test_cli import one_line_error, smsg
from test_strategy_file import collective_counts, exported  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
PLAIN = str(ROOT / "scripts" / "plain_training.py")
SIZE = ["--batch", "64", "--d-in", "64", "--hidden", "128", "--d-out", "32"]


def test_data_parallel_script_memory_and_collectives(tmp_path):
    proc = smsg(["dryrun", PLAIN, "--ranks", "8", "--json", "--", "--context",
                 json.dumps({"parallel_mode": "data_parallel"}), *SIZE], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["training"] and doc["cell"] == "TrainOneStepCell"
    # weights and biases of Dense 64→128→128→32, float32, whole on every device under data
    # parallel; Momentum keeps one moment per weight: twice that, plus three scalars
    # (learning rate, momentum, global step)
    weights = (64 * 128 + 128) + (128 * 128 + 128) + (128 * 32 + 32)
    assert doc["parameter_bytes"] == 2 * 4 * weights + 3 * 4
    # one gradient AllReduce over the 8 ranks per trained parameter
    assert [c["group_size"] for c in doc["collectives"] if c["type"] == "AllReduce"] == [8] * 6


def test_script_with_the_exported_file_and_its_rejection_on_other_ranks(exported):  # noqa: F811
    from smsg_ms.integration.check import plan_compile_job
    from smsg_ms.dryrun.runner import run_child

    work, plan, _ = exported
    context = json.dumps({"parallel_mode": "semi_auto_parallel", "full_batch": True,
                          "strategy_ckpt_config": {"load_file": "mlp.strategy.json"}})
    proc = smsg(["dryrun", PLAIN, "--json", "--", "--context", context, *SIZE], work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    applied = run_child(plan_compile_job(plan), devices=8)["collectives"]
    assert collective_counts(doc["collectives"]) == collective_counts(applied)
    rejected = smsg(["dryrun", PLAIN, "--ranks", "4", "--", "--context", context, *SIZE], work)
    one_line_error(rejected, "MindSpore rejected", "rank 0 of 4", "requires 8 devices")


SMSG_SCRIPT = '''
import numpy as np
import mindspore as ms
from mindspore import nn
from mindspore.communication import init
import smsg_ms

ms.set_context(mode=ms.GRAPH_MODE)
init()
smsg_ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="smsg",
                                  device_num=8)
net = nn.SequentialCell(nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 32))
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Adam(net.trainable_params()))
train.set_train()
x, y = ms.Tensor(np.zeros((64, 64), np.float32)), ms.Tensor(np.zeros((64, 32), np.float32))
train(x, y)
'''


def test_script_in_smsg_mode_compiles_with_its_plan(tmp_path):
    """The smsg search mode plans on the first compile, which captures the network first: that
    capture is smsg-ms's own compile, not the script's training step (it used to end the
    script there, with no strategy applied)."""
    (tmp_path / "train.py").write_text(SMSG_SCRIPT)
    proc = smsg(["dryrun", "train.py", "--ranks", "8", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["training"] and doc["cell"] == "TrainOneStepCell"
    matmuls = {k: v for k, v in doc["strategies"].items() if "/MatMul-" in k}
    assert len(matmuls) == 2, doc["strategies"]
    # every trained parameter is synchronised or sharded: some collective was inserted
    assert doc["collectives"]


NO_SET_TRAIN_SCRIPT = '''
import numpy as np
import mindspore as ms
from mindspore import nn, ops
from mindspore.communication import init

ms.set_context(mode=ms.GRAPH_MODE)
init()
ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=8)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.ones((64, 32), np.float32)), "w")
        self.mm = ops.MatMul().shard(((8, 1), (1, 1)))
        self.sum = ops.ReduceSum()

    def construct(self, x):
        return self.sum(self.mm(x, self.w))


net = Net()
step = nn.TrainOneStepCell(net, nn.Momentum(net.trainable_params(), 0.01, 0.9))
step(ms.Tensor(np.ones((16, 64), np.float32)))   # no set_train(): a hand-written loop
'''


def test_train_one_step_cell_without_set_train_is_the_training_step(tmp_path):
    """A script that never calls ``set_train()`` still compiles its training step in a
    ``TrainOneStepCell``: reported as such (it read 'no training step compiled' though the
    step's gradient AllReduce was listed), and the gradient of the batch-cut MatMul's
    replicated (64, 32) weight is summed over the 8 ranks (partial sums of the batch slices)."""
    (tmp_path / "loop.py").write_text(NO_SET_TRAIN_SCRIPT)
    proc = smsg(["dryrun", "loop.py", "--ranks", "8", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["training"] and doc["cell"] == "TrainOneStepCell"
    assert [(c["group_size"], c["in_shape"]) for c in doc["collectives"]
            if c["type"] == "AllReduce" and c["in_shape"]] == [(8, [64, 32])]
