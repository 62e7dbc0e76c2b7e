"""A reduction to a scalar of a cut input (issue #14): MindSpore combines the devices' partial
results with a 4-byte AllReduce (``ReduceMethod::InferForwardCommunication``,
``frontend/parallel/ops_info/reduce_method_info.cc``: the reduced, cut dimensions' device-matrix
axes form the group), and the AllReduce's bprop is another one (``grad_comm_ops.py``).

Oracles: MindSpore's parallel compiler in the dry-run (8 devices) and a hand derivation: an
fp32 scalar is 4 bytes; the group is the product of the input's cuts (every dimension is
reduced), so ``(2, 4)`` → 8, ``(2, 2)`` on 8 devices → 4 (repeated calculation 2: two groups
of 4, ranks ``{0, 2, 4, 6}`` and ``{1, 3, 5, 7}``), ``(8, 1)`` → 8. Backward collectives are
compared over the whole compile (MindSpore files the bprops of equal-group AllReduces under one
case's scope, docs/known-differences.md D1).
"""
from __future__ import annotations

from collections import Counter

import pytest

from test_cost_vs_mindspore import observed, predicted

from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun

SPEC = "smsg_ms.networks.testnets:build"
DEVICES = 8


def act(*shape):
    return ["act", list(shape)]


#: (type, keep_dims, input strategy, hand-derived AllReduce group)
CASES = [
    ("ReduceSum", False, [2, 4], 8),
    ("ReduceMean", False, [8, 1], 8),
    ("ReduceSum", False, [2, 2], 4),
    ("ReduceSum", True, [4, 2], 8),
    ("ReduceMax", False, [4, 2], 8),
]


def net_cases():
    return [{"ops": [{"type": t, "init": {"keep_dims": keep}, "inputs": [act(64, 32)],
                      "args": [[0, 1]]}]} for t, keep, _, _ in CASES]


def strategies():
    out = {}
    for i, (_, _, cut, _) in enumerate(CASES):
        out[f"cases.{i}.steps.0.op"] = [cut]
        out[f"cases.{i}.steps.0.pre0"] = [cut, cut]
    return out


@pytest.fixture(scope="module")
def compiled():
    from smsg_ms.graph.capture import capture_network

    graph = capture_network(SPEC, cases=net_cases())
    result = dryrun.run_child({"job": "compile", "spec": SPEC, "options": {"cases": net_cases()},
                               "strategies": strategies()}, devices=DEVICES)
    return graph, result["collectives"]


def test_scalar_allreduce_predicted_as_inserted(compiled):
    graph, colls = compiled
    model, strats = CostModel(graph, DEVICES), strategies()
    got_backward = Counter()
    for i, (_, _, _, group) in enumerate(CASES):
        want, got = observed(colls, i), predicted(graph, model, i, strats)
        fwd = lambda c: sorted((k, v) for k, v in c.items() if k[1] == "forward")
        assert fwd(want) == fwd(got) == [(("AllReduce", "forward", group, 4), 1)], i
        grad = lambda c: sorted((k, v) for k, v in c.items() if k[1] == "grad_sync")
        assert grad(want) == grad(got), i
        got_backward += Counter({k: v for k, v in got.items() if k[1] == "backward"})
    seen_backward = Counter((c["type"], "backward", c["group_size"], 4) for c in colls
                            if c["pass"] == "backward" and not c["grad_sync"])
    hand = Counter(("AllReduce", "backward", group, 4) for *_, group in CASES)
    assert seen_backward == got_backward == hand


def test_scalar_allreduce_is_priced(compiled):
    """The 4-byte AllReduces cost their latency in the operator's time: the cut option's
    collective seconds are the two AllReduces' (forward and bprop), each > 0."""
    graph, _ = compiled
    model = CostModel(graph, DEVICES)
    op = next(o for o in graph.ops if o.prim_path == "cases.0.steps.0.op")
    cost = model.check(op, ((2, 4),))
    colls = [c for c in cost.collectives if c.phase != "grad_sync"]
    assert [(c.kind, c.phase, c.group, c.full_bytes) for c in colls] == \
        [("AllReduce", "forward", 8, 4), ("AllReduce", "backward", 8, 4)]
    each = [model.collective_seconds(c) for c in colls]
    assert all(t > 0 for t in each)
    assert model.breakdown(cost)["AllReduce"] == pytest.approx(sum(each))
