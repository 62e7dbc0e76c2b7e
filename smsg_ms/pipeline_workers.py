"""Stage plans of the outer pipeline search evaluated on several cores.

The operator-level stage plans of different ``(devices per stage d, micro-batch size b)`` pairs
are independent, so :func:`prefetch` evaluates them in forked worker processes while the parent
evaluates its own share. A worker sends back, as JSON (orjson; floats round-trip exactly), each
pair's compute floor, its per-layer costs (:class:`~smsg_ms.cost.pipeline.LayerCost`, or ``None``
when the pair cannot be planned) and the stage plan's option index per search variable; the
parent caches them in its :class:`~smsg_ms.pipeline_planner.StageCosts`, which rebuilds a full
stage solution from the indices only for the pair the outer search picks. Every number is
computed by the same deterministic code whichever process runs it, so the plan is the one a
single process makes, byte for byte (``tests/test_pipeline_workers.py``).

Forking is used only on Linux and only while MindSpore is not imported in this process (its
runtime threads do not survive a fork); otherwise, or with ``workers <= 1``, nothing is
prefetched and the search evaluates pairs one by one as before.
"""
from __future__ import annotations

import math
import os
import sys
import time

#: environment variable naming the worker count (``1``: one process)
WORKERS_ENV = "SMSG_MS_WORKERS"


def default_workers() -> int:
    """Processes to use: ``$SMSG_MS_WORKERS`` if set, else the cores this process may run on
    (at most 8).

    Raises:
        ValueError: ``$SMSG_MS_WORKERS`` is not a positive integer.
    """
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{WORKERS_ENV}={raw!r}: expected a positive integer")
        return int(raw)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def can_fork() -> bool:
    """True where :func:`prefetch` may fork: Linux, MindSpore not imported here."""
    return sys.platform.startswith("linux") and "mindspore" not in sys.modules


def _layer_dict(layer) -> dict:
    return {"forward_seconds": layer.forward_seconds, "backward_seconds": layer.backward_seconds,
            "activation_bytes": layer.activation_bytes, "input_bytes": layer.input_bytes,
            "output_bytes": layer.output_bytes, "name": layer.name,
            "params": [[p.elements, p.first_axis, p.replicas, p.full_bytes, p.parallel_optimizer]
                       for p in layer.params]}


def _layer_of(d: dict):
    from .cost.pipeline import LayerCost, ParamSlice

    return LayerCost(d["forward_seconds"], d["backward_seconds"], d["activation_bytes"],
                     d["input_bytes"], d["output_bytes"],
                     tuple(ParamSlice(int(e), int(f), int(r), float(b), bool(o))
                           for e, f, r, b, o in d["params"]), d["name"])


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return all(_finite(v) for v in x)
    return True


def _evaluate(costs, pair, cut_args: dict | None, memo: dict) -> dict:
    """Floor, layer costs, stage-plan choice and stage cuts of one pair, as plain data."""
    from .search.pipeline import cut_chain, cut_key

    d, b = pair
    floor = costs.compute_floor(d, b)
    layers = costs(d, b)
    sol = costs.solutions.get((d, b))
    cuts = []
    if layers is not None and cut_args is not None:
        a = cut_args
        p, m = a["devices"] // d, a["global_batch"] // b
        if p <= len(layers):
            for sh in sorted(set(bool(x) for x in a["shardings"])):
                found = cut_chain(layers, p, m, memory_limit=a["memory_limit"], sharding=sh,
                                  links=a["links"], recompute=a["recompute"],
                                  bytes_per=a["bytes_per"], memo=memo)
                cuts.append([list(cut_key(p, m, sh, a["memory_limit"], a["recompute"])),
                             None if found is None else list(found)])
    return {"pair": [d, b], "floor": floor,
            "layers": None if layers is None else [_layer_dict(x) for x in layers],
            "choice": None if sol is None else [int(c) for c in sol.choice], "cuts": cuts}


def _store(costs, rec: dict) -> None:
    d, b = rec["pair"]
    costs.floors[(d, b)] = rec["floor"]
    costs.layers[(d, b)] = (None if rec["layers"] is None
                            else [_layer_of(x) for x in rec["layers"]])
    if rec["choice"] is not None:
        costs.choices[(d, b)] = rec["choice"]
    for key, found in rec["cuts"]:
        costs.cuts[tuple(key)] = None if found is None else (found[0], found[1], found[2])


def _order(pairs: list) -> list:
    """Costliest first (largest stage, then largest micro-batch): the processes take pairs
    from this list in turn, so none is left with a long one at the end."""
    return sorted(set(pairs), key=lambda db: (-db[0], -db[1]))


def prefetch(costs, pairs: list[tuple[int, int]], workers: int | None = None,
             cut_args: dict | None = None) -> dict:
    """Evaluate ``pairs`` (``(d, b)``) for ``costs`` on ``workers`` processes (this one
    included), each taking the next pair of a shared queue; fills ``costs.floors``,
    ``costs.layers``, ``costs.choices`` and ``costs.cuts`` for the pairs computed elsewhere
    (this process keeps its own solutions as usual). ``cut_args``: ``devices``,
    ``global_batch``, ``memory_limit``, ``links``, ``recompute``, ``bytes_per`` and
    ``shardings`` of the search, to run its :func:`~smsg_ms.search.pipeline.cut_chain` calls
    too (``None``: not run here).

    Returns:
        ``{"workers": processes used, "worker_solves": solves in other processes,
        "worker_seconds": their CPU seconds, "failed": workers that returned nothing}``; a pair
        not returned is simply evaluated later in this process.
    """
    import multiprocessing

    import orjson

    workers = default_workers() if workers is None else workers
    todo = _order([db for db in dict.fromkeys(pairs) if db not in costs.solutions])
    info = {"workers": 1, "worker_solves": 0, "worker_seconds": 0.0, "failed": 0}
    if workers <= 1 or len(todo) < 2 or not can_fork():
        return info
    for d, b in sorted(todo, key=lambda db: -db[1]):  # graphs made here, before forking, in
        costs.graph(b)                               # the search's order (same anchors)
        costs.op_signatures(b)
    ctx = multiprocessing.get_context("fork")
    taken = ctx.Value("i", 0)

    def next_pair():
        with taken.get_lock():
            i = taken.value
            taken.value += 1
        return todo[i] if i < len(todo) else None

    def run_queue() -> list[dict]:
        memo: dict = {}
        out = []
        while (pair := next_pair()) is not None:
            out.append(_evaluate(costs, pair, cut_args, memo))
        return out

    running = []
    for _ in range(min(workers, len(todo)) - 1):
        reader, writer = ctx.Pipe(duplex=False)

        def work(writer=writer):
            start, solved = time.process_time(), costs.solves
            try:
                body = {"results": run_queue(), "solves": costs.solves - solved}
            except Exception as exc:    # reported; the parent evaluates what is missing
                body = {"error": f"{type(exc).__name__}: {exc}"}
            body["seconds"] = time.process_time() - start
            writer.send_bytes(orjson.dumps(body) if _finite(body)
                              else orjson.dumps({"error": "non-finite value"}))
            writer.close()

        proc = ctx.Process(target=work, daemon=True)
        proc.start()
        writer.close()
        running.append((proc, reader))
    mine = run_queue()
    info["workers"] = len(running) + 1
    for proc, reader in running:
        try:
            body = orjson.loads(reader.recv_bytes())
        except (EOFError, OSError, orjson.JSONDecodeError):
            body = {"error": "worker ended without a result"}
        proc.join()
        reader.close()
        if "error" in body:
            info["failed"] += 1
            continue
        info["worker_solves"] += body["solves"]
        info["worker_seconds"] += body["seconds"]
        for rec in body["results"]:
            _store(costs, rec)
    for rec in mine:            # this process's own results (its solutions are kept too)
        _store(costs, rec)
    return info


__all__ = ["WORKERS_ENV", "can_fork", "default_workers", "prefetch"]
