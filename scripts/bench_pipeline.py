"""Benchmark of the outer pipeline search (smsg_ms.search.pipeline) on LLaMA-2-70B shapes.

Layer costs are closed forms (tests/test_pipeline_known.py's fixture: Megatron tensor parallelism
up to 8-way inside a stage, Korthikanti et al. 2022 activations, 16 B/param mixed-precision Adam).
Prints seconds per configuration and, as the in-run baseline, the time of the single-stage
candidate (p = 1, every micro-batch count) on the same machine: the ratio says how much the
outer loop over stages costs on top of the plain operator-level setting.

Usage: python scripts/bench_pipeline.py [--devices 1024] [--batch 1024] [--repeat 3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_pipeline_known import GiB, LINKS, LLAMA2_70B, llama_costs  # noqa: E402

from smsg_ms.search.pipeline import plan_pipeline  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--batch", type=int, default=1024, help="global batch (samples)")
    ap.add_argument("--memory-gib", type=float, default=64.0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for n in args.devices:
        def run(stages=None):
            costs = llama_costs(**LLAMA2_70B)   # fresh: no cache shared between runs
            return plan_pipeline(costs, n, args.batch, memory_limit=args.memory_gib * GiB,
                                 links=LINKS, stages=stages)
        base, _ = timed(lambda: run([1]), args.repeat)
        full, plan = timed(run, args.repeat)
        print(f"{n:5d} devices  batch {args.batch}: outer search {full:6.2f} s "
              f"({plan.candidates} candidates; p=1 only: {base:5.2f} s, ratio {full / base:5.1f}x)"
              f"  -> p={plan.stages} m={plan.micro_batches} optimizer_sharding="
              f"{plan.optimizer_sharding} recompute={sum(plan.recompute)}/{len(plan.recompute)} "
              f"bubble={plan.bubble:.3f} step={plan.step_seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
