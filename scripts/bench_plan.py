#!/usr/bin/env python
"""Planning time at scale: the built-in ``llama`` at the LLaMA-2-70B shape, 8 and 80 layers.

Network: smsg's own built-in ``llama`` (not mindformers' LLaMA; that capture is benchmarked in
``bench_capture.py``) with hidden 8192, 64 heads (no grouped KV heads), FFN 28672, vocab 32000,
seq 4096, batch ``--batch`` (default 8), fp16. The capture (dry-run child, no weights) is
excluded from the planning time and cached as graph JSON under ``--cache`` (plain JSON, keyed by
the network options).

For each device count: wall seconds of :func:`smsg_ms.planner.plan_graph` (cost model, problem,
search, plan) for 8 and 80 layers, their ratio, the CPU seconds of this process for both (the
machine is shared: wall time counts other users' load, CPU time much less) and their ratio, each
the best of ``--repeat`` plans from scratch, the plan's
predicted step seconds, the number of redistribution blocks (both layer counts) whose fast path
disagreed with the reference (the planner warns and falls back to the slow reference; 0
expected), and, as the baseline in the same run, the wall seconds of MindSpore's own ``recursive_programming`` search
compiling the same network (``auto_parallel``; CPU dry-run, ``planner_compile`` job; its
``compile_seconds`` includes MindSpore's parallel passes) and the ratio smsg / MindSpore.

The planner's modules (sympy among them) are imported once before the first timing, so no row
pays the one-off import.

Measured 2026-11-29 (2-core machine under load from other users; CPU seconds, best of 3,
8 layers / 80 layers / ratio), after the speed5 changes (cyclic GC paused during planning,
pre-built C JSON encoders for the graph fingerprint, operator signatures and plan hash, the
repeated-block hint from the problem's signatures instead of a per-operator block hash, the
plan's redistributions and data-parallel choice memoised per structural key): 8 devices
0.149 / 0.235 / 1.57, 64 devices 0.206 / 0.303 / 1.47, 512 devices 0.483 / 0.636 / 1.32, 1024
devices 0.638 / 0.813 / 1.27 (before, the branch's base in the same session: 8 devices 0.150 /
0.317 / 2.12, 64 devices 0.213 / 0.384 / 1.80). Then the plan hash and the graph fingerprint
were written by orjson instead of ``json`` (~20 ms less at 80 layers): 8 devices 0.140 / 0.209 /
1.49 (1.47 in a quieter run), 64 devices 0.200 / 0.266 / 1.33, 512 devices 0.463 / 0.581 / 1.25,
1024 devices 0.616 / 0.790 / 1.28 (wall ratios are noisier: 1.78 / 1.47 / 1.21 / 1.34 in the same
run, the machine running a test suite beside it). The 1.5x target holds in CPU time at every
device count, narrowly at 8 devices: what still grows with the layer count there (~65 ms) is
per-operator work in build_problem (~20 ms) and in the decisions (~12 ms), the search (~12 ms)
and the plan's redistributions (~6 ms).

Usage: ``PYTHONPATH=. python scripts/bench_plan.py [--devices 8 64 512 1024] [--layers 8 80]
[--batch 8] [--repeat 3] [--no-mindspore] [--plain]`` (``--plain``: also time ``build_problem(reuse=False)``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
import time
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

SHAPE = dict(hidden=8192, heads=64, ffn=28672, vocab=32000, seq=4096, dtype="float16")


def network_options(layers: int, batch: int) -> dict:
    return dict(SHAPE, layers=layers, batch=batch)


def load_graph(options: dict, cache: Path, network: str = "llama"):
    """Captured graph (``OpGraph``) of the built-in ``network`` and capture seconds (0 when read
    from the cache)."""
    from smsg_ms.graph.capture import capture_network
    from smsg_ms.graph.model import OpGraph

    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]
    path = cache / f"{network}-{digest}.json"
    if path.exists():
        return OpGraph.from_json(path.read_text()), 0.0
    t0 = time.perf_counter()
    graph = capture_network(network, **options)
    seconds = time.perf_counter() - t0
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(graph.to_json())
    return graph, seconds


def time_plan(graph, devices: int, memory_gib, repeat: int = 1) -> dict:
    """Best wall and best CPU seconds of ``repeat`` plans (each from scratch: a new cost model,
    problem and plan), the predicted step seconds and the fast-path fallbacks."""
    from smsg_ms.planner import plan_graph
    from smsg_ms.search import NoFeasiblePlan

    seconds = cpu = math.inf
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                plan = plan_graph(graph, devices, memory_gib=memory_gib, progress=False)
                step = plan.totals["step_seconds"]
            except NoFeasiblePlan:
                step = None
        seconds = min(seconds, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    fallbacks = sum("fast redistribution" in str(w.message) for w in caught)
    for w in caught:   # shown after the timing, as they would be without the recording
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return {"seconds": seconds, "cpu": cpu, "step": step, "fallbacks": fallbacks}


def warm_imports() -> None:
    """Import what plan_graph imports lazily (the cost model pulls in sympy)."""
    import smsg_ms.cost.hardware  # noqa: F401
    import smsg_ms.cost.model  # noqa: F401
    import smsg_ms.graph.blocks  # noqa: F401
    import smsg_ms.search  # noqa: F401


def time_plain_problem(graph, devices: int) -> float:
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import EXHAUSTIVE_UP_TO, build_problem

    t0 = time.perf_counter()
    build_problem(graph, CostModel(graph, devices, fully_use_devices=devices > EXHAUSTIVE_UP_TO),
                  reuse=False)
    return time.perf_counter() - t0


def time_mindspore(options: dict, devices: int, timeout: float):
    """MindSpore recursive_programming compile seconds, or the error's first line."""
    from smsg_ms.dryrun.runner import DryRunError, run_child

    try:
        out = run_child({"job": "planner_compile", "spec": "llama", "options": options,
                         "planner": "recursive_programming"}, devices=devices, timeout=timeout)
    except DryRunError as exc:
        return str(exc).splitlines()[0][:60]
    return float(out["compile_seconds"])


def fmt(x, unit="s"):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.3g} {unit}" if math.isfinite(x) else "inf"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[8, 64, 512, 1024])
    ap.add_argument("--layers", type=int, nargs=2, default=[8, 80], metavar=("FEW", "MANY"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3,
                    help="plans per row; the best wall and the best CPU time are reported")
    ap.add_argument("--memory-gib", type=float, default=1e6,
                    help="per-device memory limit (default: unbounded, planning time only)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "smsg-bench-plan")
    ap.add_argument("--no-mindspore", action="store_true")
    ap.add_argument("--plain", action="store_true",
                    help="also time the plain build_problem (no reuse) on the few-layer graph")
    ap.add_argument("--timeout", type=float, default=1800.0, help="MindSpore compile timeout (s)")
    args = ap.parse_args(argv)
    console = Console()
    few, many = args.layers
    graphs = {}
    for layers in (few, many):
        graphs[layers], cap = load_graph(network_options(layers, args.batch), args.cache)
        console.print(f"{layers} layers: {len(graphs[layers].ops)} operators, capture "
                      f"{'cached' if not cap else f'{cap:.1f} s'} (excluded)")
    table = Table(title=f"plan_graph, built-in llama at the 70B shape, batch {args.batch}")
    warm_imports()
    for col in ["devices", f"{few} layers", f"{many} layers", "ratio", f"{few} layers CPU",
                f"{many} layers CPU", "CPU ratio", "step (pred.)", "fast-path fallbacks",
                "MindSpore rec. prog.", "smsg / MindSpore"] + (["plain build"] if args.plain
                                                                 else []):
        table.add_column(col, justify="right")
    for devices in args.devices:
        a = time_plan(graphs[few], devices, args.memory_gib, args.repeat)
        b = time_plan(graphs[many], devices, args.memory_gib, args.repeat)
        ms = None if args.no_mindspore else time_mindspore(
            network_options(many, args.batch), devices, args.timeout)
        row = [str(devices), fmt(a["seconds"]), fmt(b["seconds"]),
               f"{b['seconds'] / a['seconds']:.2f}", fmt(a["cpu"]), fmt(b["cpu"]),
               f"{b['cpu'] / a['cpu']:.2f}", fmt(b["step"]),
               str(a["fallbacks"] + b["fallbacks"]), fmt(ms),
               f"{b['seconds'] / ms:.3g}" if isinstance(ms, float) else "-"]
        if args.plain:
            row.append(fmt(time_plain_problem(graphs[few], devices)))
        table.add_row(*row)
        console.print(f"{devices} devices done: {row}")
    console.print(table)


if __name__ == "__main__":
    main()
