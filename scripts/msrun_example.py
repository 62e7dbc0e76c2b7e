"""A training script with smsg-ms as its search mode, for msrun or the CPU dry-run.

On a cluster (one process per device)::

    msrun --worker_num=8 --local_worker_num=8 --master_port=8118 --log_dir=msrun_log \\
        --join=True scripts/msrun_example.py [--plan FILE] [--wrapper]

On a CPU machine, ``--msrun 8`` runs that msrun command in the dry-run environment (MindSpore's
parallel compiler, no devices; msrun gives each worker its rank), and ``--simulate-ranks 8`` starts
the 8 ranks as 8 plain dry-run processes (``RANK_ID=0..7``) instead. Both collect the plan hash
each rank logs and exit non-zero unless all ranks agree. Each rank builds the network, calls
``smsg_ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="smsg", ...)``
(or wraps the training cell in ``smsg_ms.AutoParallel`` with ``--wrapper``; with
``--mindspore-api`` MindSpore's own ``mindspore.set_auto_parallel_context`` /
``mindspore.parallel.auto_parallel.AutoParallel(net, parallel_mode="smsg")``, which take smsg after
``import smsg_ms``) and compiles one
training step: the first compile plans the network with smsg-ms (or loads ``--plan``) and shards
it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

HASH_LINE = re.compile(r"rank (\d+): plan ([0-9a-f]{64})")


def run_rank(args) -> int:
    import mindspore as ms
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init

    import smsg_ms
    from smsg_ms.networks import build_network

    dryrun = os.environ.get("SMSG_MS_DRYRUN") == "1"
    ms.set_context(mode=ms.GRAPH_MODE)
    if dryrun:
        ms.set_context(device_target="GPU")
    init()
    # Weights without data (no_init_parameters) save memory in the dry-run; the wrapper path
    # builds under stand-alone mode, where MindSpore then fails to capture such weights.
    built = build_network(args.network, no_init=dryrun and not args.wrapper,
                          **json.loads(args.options))
    loss = built.loss or nn.MSELoss()

    def training_cell():
        if built.loss is None and not built.labels:  # no labels: the network's mean as loss
            return built.train_cell(ms)
        return nn.TrainOneStepCell(nn.WithLossCell(built.net, loss),
                                   nn.Momentum(built.net.trainable_params(), 0.01, 0.9))

    if args.mindspore_api and args.wrapper:
        # MindSpore's own class: after `import smsg_ms` it takes parallel_mode="smsg"
        from mindspore.parallel.auto_parallel import AutoParallel
        ms.set_auto_parallel_context(device_num=get_group_size(), global_rank=get_rank())
        net = AutoParallel(training_cell(), parallel_mode="smsg", plan=args.plan)
    elif args.mindspore_api:
        # MindSpore's own function: after `import smsg_ms` it takes search_mode="smsg"
        ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="smsg",
                                     device_num=get_group_size(), global_rank=get_rank(),
                                     **({"smsg_plan_file": args.plan} if args.plan else {}))
        net = training_cell()
    elif args.wrapper:
        ms.set_auto_parallel_context(device_num=get_group_size(), global_rank=get_rank())
        net = smsg_ms.AutoParallel(training_cell(), plan=args.plan)
    else:
        smsg_ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="smsg",
                                          device_num=get_group_size(), global_rank=get_rank(),
                                          smsg_plan_file=args.plan)
        net = training_cell()
    net.set_train(True)
    from mindspore.graph.api import _cell_graph_executor as executor
    phase, _ = executor.compile(net, *built.inputs, *built.labels, phase="train")
    used = {k: v for k, v in executor._graph_executor.get_strategy(phase).items()
            if "MatMul" in k}
    print(f"rank {get_rank()}: MindSpore used " + json.dumps(used, sort_keys=True), flush=True)
    # the plan's write-back decides the mode: semi_auto_parallel, or sharding propagation
    from smsg_ms.dryrun.collectives import read_collectives
    kinds = sorted(f"{c['type']}/{c.get('group_size')}" for c in read_collectives(net, phase))
    print(f"rank {get_rank()}: parallel_mode {ms.get_auto_parallel_context('parallel_mode')} "
          f"search_mode {ms.get_auto_parallel_context('search_mode')} collectives "
          + json.dumps(kinds), flush=True)
    return 0


def _rank_argv(args) -> list[str]:
    argv = [os.path.abspath(__file__), "--network", args.network, "--options", args.options]
    argv += ["--plan", args.plan] if args.plan else []
    argv += ["--mindspore-api"] if args.mindspore_api else []
    return argv + (["--wrapper"] if args.wrapper else [])


def _agree(hashes: dict[int, str]) -> int:
    same = len(set(hashes.values())) == 1
    print(f"{len(hashes)} ranks, {'one plan' if same else 'DIFFERENT plans'}: "
          f"{sorted(set(hashes.values()))}")
    return 0 if same else 1


def run_msrun(args) -> int:
    """``msrun`` with ``args.msrun`` local workers in the dry-run environment."""
    import tempfile
    from pathlib import Path

    from smsg_ms.dryrun.toolchain import ensure_toolchain

    env = ensure_toolchain().environment(args.msrun, 0)
    env.pop("RANK_ID", None)  # msrun gives each worker its rank
    with tempfile.TemporaryDirectory(prefix="smsg-msrun-") as logs:
        cmd = ["msrun", f"--worker_num={args.msrun}", f"--local_worker_num={args.msrun}",
               f"--master_port={args.master_port}", f"--log_dir={logs}", "--join=True"]
        proc = subprocess.run(cmd + _rank_argv(args), env=env, capture_output=True, text=True)
        hashes = {}
        for log in sorted(Path(logs).glob("worker_*.log")):
            for rank, digest in HASH_LINE.findall(log.read_text(errors="replace")):
                hashes[int(rank)] = digest
        if proc.returncode != 0 or len(hashes) != args.msrun:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-5:])
            print(f"msrun failed (exit {proc.returncode}, {len(hashes)} ranks logged a plan)\n"
                  f"{tail}", file=sys.stderr)
            return 1
    for rank in sorted(hashes):
        print(f"rank {rank}: plan {hashes[rank]}", flush=True)
    return _agree(hashes)


def simulate(args) -> int:
    from smsg_ms.dryrun.toolchain import ensure_toolchain

    chain = ensure_toolchain()
    argv = [sys.executable] + _rank_argv(args)
    hashes = {}
    for rank in range(args.simulate_ranks):
        proc = subprocess.run(argv, env=chain.environment(args.simulate_ranks, rank),
                              capture_output=True, text=True)
        found = HASH_LINE.findall(proc.stdout + proc.stderr)
        if proc.returncode != 0 or not found:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-5:])
            print(f"rank {rank}: failed (exit {proc.returncode})\n{tail}", file=sys.stderr)
            return 1
        hashes[rank] = found[-1][1]
        print(f"rank {rank}: plan {hashes[rank]}", flush=True)
        for line in proc.stdout.splitlines():
            if ": parallel_mode " in line:  # indented: only hash lines start with "rank "
                print("  " + line, flush=True)
    return _agree(hashes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="mlp", help="network spec (default mlp)")
    parser.add_argument("--options", default='{"batch": 64, "d_in": 64, "hidden": 128, '
                                             '"d_out": 32}', help="network options (JSON)")
    parser.add_argument("--plan", help="plan file to load instead of planning")
    parser.add_argument("--wrapper", action="store_true", help="use smsg_ms.AutoParallel")
    parser.add_argument("--mindspore-api", action="store_true",
                        help="choose smsg through mindspore.set_auto_parallel_context (or "
                             "mindspore's AutoParallel with --wrapper) instead of smsg_ms's")
    parser.add_argument("--simulate-ranks", type=int, metavar="N",
                        help="run N ranks as dry-run processes on this CPU machine")
    parser.add_argument("--msrun", type=int, metavar="N",
                        help="run msrun with N workers in the dry-run on this CPU machine")
    parser.add_argument("--master-port", type=int, default=8118, help="msrun master port")
    args = parser.parse_args()
    if args.msrun:
        return run_msrun(args)
    return simulate(args) if args.simulate_ranks else run_rank(args)


if __name__ == "__main__":
    sys.exit(main())
