#!/usr/bin/env python
"""How one stage solve of ``plan --pipeline auto`` grows with the devices per stage: the
LLaMA-2-70B shape (built-in ``llama``, ``--shape llama2-70b`` widths: hidden 8192, 64 heads, 8
KV heads, FFN 28672, vocab 32000, seq 4096, 80 layers, fp16) at one micro-batch size.

The outer pipeline search (:func:`smsg_ms.planner.plan_network_pipelined`) asks for the
operator-level stage plan of every (devices per stage ``d``, micro-batch size ``b``) pair it
cannot prune; on ``n`` devices ``d`` runs over ``n/p`` for the stage counts ``p`` up to the
block count, so 8,192 devices solve stages of 128 to 8,192 devices where 64 devices solve 1 to
64. For each ``d`` this script reports, in CPU seconds of this process (the machine is shared;
wall time counts other users' load): the cost model's options (largest option count of a
search variable), the problem build (:func:`smsg_ms.planner.problem.build_problem`: option
costs and the redistribution tables of every edge), the compute floor the outer search prunes
with, and the exact search (:func:`smsg_ms.search.solve.solve`'s unconstrained path): ``chain``
when the divide-and-conquer elimination fits :data:`~smsg_ms.search.solve.TABLE_LIMIT`,
``too wide (T)`` with the table it would need otherwise (then the planner falls back to the
integer program over the whole problem, which this script does not run: at 256 devices and
beyond it did not finish in minutes). Ratios are against the first ``d`` of the run, measured
in the same run.

Measured 2026-12-03 (branch cp17, micro-batch 64, load average 7-8 from other users): d = 64
3.8 s (chain), 256 17.8 s (4.7x, too wide: 21.9 M entries), 1,024 50.6 s (13.3x, 94.4 M),
2,048 76.4 s (20.1x, 164.7 M), the build almost all of it. Branch cp17c (merged AllGathers
priced in the numpy fast path), same run before / after: build at d = 64, 256, 1,024, 2,048
2.7 / 0.2 s, 11.5 / 0.3 s, 35.8 / 0.7 s, 54.7 / 1.0 s (docs/benchmarks.md). ``--whole
8192`` after the float64 guard was lifted where exact (2026-12-05, load average 11-14):
949.8 s wall, 157.9 s CPU (111.3 parent + 46.6 workers), plan 32 stages x 256 devices,
32 micro-batches, step 3.827 s; the code before, next run: 1,212.3 s wall, 318.6 s CPU,
the same plan (hash 1d3a064689f4): 2.0x less CPU. Branch scale17 (selective recompute
fronts in numpy, collective seconds memoised, compute floors kept): 62.5 s CPU (41.7
parent + 20.8 workers) against 114.1 s (79.0 + 35.1) of the code before in a run beside it,
the same plan (hash 1d3a064689f4): 1.8x less CPU. Branch speed, second round (stage cuts of
every optimizer level on the workers, accumulated one-stage pairs skipped unpriced, floors
priced where their pairs are solved): 41.7 s CPU (21.9 + 19.8), 22.5 s wall at load ~3,
against 55.9 s (35.7 + 20.2), 55.8 s wall of the code before, same plan.

``--whole N``: instead, the whole command ``smsg-ms plan llama --shape llama2-70b --batch B
--devices N --pipeline auto`` after capture (:func:`smsg_ms.planner.plan_network_pipelined`
with the cached captures, default ``--time-limit``): wall seconds, CPU seconds of this process
and of the worker processes (the ``stats`` the planner fills), the plan's stages,
micro-batches and predicted step; ``--profile`` runs it under cProfile (one process:
``--workers 1`` unless given) and prints the top functions by cumulative and by own time.

Usage: ``PYTHONPATH=. python scripts/bench_stage_scale.py [--devices 64 256 1024]
[--micro-batch 64] [--cache DIR]`` or ``... --whole 8192 [--batch 1024] [--workers W]
[--profile]``; captures are cached as in ``bench_plan.py``.
"""
from __future__ import annotations

import argparse
import importlib
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_plan import load_graph, warm_imports  # noqa: E402

SHAPE = dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096,
             dtype="float16", layers=80)


def measure(costs, d: int, b: int) -> dict:
    """CPU seconds of the floor, the build and the exact search of the pair ``(d, b)``."""
    from smsg_ms.planner.problem import build_problem
    from smsg_ms.planner.variables import repeated_variable_groups
    from smsg_ms.search.chain import TooWide, frontiers

    solve = importlib.import_module("smsg_ms.search.solve")
    graph = costs.graph(d, b)
    model = costs.model(d, b)
    c0 = time.process_time()
    costs.compute_floor(d, b)
    c1 = time.process_time()
    problem, variables = build_problem(graph, model, signatures=costs.op_signatures(d, b))
    c2 = time.process_time()
    p, _, hint, _, _ = solve._solver_form(problem,
                                          repeated_variable_groups(graph, problem, variables))
    fronts = frontiers(len(p.sizes), p.edges)
    try:
        solve.solve_chain(p, solve.choose_cuts(p, hint, fronts), None, fronts)
        how = "chain"
    except TooWide as wide:
        how = f"too wide ({wide})"
    c3 = time.process_time()
    costs.models.pop((d, b), None)
    return {"options": max(p.sizes), "floor": c1 - c0, "build": c2 - c1, "search": c3 - c2,
            "how": how, "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def whole(family, devices: int, batch: int, workers, profile: bool) -> None:
    """Time (or profile) the whole pipelined plan of ``devices`` after capture."""
    import cProfile
    import pstats

    from smsg_ms.planner import plan_network_pipelined

    stats: dict = {}
    kwargs = {k: v for k, v in SHAPE.items()}
    if profile and workers is None:
        workers = 1
    prof = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    plan = plan_network_pipelined("llama", devices, global_batch=batch, stages="auto",
                                  capture=family, stats=stats, workers=workers, **kwargs)
    if prof:
        prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rec = plan.pipeline or {}
    print(f"whole plan, {devices} devices, batch {batch}: {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"here + {stats.get('worker_seconds', 0.0):.1f} s CPU in {stats.get('workers', 0)} "
          f"worker(s); {stats.get('stage_solves', 0)} stage solves; plan {rec.get('stages')} "
          f"stages x {rec.get('devices_per_stage')} devices, {rec.get('micro_batches')} "
          f"micro-batches, step {plan.totals['step_seconds']:.6g} s, hash "
          f"{plan.content_hash[:12]}", flush=True)
    if prof:
        for key in ("cumulative", "tottime"):
            pstats.Stats(prof).sort_stats(key).print_stats(25)


def main(argv=None) -> int:
    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.graph.batch_scale import BatchFamily
    from smsg_ms.planner.stage_costs import StageCosts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[64, 256, 1024],
                    help="devices per stage d (the first is the baseline)")
    ap.add_argument("--micro-batch", type=int, default=64, help="micro-batch size b (samples)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp") / "smsg-bench-plan")
    ap.add_argument("--whole", type=int, metavar="N",
                    help="time the whole `plan --pipeline auto` on N devices instead")
    ap.add_argument("--batch", type=int, default=1024, help="global batch of --whole")
    ap.add_argument("--workers", type=int, default=None, help="worker processes of --whole")
    ap.add_argument("--profile", action="store_true", help="cProfile --whole (one process)")
    args = ap.parse_args(argv)
    warm_imports()
    family = BatchFamily(lambda b: load_graph(dict(SHAPE, batch=b), args.cache)[0])
    if args.whole:
        whole(family, args.whole, args.batch, args.workers, args.profile)
        return 0
    costs = StageCosts("llama", get_hardware("ascend910b"), capture=family,
                       **{k: v for k, v in SHAPE.items()})
    base = None
    for d in args.devices:
        r = measure(costs, d, args.micro_batch)
        total = r["floor"] + r["build"] + r["search"]
        base = base or total
        print(f"d={d:5d} b={args.micro_batch}: {r['options']:4d} options at most, floor "
              f"{r['floor']:6.1f} s, build {r['build']:7.1f} s, search {r['search']:5.1f} s "
              f"[{r['how']}], total {total:7.1f} s CPU ({total / base:5.1f}x d={args.devices[0]}),"
              f" peak RSS {r['rss_gb']:.2f} GB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
