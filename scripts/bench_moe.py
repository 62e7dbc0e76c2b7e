#!/usr/bin/env python
"""Expert parallel at scale: the built-in ``moe`` at the DeepSeek-V3 shape on 2,048 devices.

Network: smsg's built-in ``moe`` with ``--shape deepseek-v3`` (61 layers, hidden 7168, 128 heads,
256 routed experts of width 2048 + 1 shared, top-8, vocab 129280, seq 4096, fp16), every layer
MoE and multi-head attention in place of DeepSeek-V3's multi-head latent attention (the
built-in has no MLA), global batch ``--batch`` sequences. The capture (dry-run child, no
weights) is excluded from the planning time and cached as graph JSON under ``--cache``.

For each device count: wall and CPU seconds of :func:`smsg_ms.planner.plan_graph` (cost model,
problem, search, plan), the degrees the plan gives the first layer's expert ``BatchMatMul``
(expert-parallel ``ep``: the cut of the experts' axis; ``tp``: the cut of the expert width;
``rest``: the token cut), the predicted step seconds, its redistribution seconds and memory
per device. Baseline in the same run: the planner as it was before expert parallel, i.e. with
MindSpore's default ``enable_alltoall=False`` (a moved cut is an AllGather and a slice, the
only redistribution it priced), on the same graph; the ratio is its step over the new plan's.

Usage: ``PYTHONPATH=. python scripts/bench_moe.py [--devices 2048] [--batch 8]
[--cache DIR]``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import load_graph  # noqa: E402


def network_options(batch: int) -> dict:
    from smsg_ms.networks.presets import resolve_shape

    return resolve_shape("moe", "deepseek-v3", {"batch": batch})


def expert_degrees(plan) -> dict:
    """``ep``, ``tp`` and the token cut of the first layer's expert gate BatchMatMul."""
    gate = next(d for d in plan.decisions if d.name.endswith("moe.experts.gate"))
    (e, n, _h), (_e, _h2, f) = gate.strategy
    return {"ep": e, "tp": f, "rest": n}


def time_plan(graph, devices: int, alltoall: bool) -> dict:
    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import EXHAUSTIVE_UP_TO, plan_graph

    t0, c0 = time.perf_counter(), time.process_time()
    model = CostModel(graph, devices, get_hardware("ascend910b"),
                      fully_use_devices=devices > EXHAUSTIVE_UP_TO, enable_alltoall=alltoall)
    plan = plan_graph(graph, devices, model=model, progress=False)
    out = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
           "step": plan.totals["step_seconds"],
           "redistribution": plan.totals.get("redistribution_seconds", 0.0),
           "memory": plan.totals["memory_bytes"] / 2**30}
    out.update(expert_degrees(plan))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[2048])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "smsg-bench-moe")
    args = ap.parse_args(argv)
    console = Console(width=200)
    graph, cap = load_graph(network_options(args.batch), args.cache, "moe")
    console.print(f"moe at deepseek-v3, batch {args.batch}: {len(graph.ops)} operators, capture "
                  f"{'cached' if not cap else f'{cap:.1f} s'} (excluded)")
    table = Table(title=f"plan_graph, built-in moe at the DeepSeek-V3 shape, batch {args.batch}")
    for col in ("devices", "planner", "plan s", "plan CPU s", "ep", "tp", "token cut",
                "step (pred.)", "redistribution", "memory GiB", "baseline step / step"):
        table.add_column(col, justify="right")
    for devices in args.devices:
        new = time_plan(graph, devices, alltoall=True)
        old = time_plan(graph, devices, alltoall=False)
        for name, row in (("expert parallel (AlltoAll)", new),
                          ("before (AllGather + slice)", old)):
            table.add_row(str(devices), name, f"{row['seconds']:.1f}", f"{row['cpu']:.1f}",
                          str(row["ep"]), str(row["tp"]), str(row["rest"]),
                          f"{row['step']:.4g}", f"{row['redistribution']:.4g}",
                          f"{row['memory']:.2f}",
                          f"{old['step'] / row['step']:.3f}")
        console.print(f"{devices} devices done")
    console.print(table)


if __name__ == "__main__":
    main()
