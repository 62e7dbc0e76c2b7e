"""An ordinary MindSpore training script, without smsg-ms: a 3-layer MLP trained with MSE loss and
Momentum, parallelised by MindSpore's context alone, e.g. with the strategy file ``smsg-ms
export`` wrote::

    python scripts/plain_training.py --context '{"parallel_mode": "semi_auto_parallel",
        "full_batch": true, "strategy_ckpt_config": {"load_file": "mlp.strategy.json"}}'

Under msrun on devices it would train; on a CPU machine it runs in smsg-ms's dry-run environment
(``smsg_ms.dryrun.toolchain.ensure_toolchain().environment(devices, rank)``), where MindSpore
compiles one training step with its parallel compiler and cannot run it. The lines a user's script
would not have: the step is compiled (``_cell_graph_executor.compile``) instead of run, and
``--save-ir`` writes the compiled graph (MindIR) for a comparison of its collectives.
The network is the built-in ``mlp`` of smsg-ms written out (same cells, same parameter names).
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", default="{}",
                        help="keys of mindspore.set_auto_parallel_context (JSON)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--d-in", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--d-out", type=int, default=512)
    parser.add_argument("--save-ir", help="write the compiled training graph (MindIR) here")
    args = parser.parse_args()

    import mindspore as ms
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE, device_target="GPU")
    init()
    ms.set_auto_parallel_context(device_num=get_group_size(), global_rank=get_rank(),
                                 **json.loads(args.context))

    class MLP(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(args.d_in, args.hidden)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Dense(args.hidden, args.hidden)
            self.relu2 = nn.ReLU()
            self.fc3 = nn.Dense(args.hidden, args.d_out)

        def construct(self, x):
            return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))

    net = MLP()
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                                nn.Momentum(net.trainable_params(), 0.01, 0.9))
    train.set_train(True)
    x = ms.Tensor(np.zeros((args.batch, args.d_in), np.float32))
    y = ms.Tensor(np.zeros((args.batch, args.d_out), np.float32))
    from mindspore.graph.api import _cell_graph_executor as executor
    phase, _ = executor.compile(train, x, y, phase="train")
    if args.save_ir:
        with open(args.save_ir, "wb") as fh:
            fh.write(executor._get_func_graph_proto(train, phase, "mind_ir"))
    print(f"rank {get_rank()}: compiled", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
