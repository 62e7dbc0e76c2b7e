"""Shared pieces of the tests: hand-made plans for testing the write-back (``data_parallel_plan``),
one search of a captured graph whose problem a test reads (``searched_plan``; as module fixtures
with the plan's check: ``search_fixtures``), and the mindformers wheel's ``configs/`` folder
(``mindformers_configs``).

``data_parallel_plan``: every shardable operator cuts the first axis of its activation/data inputs
``devices`` ways and keeps parameters whole (pure data parallel, which MindSpore accepts for the
built-in MLP). Predicted collectives are derived here, not by the code under test: with pure data
parallel every trained parameter is replicated on all devices, so each gets one gradient
AllReduce over all devices (Megatron/DP derivation, ``mindspore-notes.md``: ``_MirrorOperator``).
"""
from __future__ import annotations

from smsg_ms.plan import OpDecision, Plan

MLP_OPTIONS = {"batch": 64, "d_in": 64, "hidden": 128, "d_out": 32}


def data_parallel_plan(graph, devices: int, network: str, options: dict) -> Plan:
    decisions = []
    done = set()
    for op in graph.ops:
        if not op.prim_path or op.prim_path in done:
            continue
        done.add(op.prim_path)
        strategy = []
        collectives = []
        for name in op.inputs:
            t = graph.tensors[name]
            if t.kind == "constant":
                continue
            cuts = [1] * len(t.shape)
            if t.kind != "parameter" and cuts:
                cuts[0] = devices
            strategy.append(cuts)
            if t.kind == "parameter" and t.requires_grad and devices > 1:
                collectives.append({"kind": "AllReduce", "group": devices, "phase": "grad_sync",
                                    "bytes": t.nbytes})
        decisions.append(OpDecision(name=op.prim_path, op_type=op.type, strategy=strategy,
                                    seconds=1e-3, breakdown={"compute": 1e-3},
                                    collectives=collectives))
    return Plan(network=network, fingerprint=graph.fingerprint(), devices=devices,
                options=dict(options),
                input_shapes=[list(graph.tensors[n].shape) for n in graph.inputs],
                hardware="ascend910b", decisions=decisions).seal()


def searched_plan(graph, devices: int, network: str, options: dict):
    """The search's plan of ``graph`` on ``devices``, with what it was made from: (cost model,
    problem, variables, the search's choice, plan). The same search as ``plan_graph``'s (its
    repeated-layer groups), built once so a test can read the problem it solved."""
    from smsg_ms.cost.model import CostModel
    from smsg_ms.planner import build_problem, plan_graph
    from smsg_ms.planner.variables import repeated_variable_groups
    from smsg_ms.search import solve

    model = CostModel(graph, devices, "ascend910b", fully_use_devices=True)
    problem, variables = build_problem(graph, model)
    solution = solve(problem, repeated=repeated_variable_groups(graph, problem, variables))
    plan = plan_graph(graph, devices, options=options, network=network, model=model,
                      built=(problem, variables), exhaustive=False, choice=solution.choice)
    return model, problem, variables, solution.choice, plan


def search_fixtures(network: str, devices: int, options: dict):
    """Module-scoped fixtures ``(planned, checked)`` for a test module to bind by those names:
    ``planned`` is (problem, variables, the search's choice, its plan) of the built-in
    ``network`` with ``options`` on ``devices`` (:func:`searched_plan`, searched once, its
    capture shared with ``check_plan``'s fingerprint capture: ``shared_capture``); ``checked`` is
    ``check_plan`` of that plan on rank 0 (MindSpore's compile in the dry-run)."""
    import pytest

    @pytest.fixture(scope="module")
    def planned(shared_capture):
        """(problem, variables, choice, plan) of the search."""
        graph = shared_capture(network, **options)
        _, problem, variables, choice, plan = searched_plan(graph, devices, network, options)
        return problem, variables, choice, plan

    @pytest.fixture(scope="module")
    def checked(planned):
        """``check_plan`` of the plan on rank 0."""
        from smsg_ms.integration.check import check_plan

        return check_plan(planned[3], [0])

    return planned, checked


def mindformers_configs():
    """The ``configs/`` folder the mindformers 1.9.0 wheel installs beside its package, or
    ``None`` when mindformers or the folder is missing."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("mindformers")
    configs = Path(spec.origin).parent.parent / "configs" if spec else None
    return configs if configs is not None and configs.is_dir() else None


def assert_border_rows(report, shape: tuple, dtype: str, count: int) -> None:
    """Assert a two-stage check ``report`` agrees with MindSpore on every Send/Receive row,
    and that the tensor of ``shape``/``dtype`` is sent forward from stage 0 and its gradient
    back from stage 1 ``count`` times each (four rows in all: that tensor's and the block
    output's)."""
    assert [r.stage for r in report.ranks] == [0, 1]
    for r in report.ranks:
        assert r.error is None, r.error
        rows = {row.key: (row.predicted, row.inserted) for row in r.p2p}
        kinds = ((("Send", "forward"), ("Receive", "backward")) if r.stage == 0
                 else (("Receive", "forward"), ("Send", "backward")))
        for kind, phase in kinds:
            assert rows[(kind, phase, shape, dtype)] == (count, count), rows
        assert len(rows) == 4, rows
        bad = [row for row in r.p2p if not row.ok]
        assert not bad, f"stage {r.stage}: {bad}"
