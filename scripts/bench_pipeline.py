"""Planning time of ``plan --pipeline auto`` on the LLaMA-2-70B shape (built-in ``llama``).

The real code path (:func:`smsg_ms.pipeline_planner.plan_network_pipelined`): for every stage
count ``p`` and micro-batch count ``m`` the outer search asks for the operator-level stage plan
on ``n / p`` devices with micro-batch size ``B / m``. Network: hidden 8192, 64 heads, FFN 28672,
vocab 32000, seq 4096, 80 layers, fp16. Graphs come from two captures (cached as graph JSON under
``--cache``, keyed by the options) and are rescaled to the other micro-batch sizes
(:mod:`smsg_ms.graph.batch_scale`); the capture seconds are reported apart and excluded from the
planning seconds. Planning seconds are CPU seconds of this process (the machine is shared) and
wall seconds.

Baseline in the same run: the outer search alone with closed-form layer costs
(``tests/test_pipeline_known.py``'s LLaMA-2-70B fixture) on the same devices and batch; the
ratio says what the operator-level stage plans cost on top.

Usage: ``PYTHONPATH=. python scripts/bench_pipeline.py [--devices 64 512 1024] [--batch 1024]
[--memory-gib 64] [--layers 80]``
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_plan import SHAPE, load_graph, warm_imports  # noqa: E402


class CachedCapture:
    """``batch -> OpGraph`` from the bench_plan JSON cache; counts the seconds spent capturing."""

    def __init__(self, layers: int, cache: Path):
        self.layers, self.cache, self.seconds = layers, cache, 0.0

    def __call__(self, batch: int):
        graph, seconds = load_graph(dict(SHAPE, layers=self.layers, batch=batch), self.cache)
        self.seconds += seconds
        return graph


def closed_form_seconds(devices: int, batch: int, memory_gib: float) -> float:
    from test_pipeline_known import GiB, LINKS, LLAMA2_70B, llama_costs

    from smsg_ms.search.pipeline import plan_pipeline

    c0 = time.process_time()
    plan_pipeline(llama_costs(**LLAMA2_70B), devices, batch, memory_limit=memory_gib * GiB,
                  links=LINKS)
    return time.process_time() - c0


def main(argv=None) -> int:
    from smsg_ms.graph.batch_scale import BatchFamily
    from smsg_ms.pipeline_planner import plan_network_pipelined

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[64, 512, 1024])
    ap.add_argument("--batch", type=int, default=1024, help="global batch (samples)")
    ap.add_argument("--memory-gib", type=float, default=64.0)
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--cache", type=Path, default=Path("/tmp") / "smsg-bench-plan")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes for the stage plans (default: plan_network_pipelined's)")
    args = ap.parse_args(argv)
    warm_imports()
    import smsg_ms.pipeline_planner  # noqa: F401
    capture = CachedCapture(args.layers, args.cache)
    family = BatchFamily(capture)      # shared by all device counts: graphs do not depend on n
    for n in args.devices:
        stats: dict = {}
        before = capture.seconds
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_network_pipelined("llama", n, global_batch=args.batch, stages="auto",
                                      memory_gib=args.memory_gib, capture=family, stats=stats,
                                      layers=args.layers, workers=args.workers, **SHAPE)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        kids = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
        cap = capture.seconds - before
        rec = plan.pipeline
        d = rec["devices_per_stage"]
        strategies = [dc.strategy for dc in plan.decisions if dc.strategy]
        mm = next((dc for dc in plan.decisions if dc.strategy and "MatMul" in dc.op_type
                   and ".0." in dc.name), None)
        base = closed_form_seconds(n, args.batch, args.memory_gib)
        print(f"{n:5d} devices, batch {args.batch}: planning {wall - cap:6.2f} s wall on "
              f"{stats['workers']} process{'es' if stats['workers'] > 1 else ''} "
              f"({cpu:6.2f} s CPU here + {kids:6.2f} s in workers), "
              f"capture {cap:5.1f} s (excluded; {stats['captures']} captures, "
              f"{len(stats['micro_batch_sizes'])} micro-batch sizes), "
              f"{stats['stage_solves']} stage solves ({stats['stage_solve_seconds']:.2f} s CPU), "
              f"{rec['candidates']} candidates; "
              f"closed-form outer search {base:5.2f} s CPU (ratio {cpu / base:5.1f}x)"
              f"\n      -> p={rec['stages']} m={rec['micro_batches']} "
              f"b={rec['micro_batch_size']} devices/stage={d} "
              f"({len(strategies)} written-back strategies; {mm.name if mm else '-'} "
              f"{mm.strategy if mm else '-'}) optimizer_sharding="
              f"{rec['optimizer_sharding']} recompute={sum(rec['recompute'].values())}/"
              f"{len(rec['recompute'])} bubble={rec['bubble_fraction']:.3f} "
              f"step={rec['step_seconds']:.3f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
