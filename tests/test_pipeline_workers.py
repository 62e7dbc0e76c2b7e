"""Stage plans prefetched on several processes (smsg_ms.planner.workers): the plan is the
single process's, byte for byte, pruned pairs are not solved, and a worker that fails loses
nothing.

The pipelined searches run in a fresh interpreter: forking is refused once MindSpore is imported
(other tests of this session import it), so in this process ``prefetch`` would do nothing and
the comparison could not fail."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from smsg_ms.planner.workers import WORKERS_ENV, default_workers

NET = {"layers": 4, "seq": 64, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 96}

SCRIPT = textwrap.dedent('''
    import json, os, sys
    from smsg_ms.graph.model import OpGraph
    from smsg_ms.planner import plan_network_pipelined
    from smsg_ms.planner.stage_costs import StageCosts

    graphs = {int(b): OpGraph.from_json(t) for b, t in json.load(open(sys.argv[1])).items()}
    args = json.loads(sys.argv[2])
    out = {}
    if args.get("fail_in_worker"):
        parent = os.getpid()
        solve = StageCosts.solution
        def failing(self, d, b):      # every stage solve outside this process fails
            if os.getpid() != parent:
                raise RuntimeError("worker failure for the test")
            return solve(self, d, b)
        StageCosts.solution = failing
    for workers in (1, 2):
        stats = {}
        plan = plan_network_pipelined("llama", args["devices"],
                                      global_batch=args["batch"],
                                      capture=lambda b: graphs[b], stats=stats,
                                      memory_gib=args["memory_gib"], workers=workers,
                                      **args["net"])
        out[workers] = {"plan": plan.to_json(), "stats": stats}
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def graph_file(captured, tmp_path_factory):
    """The test network captured once per micro-batch size the searches below ask for."""
    path = tmp_path_factory.mktemp("workers") / "graphs.json"
    path.write_text(json.dumps({str(b): captured("llama", batch=b, **NET).to_json()
                                for b in (1, 2, 4, 8, 16)}))
    return path


def _run(graph_file, **args) -> dict:
    args = dict({"devices": 8, "batch": 16, "memory_gib": 0.02, "net": NET}, **args)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(graph_file), json.dumps(args)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_processes_make_the_single_process_plan(graph_file):
    got = _run(graph_file)
    one, two = got["1"], got["2"]
    assert two["stats"]["workers"] == 2          # the prefetch really ran on two processes
    assert one["stats"]["workers"] == 1
    assert two["stats"]["worker_seconds"] > 0
    assert two["plan"] == one["plan"]            # byte for byte: hash, records, strategies
    # pairs the search prunes are not solved by the workers either, except where a process
    # takes a pair while the pair that prunes it still runs on the other one (the board says
    # "beaten" only of finished pairs). How many that is depends on how long each solve takes
    # (under load, one process may take several cheap pairs while the other runs the costliest
    # one), so the bound that holds whatever the timing is that no pair is solved twice:
    # 8 devices give 4 stage sizes (p = 1, 2, 4, 8) and batch 16 five micro-batch sizes.
    assert one["stats"]["stage_solves"] <= two["stats"]["stage_solves"] <= 4 * 5


def test_a_failing_worker_loses_nothing(graph_file):
    got = _run(graph_file, fail_in_worker=True)
    assert got["2"]["stats"]["workers"] == 2
    assert got["2"]["plan"] == got["1"]["plan"]   # its pairs evaluated again in the parent


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert default_workers() == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=WORKERS_ENV):
            default_workers()
    monkeypatch.delenv(WORKERS_ENV)
    assert 1 <= default_workers() <= 8


@pytest.mark.parametrize("memory_gib", [0.02, 1.0])
def test_skipped_pairs_are_the_search_s_pruned_ones(captured, monkeypatch, memory_gib):
    """With every pair finished (the most a process can know), the pairs the board says the
    search will not solve are all pairs the search does not solve; at 1 GiB the one-stage,
    one-micro-batch plan fits, so gradient accumulation is skipped."""
    import multiprocessing

    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.planner import plan_network_pipelined
    from smsg_ms.planner.pipelined import candidate_pairs
    from smsg_ms.planner.stage_costs import StageCosts
    from smsg_ms.planner.stages import bytes_per_element, links_of
    from smsg_ms.planner.workers import _Board, _evaluate, _order
    from smsg_ms.search.pipeline import divisors

    capture = lambda b: captured("llama", batch=b, **NET)   # noqa: E731
    hw = get_hardware("ascend910b")
    costs = StageCosts("llama", hw, capture=capture, **NET)
    cut_args = dict(devices=8, global_batch=16, memory_limit=memory_gib * 2**30,
                    links=links_of(hw), recompute=True, bytes_per=bytes_per_element(capture(16)),
                    shardings=(False, True))
    todo = _order(candidate_pairs(8, 16, [p for p in divisors(8) if p <= 4], None))
    board = _Board(multiprocessing.get_context("fork"), todo, cut_args)
    memo: dict = {}
    for i, pair in enumerate(todo):
        rec = _evaluate(costs, pair, cut_args, memo)
        p, m = board.p[i], board.m[i]
        objs = [found[0] for _, found in rec["cuts"] if found is not None]
        board.post(i, (m + p - 1) / p * rec["floor"], min(objs, default=float("inf")))
    skipped = {todo[i] for i in range(len(todo)) if board.beaten(i, board.bound[i])}

    solved = set()
    call = StageCosts.__call__

    def spy(self, d, b):
        solved.add((d, b))
        return call(self, d, b)

    monkeypatch.setattr(StageCosts, "__call__", spy)
    plan_network_pipelined("llama", 8, global_batch=16, capture=capture, workers=1,
                           memory_gib=memory_gib, **NET)
    assert skipped and not skipped & solved
    if memory_gib == 1.0:       # the whole batch fits on one stage: no accumulation searched
        assert {(8, 16 // m) for m in (2, 4, 8, 16)} <= skipped


def test_bad_worker_counts_are_refused_before_any_capture(monkeypatch):
    from smsg_ms.planner import PipelinePlanningError, plan_network_pipelined

    asked = []
    capture = asked.append          # any capture would be recorded here

    monkeypatch.setenv(WORKERS_ENV, "zero")
    with pytest.raises(ValueError, match="SMSG_MS_WORKERS='zero'"):
        plan_network_pipelined("llama", 8, global_batch=16, capture=capture, **NET)
    monkeypatch.delenv(WORKERS_ENV)
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(PipelinePlanningError, match="workers must be a positive integer"):
            plan_network_pipelined("llama", 8, global_batch=16, capture=capture, workers=bad,
                                   **NET)
    assert asked == []


def test_a_prefetched_pair_leaves_the_search_no_stage_cut(captured, monkeypatch):
    """Every stage cut the search makes of a prefetched pair, optimizer levels 2 and 3
    included, comes from the process that evaluated the pair: the search calls ``cut_chain``
    no more for it, and finds the plan it finds with nothing prefetched."""
    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.planner.stage_costs import StageCosts
    from smsg_ms.planner.stages import bytes_per_element, links_of
    from smsg_ms.planner.workers import _evaluate
    from smsg_ms.search import pipeline

    capture = lambda b: captured("llama", batch=b, **NET)   # noqa: E731
    hw = get_hardware("ascend910b")
    levels = (False, True, "level2", "level3")
    cut_args = dict(devices=8, global_batch=16, memory_limit=0.05 * 2**30, links=links_of(hw),
                    recompute=True, bytes_per=bytes_per_element(capture(4)), shardings=levels)
    costs = StageCosts("llama", hw, capture=capture, **NET)
    rec = _evaluate(costs, (4, 4), cut_args, {})       # p = 2 stages of 4 devices, m = 4
    cuts = {tuple(key): None if found is None else tuple(found) for key, found in rec["cuts"]}
    assert len(cuts) == len(levels)

    calls = []
    cut_chain = pipeline.cut_chain

    def spy(*args, **kwargs):
        calls.append(kwargs.get("sharding"))
        return cut_chain(*args, **kwargs)

    monkeypatch.setattr(pipeline, "cut_chain", spy)
    search = dict(memory_limit=cut_args["memory_limit"], links=cut_args["links"], stages=[2],
                  micro_batches=[4], optimizer_sharding=levels, bytes_per=cut_args["bytes_per"])
    got = pipeline.plan_pipeline(costs, 8, 16, cuts=cuts, **search)
    assert calls == []
    want = pipeline.plan_pipeline(costs, 8, 16, **search)
    assert len(calls) == len(levels)        # the spy sees the search's own calls
    assert got == want


def test_accumulated_one_stage_pairs_wait_for_the_whole_batch_pair():
    """A one-stage pair with gradient accumulation waits (is not taken) while the one-stage,
    one-micro-batch pair's result is unknown; once that pair is finished it waits no more (and
    is skipped if that pair fits); pipelined pairs never wait."""
    import math
    import multiprocessing

    from smsg_ms.planner.workers import _Board

    todo = [(8, 16), (8, 8), (4, 4), (2, 2)]    # (d, b) of p = 1 m = 1, p = 1 m = 2, p = 2, 4
    board = _Board(multiprocessing.get_context("fork"), todo,
                   dict(devices=8, global_batch=16, one_stage_first=True))
    assert [board.waits(i) for i in range(4)] == [False, True, False, False]
    board.post(0, 1.0)                          # bound known, objective not yet
    assert board.waits(1)
    board.post(0, 1.0, 2.0)                     # the whole batch fits: accumulation skipped
    assert [board.waits(i) for i in range(4)] == [False] * 4
    assert board.beaten(1, 0.5)
    board.post(0, 1.0, math.inf)                # it does not fit: accumulation is searched
    assert not board.waits(1) and not board.beaten(1, 0.5)


def test_an_accumulated_pair_beaten_anyway_is_not_priced(captured):
    """Once the whole batch fits on one stage, an accumulated one-stage pair is skipped before
    its compute floor is priced (no cost model built for it); before, it is evaluated."""
    import multiprocessing

    from smsg_ms.cost.hardware import get_hardware
    from smsg_ms.planner.stage_costs import StageCosts
    from smsg_ms.planner.stages import bytes_per_element, links_of
    from smsg_ms.planner.workers import _Board, _evaluate

    capture = lambda b: captured("llama", batch=b, **NET)   # noqa: E731
    hw = get_hardware("ascend910b")
    cut_args = dict(devices=8, global_batch=16, memory_limit=2**30, links=links_of(hw),
                    recompute=True, bytes_per=bytes_per_element(capture(16)),
                    shardings=(False,), one_stage_first=True)
    todo = [(8, 16), (8, 8)]
    board = _Board(multiprocessing.get_context("fork"), todo, cut_args)
    costs = StageCosts("llama", hw, capture=capture, **NET)
    board.post(0, 1.0, 2.0)                     # the whole batch fits
    rec = _evaluate(costs, (8, 8), cut_args, {}, board, 1)
    assert rec == {"pair": [8, 8], "floor": None, "skipped": True}
    assert (8, 8) not in costs.floors and (8, 8) not in costs.models
    board.post(0, 1.0, float("inf"))           # it does not fit: accumulation is searched
    rec = _evaluate(costs, (8, 8), cut_args, {}, board, 1)
    assert not rec.get("skipped") and rec["floor"] == costs.compute_floor(8, 8) > 0


@pytest.mark.parametrize("one_first", [True, False, None])
def test_the_board_uses_the_search_order_only_where_known(one_first):
    """A pipelined pair's step beats a one-stage pair only when the pipelined search runs first,
    the whole-batch step beats a pipelined pair only when the one-stage search does; with the
    order not known yet (``None``, the prefetch before the floors are all priced) neither."""
    import multiprocessing

    from smsg_ms.planner.workers import _Board

    todo = [(8, 16), (4, 4)]                    # p = 1 m = 1; p = 2 m = 4
    board = _Board(multiprocessing.get_context("fork"), todo,
                   dict(devices=8, global_batch=16, one_stage_first=one_first))
    board.post(1, 1.0, 2.0)                     # the pipelined pair: step 2 s
    assert board.beaten(0, 3.0) == (one_first is False)
    board = _Board(multiprocessing.get_context("fork"), todo,
                   dict(devices=8, global_batch=16, one_stage_first=one_first))
    board.post(0, 1.0, 2.0)                     # the whole batch on one stage: step 2 s
    assert board.beaten(1, 3.0) == (one_first is True)
