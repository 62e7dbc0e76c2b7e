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

Usage: ``PYTHONPATH=. python scripts/bench_score_configs.py [--rows 1500] [--keep FILE.csv]``
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
    args = ap.parse_args(argv)
    rows = configurations(args.rows)
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


if __name__ == "__main__":
    raise SystemExit(main())
