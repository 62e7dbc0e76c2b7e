"""Time of ``smsg-ms score gpt --configs FILE.csv`` on 1,500 configurations over 8 ``gpt`` shapes.

The configurations are generated deterministically (no randomness): for each of 8 Megatron-style
GPT shapes of 12 to 24 layers, every (devices, global batch, tp, pp, micro-batch) of the grids
below with ``dp = devices / (tp·pp)`` a positive integer (4,224 in all, shapes interleaved), of
which 1,500 evenly spaced rows are kept; rows
MindSpore cannot run (too few micro-batches for the stages, a batch that does not divide) are kept:
the run must give them their one-line error and go on. The CSV is written to a temporary folder
and scored through the real command (``smsg_ms.cli`` in this process, so captures and scoring are
both timed); the report gives the wall seconds of the whole run, captures included, the rows,
the rows with an error and the distinct (shape, micro-batch, stage devices) stage plans priced.
With ``--reference N``, the first N rows are also scored in this run by the fast path and by the
reference (``score_rows(full_problem=True)``: the whole search problem, every option pair of
every edge priced), both through ``score_rows`` with the captures done beforehand (not timed);
the report gives the ratio of their seconds and whether every step agrees exactly.

Usage: ``PYTHONPATH=. python scripts/bench_score_configs.py [--rows 1500] [--keep FILE.csv]
[--reference N]``
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import os
import platform
import sys
import tempfile
import time

#: (layers, hidden, heads, seq): GPT-2/3 widths (Radford et al. 2019; Brown et al. 2020, Table 2.1)
SHAPES = [(12, 768, 16, 1024), (12, 1024, 16, 1024), (16, 1024, 16, 2048), (16, 1536, 16, 2048),
          (20, 1536, 16, 2048), (20, 2048, 16, 2048), (24, 2048, 16, 2048),
          (24, 2560, 32, 2048)]
VOCAB = 51200
DEVICES = (8, 16, 32, 64)
GLOBAL_BATCH = (64, 128, 256, 512)
TP = (1, 2, 4, 8)
PP = (1, 2, 4)
MICRO = (1, 2, 4)
#: a stage of 96 devices (12 x 8; bench_measured.py's Megatron rows have 96 and 192)
LARGE = {"devices": 192, "global_batch": 96, "micro_batch": 1, "tp": 8, "dp": 12, "pp": 2,
         "layers": 12, "hidden": 1024, "heads": 16, "seq": 1024}


def configurations(rows: int) -> list[dict]:
    """``rows`` configurations evenly spaced over the grids, shapes interleaved."""
    per_shape = []
    for layers, hidden, heads, seq in SHAPES:
        out = []
        for n, g, tp, pp, b in itertools.product(DEVICES, GLOBAL_BATCH, TP, PP, MICRO):
            if n % (tp * pp):
                continue
            out.append({"devices": n, "global_batch": g, "micro_batch": b, "tp": tp,
                        "dp": n // (tp * pp), "pp": pp, "layers": layers, "hidden": hidden,
                        "heads": heads, "seq": seq})
        per_shape.append(out)
    mixed = [row for group in itertools.zip_longest(*per_shape) for row in group if row]
    if len(mixed) < rows:
        raise SystemExit(f"the grids give {len(mixed)} configurations, fewer than {rows}")
    # evenly spaced over the whole grid, so every device count and batch appears
    return [mixed[k * len(mixed) // rows] for k in range(rows)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--keep", help="also write the scored CSV here")
    ap.add_argument("--reference", type=int, default=0, metavar="N",
                    help="also time the first N rows against the whole-problem reference")
    ap.add_argument("--large", action="store_true",
                    help="add to the reference rows one of 96 devices per stage (the grid's "
                         "are powers of two, which the numpy redistribution block prices fast)")
    args = ap.parse_args(argv)
    rows = configurations(args.rows)
    if args.reference or args.large:
        compare_reference(rows[:args.reference] + ([LARGE] if args.large else []))
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "configs.csv"), os.path.join(tmp, "scored.csv")
        with open(src, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        from smsg_ms.cli import main as cli

        start = time.perf_counter()
        code = cli(["score", "gpt", "--configs", src, "--out", dst, "--vocab", str(VOCAB)])
        wall = time.perf_counter() - start
        with open(dst, newline="") as fh:
            text = fh.read()
    scored = list(csv.DictReader(io.StringIO(text)))
    errors = sum(bool(r["error"]) for r in scored)
    stages = {(r["layers"], r["hidden"], int(r["micro_batch"]) * int(r["dp"]),
               int(r["dp"]) * int(r["tp"])) for r in scored if not r["error"]}
    if args.keep:
        with open(args.keep, "w") as fh:
            fh.write(text)
    print(f"{len(scored)} configurations over {len(SHAPES)} gpt shapes (12-24 layers): "
          f"{wall:.1f} s wall, captures included ({errors} rows with an error, "
          f"{len(stages)} distinct stage plans priced); exit {code}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}")
    return code


def compare_reference(rows: list[dict]) -> None:
    """Seconds of scoring ``rows`` (valid ones) on the cut problems against the whole problems
    (``ShapeScorer(full_problem=True)``), the captures done beforehand and shared; prints the
    ratio and whether every step agrees exactly."""
    from smsg_ms.compare.configs import ConfigError, config_from_values
    from smsg_ms.compare.score_configs import ShapeScorer

    pairs, jobs = {}, []
    for r in rows:
        shape = {"layers": r["layers"], "hidden": r["hidden"], "heads": r["heads"],
                 "seq": r["seq"], "vocab": VOCAB}
        key = tuple(sorted(shape.items()))
        if key not in pairs:
            fast = ShapeScorer("gpt", options=shape)
            whole = ShapeScorer("gpt", options=shape, full_problem=True)
            whole.family = fast.family
            pairs[key] = (fast, whole)
        config = config_from_values({k: str(v) for k, v in r.items()})
        try:
            config.validate(devices=r["devices"], **pairs[key][0].limits)
            pairs[key][0].family(config.micro_batch * config.dp)   # capture (not timed)
        except ConfigError:
            continue
        jobs.append((pairs[key], config))
    seconds, steps = [0.0, 0.0], [[], []]
    for k in (0, 1):
        start = time.perf_counter()
        for scorers, config in jobs:
            try:
                steps[k].append(scorers[k].score(config)["step_seconds"])
            except ConfigError as exc:
                steps[k].append(str(exc))
        seconds[k] = time.perf_counter() - start
    print(f"{len(jobs)} configurations scored twice, captures excluded: cut problems "
          f"{seconds[0]:.1f} s, whole problems {seconds[1]:.1f} s (ratio "
          f"{seconds[1] / seconds[0]:.1f}x); steps identical: {steps[0] == steps[1]}")


if __name__ == "__main__":
    raise SystemExit(main())
