"""Stage plans of the outer pipeline search evaluated on several cores.

The operator-level stage plans of different ``(devices per stage d, micro-batch size b)`` pairs
are independent, so :func:`prefetch` evaluates them in forked worker processes while the parent
evaluates its share; every process takes the next pair from one shared queue (with the outer
search's arguments: smallest bound first, estimated from another pair's floor, so that the
board prunes the rest; each process prices the floors of the pairs it takes; else costliest
first, keeping to one stage size while it lasts). A worker sends back, as JSON (orjson; floats
round-trip exactly), each pair's compute floor, its per-layer costs
(:class:`~smsg_ms.cost.pipeline.LayerCost`, or ``None`` when the pair cannot be planned), the
stage plan's option index per search variable and the results of the outer search's stage cuts
(:func:`~smsg_ms.search.pipeline.cut_chain`) for that pair; the parent caches them in its
:class:`~smsg_ms.planner.stage_costs.StageCosts`, which rebuilds a stage solution from the indices
only for the pair the outer search picks. A pair the outer search is sure to prune (a finished
pair it visits earlier already beats the pair's bound) is not solved. Every number is computed
by the same deterministic code whichever process runs it, and the search itself runs in the
parent as before on these cached values, so the plan is the one a single process makes, byte for
byte (``tests/test_pipeline_workers.py``); a pair a worker did not return is evaluated in the
parent.

Forking is used only on Linux and only while MindSpore is not imported in this process (its
runtime threads do not survive a fork); otherwise, or with ``workers <= 1``, nothing is
prefetched and the search evaluates pairs one by one as before.
"""
from __future__ import annotations

import math
import os
import sys
import time
from fractions import Fraction

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
            "hidden_sync_seconds": layer.hidden_sync_seconds,
            "selective_seconds": layer.selective_seconds,
            "selective_bytes": layer.selective_bytes,
            "output_sizes": list(layer.output_sizes), "input_sizes": list(layer.input_sizes),
            "params": [[p.elements, p.first_axis, p.replicas, p.full_bytes, p.parallel_optimizer,
                        [list(x) for x in p.span]] for p in layer.params]}


def _layer_of(d: dict):
    from ..cost.pipeline import LayerCost, ParamSlice

    return LayerCost(d["forward_seconds"], d["backward_seconds"], d["activation_bytes"],
                     d["input_bytes"], d["output_bytes"],
                     tuple(ParamSlice(int(e), int(f), int(r), float(b), bool(o),
                                      tuple((int(x), int(y)) for x, y in (sp[0] if sp else ())))
                           for e, f, r, b, o, *sp in d["params"]), d["name"],
                     d.get("hidden_sync_seconds", 0.0),
                     selective_seconds=d.get("selective_seconds", 0.0),
                     selective_bytes=d.get("selective_bytes", 0.0),
                     output_sizes=tuple(d.get("output_sizes", ())),
                     input_sizes=tuple(d.get("input_sizes", ())))


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return all(_finite(v) for v in x)
    return True


class _Board:
    """What the processes know of each other's pairs (shared memory, index = queue position):
    each pair's bound ``(m + p − 1) / p · floor`` (NaN until known) and its best stage-cut
    objective (``inf`` when none fits; NaN until known)."""

    def __init__(self, ctx, todo: list, cut_args: dict):
        self.p = [cut_args["devices"] // d for d, _ in todo]
        self.m = [cut_args["global_batch"] // b for _, b in todo]
        self.bound = ctx.Array("d", [math.nan] * len(todo))
        self.objective = ctx.Array("d", [math.nan] * len(todo))
        self.lock = ctx.Lock()
        # None: not known yet (the rules that depend on it are not used)
        self.one_first = cut_args.get("one_stage_first", True)

    def beaten(self, i: int, bound: float) -> bool:
        """True when the outer search is sure not to solve pair ``i``
        (:func:`smsg_ms.planner.pipelined.plan_network_pipelined`: ``plan_pipeline`` visits by
        increasing ``(bound, p, m)`` and stops at the first bound above the best step so far;
        the one-stage and the pipelined searches run in ``_one_stage_first``'s order, the first
        one's step the second's incumbent).

        A pipelined pair: a pipelined pair visited before it has a step below ``bound``, or,
        one stage first, a one-stage pair has (the accumulated ones count only once the
        one-micro-batch pair is known not to fit). A one-stage pair: the one-micro-batch pair
        is known to fit (gradient accumulation is then not searched), or an accumulated pair
        visited before it has a step below ``bound`` once the one-micro-batch pair is known not
        to fit, or, pipelined first, any pipelined pair has a step below ``bound`` (the
        rules of one order are used only where the order is known). With fewer pairs finished
        it says True less often, never wrongly."""
        p, m = self.p[i], self.m[i]
        with self.lock:
            bounds, objs = list(self.bound), list(self.objective)
        whole = [j for j in range(len(objs)) if self.p[j] == 1 and self.m[j] == 1]
        whole_obj = objs[whole[0]] if whole else math.nan
        if p == 1 and m > 1 and whole and whole_obj < math.inf:
            return True                 # finite: the one-micro-batch plan fits
        accumulated = whole_obj == math.inf
        for j, obj in enumerate(objs):
            if math.isnan(obj) or not obj < bound:
                continue
            earlier = (bounds[j], self.p[j], self.m[j]) < (bound, p, m)
            if p == 1:
                if self.p[j] == 1 and accumulated and earlier:
                    return True
                if self.p[j] > 1 and self.one_first is False:
                    return True
            elif self.p[j] == 1:
                if self.one_first and (self.m[j] == 1 or accumulated):
                    return True
            elif earlier:
                return True
        return False

    def waits(self, i: int) -> bool:
        """True while pair ``i`` is a one-stage pair with gradient accumulation (``m > 1``)
        and the one-micro-batch pair's objective is not known yet: once that pair fits,
        :meth:`beaten` skips pair ``i`` (at 8,192 devices two such stage plans, 5 s of CPU,
        were solved beside the one-micro-batch one for nothing)."""
        if self.p[i] != 1 or self.m[i] == 1:
            return False
        whole = [j for j in range(len(self.p)) if self.p[j] == 1 and self.m[j] == 1]
        with self.lock:
            return bool(whole) and math.isnan(self.objective[whole[0]])

    def post(self, i: int, bound: float, objective: float | None = None) -> None:
        with self.lock:
            self.bound[i] = bound
            if objective is not None:
                self.objective[i] = objective


def _evaluate(costs, pair, cut_args: dict | None, memo: dict, board: _Board | None = None,
              index: int = -1) -> dict:
    """Floor, layer costs, stage-plan choice and stage cuts of one pair, as plain data; only
    the floor when ``board`` (which needs ``cut_args``) shows the search will prune the
    pair."""
    from ..cost.pipeline import level_rank
    from ..cost.param_traffic import optimizer_level
    from ..search.pipeline import cut_chain, cut_key

    d, b = pair
    if board is not None and board.beaten(index, 0.0):
        # beaten whatever its bound (an accumulated one-stage pair once the whole batch
        # fits): no floor either (at 8,192 devices its options are the costliest to price)
        return {"pair": [d, b], "floor": None, "skipped": True}
    floor = costs.compute_floor(d, b)
    if cut_args is not None:
        p, m = cut_args["devices"] // d, cut_args["global_batch"] // b
    if board is not None:
        bound = (m + p - 1) / p * floor
        board.post(index, bound)
        if board.beaten(index, bound):
            return {"pair": [d, b], "floor": floor, "skipped": True}
    layers = costs(d, b)
    sol = costs.solutions.get((d, b))
    cuts = []
    if layers is not None and cut_args is not None:
        a = cut_args
        if p <= len(layers):
            # every level the search tries (levels 2 and 3 too), called as it calls them;
            # their recompute fronts come from this process's memo of the first level's
            for sh in sorted(set(optimizer_level(x) for x in a["shardings"]), key=level_rank):
                found = cut_chain(layers, p, m, memory_limit=a["memory_limit"],
                                  sharding=sh or False,
                                  links=a["links"].for_stage(d), recompute=a["recompute"],
                                  bytes_per=a["bytes_per"], memo=memo)
                cuts.append([list(cut_key(p, m, sh, a["memory_limit"], a["recompute"])),
                             None if found is None else list(found)])
    if board is not None:
        objs = [found[0] for _, found in cuts if found is not None]
        board.post(index, bound, min(objs, default=math.inf))
    return {"pair": [d, b], "floor": floor,
            "layers": None if layers is None else [_layer_dict(x) for x in layers],
            "choice": None if sol is None else [int(c) for c in sol.choice],
            "bound": None if sol is None else sol.bound, "cuts": cuts}


def _store(costs, rec: dict) -> None:
    d, b = rec["pair"]
    if rec.get("skipped"):
        if rec["floor"] is not None:
            costs.store_prefetched(d, b, rec["floor"], evaluated=False)
        return
    costs.store_prefetched(
        d, b, rec["floor"],
        layers=None if rec["layers"] is None else [_layer_of(x) for x in rec["layers"]],
        choice=rec["choice"], bound=rec.get("bound"),
        cuts={tuple(key): None if found is None else (found[0], found[1], found[2])
              for key, found in rec["cuts"]})


def _order(pairs: list) -> list:
    """Costliest first (largest stage, then largest micro-batch): the processes take pairs
    from this list in turn, so none is left with a long one at the end."""
    return sorted(set(pairs), key=lambda db: (-db[0], -db[1]))


def prefetch(costs, pairs: list[tuple[int, int]], workers: int | None = None,
             cut_args: dict | None = None) -> dict:
    """Evaluate ``pairs`` (``(d, b)``) for ``costs`` on ``workers`` processes (this one
    included), each taking the next pair of a shared queue; records the pairs computed
    elsewhere with ``costs.store_prefetched`` (this process keeps its own solutions as usual).
    ``cut_args``: ``devices``, ``global_batch``, ``memory_limit``, ``links``, ``recompute``,
    ``bytes_per``, ``shardings`` and ``one_stage_first`` (which search runs first; ``None``:
    not known yet) of the
    search, to run its
    :func:`~smsg_ms.search.pipeline.cut_chain` calls too (``None``: not run here).

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
    # the captures happen here, before forking, in the search's order (same anchors); the
    # graphs rescaled from them are made where they are needed, unless rescaling fails
    # (per stage size where the network is built for it: StageGraphs)
    for d in dict.fromkeys(d for d, _ in todo):
        sizes_b = list(dict.fromkeys(b for dd, b in sorted(todo, key=lambda db: -db[1])
                                     if dd == d or costs.graphs.key(d) is None))
        for b in sizes_b[:3]:
            costs.graph(d, b)
        family = costs.graphs.family(d)
        if family.rescale_error is not None or family.template is None:
            for b in sizes_b:
                costs.graph(d, b)
    ctx = multiprocessing.get_context("fork")
    taken = ctx.Array("b", [0] * len(todo))
    board = _Board(ctx, todo, cut_args) if cut_args is not None else None
    if board is not None:
        # cheapest bound first: the pairs likely to give the best step are solved first and
        # the board then prunes the rest (at 8,192 devices the one-stage pairs, 8,192 devices
        # per stage, are the costliest and are never solved once a pipelined step beats them)
        # the floor of each pair is priced by the process that takes it (its cost model, most
        # of the floor's work, is then the one its stage solve reuses); the order reads the
        # floor of the pair with the same samples per device b / d on the fewest devices (the
        # floor depends almost on b / d alone: at 8,192 devices equal to 6 digits from
        # d = 256 to 8,192 for b / d = 1/8). Only the queue's order: the board prunes on the
        # exact bounds the processes post, whatever the order.
        whole = (cut_args["devices"], cut_args["global_batch"])
        fewest: dict = {}
        for d, b in sorted(todo):
            fewest.setdefault(Fraction(b, d), (d, b))

        def bound(d, b):
            if d == whole[0] and b != whole[1] and whole in todo:
                # an accumulated one-stage pair, skipped once the whole batch fits (it waits
                # for that pair, _Board.waits): queued just after it, its floor left unpriced
                return bound(*whole)
            return ((cut_args["global_batch"] // b + cut_args["devices"] // d - 1)
                    / (cut_args["devices"] // d) * costs.compute_floor(*fewest[Fraction(b, d)]))

        bounds = [bound(d, b) for d, b in todo]
        rank = sorted(range(len(todo)), key=lambda i: (bounds[i], board.p[i], board.m[i]))
        todo = [todo[i] for i in rank]
        board = _Board(ctx, todo, cut_args)
    sizes = sorted({d for d, _ in todo}, reverse=True)

    def next_index(prefer: int):
        """The next pair of stage size ``prefer`` (its larger micro-batches first: their
        layouts cover the smaller ones', whose redistribution programs are then cut out of
        them), else the costliest pair left; with a board, the first pair left in bound order
        that does not wait for another's result (:meth:`_Board.waits`), else the first."""
        with taken.get_lock():
            left = [i for i in range(len(todo)) if not taken[i]]
            if not left:
                return None
            if board is not None:
                i = next((i for i in left if not board.waits(i)), left[0])
            else:
                i = next((i for i in left if todo[i][0] == prefer), left[0])
            taken[i] = 1
        return i

    def run_queue(k: int) -> list[dict]:
        memo: dict = {}
        out = []
        prefer = sizes[k % len(sizes)]
        while (i := next_index(prefer)) is not None:
            out.append(_evaluate(costs, todo[i], cut_args, memo, board, i))
            prefer = todo[i][0]
        return out

    running = []
    for k in range(1, min(workers, len(todo))):
        reader, writer = ctx.Pipe(duplex=False)

        def work(writer=writer, k=k):
            start, solved = time.process_time(), costs.solves
            try:
                body = {"results": run_queue(k), "solves": costs.solves - solved}
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
    mine = run_queue(0)
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
