"""Benchmark of the exact search on synthetic LLaMA-2-70B-shaped problems.

80 identical decoder layers (25 variables each, see smsg_ms.search.synthetic) between embedding and
head; option counts per variable grow with the device count (matmuls more than element-wise ops).
Reports solve time for 8 and 80 layers (their ratio shows the repeated squaring: 80 layers cost
O(log 80) min-plus products more than 8, not 10x the work) and, as a baseline in the same run, the
same 80-layer problem solved without the block hint (one variable elimination over all layers).

``--memory-layers L`` also solves an L-layer problem under a binding memory limit (halfway between
the smallest-memory plan and the unconstrained optimum's memory; on these problems it leaves a
duality gap) and times, in the same run, the integer program over the whole problem, which was the
gap search before reduced-cost fixing (:func:`smsg_ms.search.solve.solve_gap`). Measured on the
2-core machine (CPU s, L = 4, 2026-11-29): 8 devices 0.26 vs 0.64, 64 devices 1.3 vs 20.4,
512 devices 3.1 vs 49.6, 1024 devices 9.9 vs 67.0 (2.5x to 16x), same costs.

Usage: python scripts/bench_search.py [--devices 8 64 512 1024] [--repeat 3] [--memory-layers 4]
"""
from __future__ import annotations

import argparse
import math
import time

from rich.console import Console
from rich.table import Table

from smsg_ms.search import solve
from smsg_ms.search.synthetic import LAYER, transformer_problem

#: devices -> (options of a matmul-like variable, options of any other variable)
OPTIONS = {8: (20, 10), 64: (40, 28), 512: (80, 55), 1024: (100, 66)}
MATMULS = {"q", "k", "v", "scores", "context", "o_proj", "gate", "up", "down"}


def layer_options(devices: int) -> list[int]:
    """Option count of each variable of a layer for ``devices`` devices."""
    mm, other = OPTIONS[devices]
    return [mm if name in MATMULS else other for name, _ in LAYER]


def best_time(fn, repeat: int) -> float:
    """Smallest wall time (seconds) of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=sorted(OPTIONS), choices=sorted(OPTIONS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-layers", type=int, default=0, metavar="L",
                    help="also time a memory-limited solve of L layers (limit halfway between the "
                         "smallest-memory plan and the unconstrained optimum's memory)")
    args = ap.parse_args(argv)
    table = Table(title="exact search, synthetic LLaMA-2-70B chain (seconds, best of "
                        f"{args.repeat})")
    for col in ("devices", "options (mm/other)", "8 layers", "80 layers", "80/8",
                "80 layers, no hint", "same cost"):
        table.add_column(col, justify="right")
    for d in args.devices:
        opts = layer_options(d)
        p8, r8 = transformer_problem(8, opts, seed=d)
        p80, r80 = transformer_problem(80, opts, seed=d)
        t8 = best_time(lambda: solve(p8, repeated=r8, progress=False), args.repeat)
        t80 = best_time(lambda: solve(p80, repeated=r80, progress=False), args.repeat)
        t_flat = best_time(lambda: solve(p80, progress=False), 1)
        same = solve(p80, repeated=r80).cost == solve(p80).cost
        table.add_row(str(d), "%d/%d" % OPTIONS[d], f"{t8:.3f}", f"{t80:.3f}", f"{t80 / t8:.2f}",
                      f"{t_flat:.3f}", str(same))
    Console().print(table)
    if args.memory_layers:
        memory_table(args.devices, args.memory_layers)


def memory_table(devices, layers: int) -> None:
    """Time of a memory-limited solve (CPU seconds) against the unconstrained one and, as the
    baseline in the same run, the integer program over the whole problem (the gap search before
    reduced-cost fixing)."""
    from smsg_ms.search import solve_ilp
    from smsg_ms.search.solve import solve_exact

    table = Table(title=f"memory-limited exact search, {layers} layers (CPU seconds)")
    for col in ("devices", "unconstrained", "limited", "whole ILP (old)", "old / new",
                "same cost", "cost increase"):
        table.add_column(col, justify="right")
    for d in devices:
        p, r = transformer_problem(layers, layer_options(d), seed=d)
        t = time.process_time()
        free = solve(p, repeated=r, progress=False)
        t_free = time.process_time() - t
        low = p.memory(solve_exact(p, r, memory_only=True))
        limit = low + 0.5 * (free.memory - low)
        t = time.process_time()
        limited = solve(p, limit, repeated=r, progress=False)
        t_lim = time.process_time() - t
        t = time.process_time()
        old = solve_ilp(p, limit)
        t_old = time.process_time() - t
        table.add_row(str(d), f"{t_free:.3f}", f"{t_lim:.3f}", f"{t_old:.3f}",
                      f"{t_old / t_lim:.1f}", str(math.isclose(old.cost, limited.cost,
                                                              rel_tol=1e-9)),
                      f"{limited.cost / free.cost:.3f}")
        Console().print(f"{d} devices: limited {t_lim:.3f} s, whole ILP {t_old:.3f} s")
    Console().print(table)


if __name__ == "__main__":
    main()
