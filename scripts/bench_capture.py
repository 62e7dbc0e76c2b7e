#!/usr/bin/env python
"""Capture time and peak memory of the LLaMA-2-70B-shaped mindformers network, training graph.

For 2, 8, 32 and 80 layers (hidden 8192, 64 heads, 8 KV heads, FFN 28672, vocab 32000, seq 4096,
batch 1): wall seconds and peak RSS of ``capture_training_graph`` (no weights, dry-run child), and
the same of MindSpore's own stand-alone compile of the same training network with its weights
(baseline, in a separate process) where params + momentum fit in half the free memory; the ratio
is baseline / ours. Each measurement runs in its own process, so ``RUSAGE_CHILDREN`` is its own;
``ours CPU s`` (user + system seconds of the dry-run child) is the figure to read on a loaded
machine, where wall time mostly measures the other processes.

With ``--forward``, the forward capture of the planner (``capture_network``) instead.

Usage: ``PYTHONPATH=. python scripts/bench_capture.py [--layers 2 8 32 80] [--no-baseline]
[--forward]``
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

#: compile identical decoder layers once (``mindformers_llama(reuse_layers=...)``); --inline: off
REUSE = os.environ.get("SMSG_BENCH_INLINE") != "1"
SHAPE = dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096, batch=1)


def weight_bytes(layers: int) -> int:
    """fp16 bytes of the weights: per layer wq, wo (h²), wk, wv (h·kv·hd), 3 FFN; embedding, head."""
    h, f, v = SHAPE["hidden"], SHAPE["ffn"], SHAPE["vocab"]
    kv = SHAPE["kv_heads"] * h // SHAPE["heads"]
    return 2 * (layers * (2 * h * h + 2 * kv * h + 3 * h * f) + 2 * v * h)


def measure_ours(layers: int) -> dict:
    from smsg_ms.graph.capture import capture_training_graph

    t0 = time.perf_counter()
    tc = capture_training_graph("mf-llama", layers=layers, reuse_layers=REUSE, **SHAPE)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "child_s": tc.seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss": usage.ru_maxrss * 1024, "ops": len(tc.graph.ops)}


def measure_forward(layers: int) -> dict:
    """The planner's capture: forward graph only (``capture_network``)."""
    from smsg_ms.graph.capture import capture_network

    t0 = time.perf_counter()
    g = capture_network("mf-llama", layers=layers, reuse_layers=REUSE, **SHAPE)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss": usage.ru_maxrss * 1024, "ops": len(g.ops)}


def measure_baseline(layers: int) -> dict:
    """Stand-alone (no dry-run, weights allocated) training compile, backend skipped."""
    os.environ["MS_DEV_PRECOMPILE_ONLY"] = "1"
    import mindspore as ms

    from smsg_ms.graph.capture import compile_cell
    from smsg_ms.networks import build_network

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    t0 = time.perf_counter()
    built = build_network("mf-llama", layers=layers, **SHAPE)
    compile_cell(built.train_cell(ms), built.train_inputs, phase="train")
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run_one(mode: str, layers: int) -> dict:
    cmd = [sys.executable, __file__, "--one", mode, str(layers)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(lines[-1])


def available_bytes() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 8, 32, 80])
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--forward", action="store_true",
                    help="measure the forward capture (capture_network) instead, no baseline")
    ap.add_argument("--inline", action="store_true",
                    help="compile every decoder layer inline (reuse_layers=False)")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inline:
        os.environ["SMSG_BENCH_INLINE"] = "1"  # read by the --one processes
    if args.one:
        mode, layers = args.one[0], int(args.one[1])
        measure = {"ours": measure_ours, "forward": measure_forward}.get(mode, measure_baseline)
        out = measure(layers)
        print(json.dumps(out))
        return 0
    print(f"{'layers':>6} {'ours s':>8} {'ours CPU s':>10} {'ours RSS GB':>12} {'baseline s':>11} "
          f"{'baseline RSS GB':>16} {'time ratio':>11}")
    for layers in args.layers:
        ours = run_one("forward" if args.forward else "ours", layers)
        need = 2 * weight_bytes(layers)  # weights + momentum
        if args.no_baseline or args.forward:
            base = {"error": "not run"}
        elif need > available_bytes() / 2:
            base = {"error": f"does not fit: weights+momentum {need / 1e9:.0f} GB"}
        else:
            base = run_one("baseline", layers)
        if "error" in ours:
            print(f"{layers:>6} ours failed: {ours['error']}")
            continue
        b_s = f"{base['wall_s']:.1f}" if "wall_s" in base else "-"
        b_m = f"{base['peak_rss'] / 1e9:.2f}" if "peak_rss" in base else base.get("error", "-")
        ratio = f"{base['wall_s'] / ours['wall_s']:.2f}" if "wall_s" in base else "-"
        print(f"{layers:>6} {ours['wall_s']:>8.1f} {ours['cpu_s']:>10.1f} "
              f"{ours['peak_rss'] / 1e9:>12.2f} {b_s:>11} "
              f"{b_m:>16} {ratio:>11}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
