"""A reduced comparison compiled by MindSpore: every planner compiles and the counted figures agree
with hand derivations. One comparison per network is shared by the tests (module fixtures)."""
from __future__ import annotations

import pytest

from smsg_ms.compare.runner import batch_parallel_seeds, compare

DEVICES = 8
MLP = {"batch": 64, "d_in": 512, "hidden": 2048, "d_out": 512}
LLAMA = {"batch": 8, "seq": 64, "layers": 2, "hidden": 256, "heads": 4, "ffn": 512, "vocab": 1024}
FP32 = 4


def mlp_param_bytes():
    d_in, h, d_out = MLP["d_in"], MLP["hidden"], MLP["d_out"]
    return FP32 * (d_in * h + h + h * h + h + h * d_out + d_out)


def llama_param_bytes():
    v, h, f, n = LLAMA["vocab"], LLAMA["hidden"], LLAMA["ffn"], LLAMA["layers"]
    per_layer = 4 * h * h + 3 * h * f + 2 * h  # wq wk wv wo, w1 w3 w2, two RmsNorm weights
    return FP32 * (v * h + n * per_layer + h + h * v)  # embedding, layers, final norm, head


def allreduce(g, nbytes):  # ring AllReduce per device: 2(g-1)/g * S
    return 2 * (g - 1) / g * nbytes


@pytest.fixture(scope="module")
def mlp_run():
    return compare("mlp", DEVICES, planners=(
        "smsg", "recursive_programming", "dynamic_programming", "sharding_propagation",
        "data_parallel"), **MLP)


@pytest.fixture(scope="module")
def llama_run():
    return compare("llama", DEVICES, score_rows=False, planners=(
        "smsg", "recursive_programming", "sharding_propagation", "data_parallel"), **LLAMA)


def rows(run):
    return {r["planner"]: r for r in run["rows"]}


@pytest.mark.parametrize("which", ["mlp_run", "llama_run"])
def test_every_mindspore_planner_compiles(which, request):
    run = request.getfixturevalue(which)
    by = rows(run)
    for name, row in by.items():
        assert row["ok"], f"{name}: {row['error']}"
        assert row["planning_seconds"] > 0
        assert row["strategies"], f"{name}: no strategy read back"


@pytest.mark.parametrize("which,param_bytes", [("mlp_run", mlp_param_bytes),
                                               ("llama_run", llama_param_bytes)])
def test_data_parallel_only_syncs_gradients(which, param_bytes, request):
    m = rows(request.getfixturevalue(which))["data_parallel"]["measures"]
    total = param_bytes()
    # backward: only the gradient AllReduces over all 8 devices, of exactly the weights' bytes
    assert m["collective_bytes"]["backward"] == {}
    assert m["collective_bytes"]["grad_sync"] == {"AllReduce": pytest.approx(allreduce(8, total))}
    # forward: only the loss's mean (one fp32 scalar) is all-reduced
    assert m["collective_bytes"]["forward"] == {"AllReduce": pytest.approx(allreduce(8, FP32))}
    # weights replicated; Momentum keeps one state tensor per weight
    assert m["memory"]["parameter"] == total
    assert m["memory"]["optimizer"] == total


def test_data_parallel_flops_of_the_mlp(mlp_run):
    m = rows(mlp_run)["data_parallel"]["measures"]
    b = MLP["batch"] // DEVICES
    layers = [(MLP["d_in"], MLP["hidden"]), (MLP["hidden"], MLP["hidden"]),
              (MLP["hidden"], MLP["d_out"])]
    fwd = sum(2 * b * k * n for k, n in layers)
    # backward: dW for every layer and dx for all but the first (the input needs no gradient)
    bwd = 2 * fwd - 2 * b * layers[0][0] * layers[0][1]
    assert m["flops"]["forward"] == fwd
    assert m["flops"]["backward"] == bwd


@pytest.mark.parametrize("which,probe", [("mlp_run", "fc2.matmul"),
                                         ("llama_run", "layers.1.feed_forward.w2.matmul")])
def test_recursive_programming_strategies_read_back(which, probe, request):
    row = rows(request.getfixturevalue(which))["recursive_programming"]
    assert row["strategies"], "get_strategy gave nothing"
    strategy = row["strategies"][probe]
    assert len(strategy) == 2 and all(len(s) == 2 for s in strategy)
    cuts = 1
    for c in strategy[0]:
        cuts *= c
    assert DEVICES % cuts == 0


def test_sharding_propagation_seeds(captured):
    mlp = captured("mlp", **MLP)
    assert batch_parallel_seeds(mlp, DEVICES) == {"fc1.matmul": [[8, 1], [1, 1]]}
    llama = captured("llama", **LLAMA)
    # input_ids -> Reshape (not annotatable) -> Gather(embedding table, ids)
    assert batch_parallel_seeds(llama, DEVICES) == {"gather": [[1, 1], [8]]}


def test_semi_auto_megatron_slices_parameters():
    """fc1 column-parallel [[2,1],[4,1]], fc2 row-parallel [[2,4],[1,4]] on 8 devices: the
    weights are cut 4-way, every other parameter is whole (derived from the strategies)."""
    from smsg_ms.compare import measures
    from smsg_ms.dryrun.runner import run_child

    result = run_child({"job": "planner_compile", "spec": "mlp", "options": MLP,
                        "planner": "semi_auto",
                        "strategies": {"fc1.matmul": [[2, 1], [4, 1]],
                                       "fc2.matmul": [[2, 4], [1, 4]]}}, devices=DEVICES)
    shapes = {p["name"]: p["shape"] for p in result["parameters"] if p["role"] == "parameter"}
    h, d_in, d_out = MLP["hidden"], MLP["d_in"], MLP["d_out"]
    # Dense weights are (out, in): fc1's out rows cut 4-way, fc2's in columns cut 4-way
    assert shapes["fc1.weight"] == [h // 4, d_in] and shapes["fc2.weight"] == [h, h // 4]
    assert result["strategies"]["fc1.matmul"] == [[2, 1], [4, 1]]
    expect = FP32 * (h * d_in // 4 + h + h * h // 4 + h + h * d_out + d_out)
    assert measures.memory(result["parameters"])["parameter"] == expect
    # fc2's reduction dim cut 4-way: its forward partial sums are all-reduced over 4 devices
    fwd = [c for c in result["collectives"] if c["pass"] == "forward" and c["group_size"] == 4
           and c["type"] == "AllReduce"]
    assert len(fwd) == 1 and "fc2" in fwd[0]["scope"]


def test_smsg_fidelity_reported(mlp_run):
    smsg = rows(mlp_run)["smsg"]
    fid = smsg["fidelity"]
    assert fid["inserted"] > 0 and 0 < fid["matched"] <= min(fid["predicted"], fid["inserted"])
    # every collective inserted is counted once: matched + unpredicted = inserted
    unpredicted = sum(int(u.rsplit("x", 1)[1]) for u in fid["unpredicted"])
    assert fid["matched"] + unpredicted == fid["inserted"]


def test_score_reproduces_the_plan_and_ranks_it_first(mlp_run):
    """smsg's search is exact under its model: scoring its own strategies gives the planner's
    predicted step cost, and no other planner's strategies score lower."""
    by = rows(mlp_run)
    mine = by["smsg"]["smsg_score"]
    assert mine["pinned"] > 0 and mine["unknown"] == [] and mine["unavailable"] == []
    assert mine["step_seconds"] == pytest.approx(by["smsg"]["smsg_predicted_seconds"], rel=1e-9)
    for name, row in by.items():
        score = row["smsg_score"]
        assert "step_seconds" in score, f"{name}: {score}"
        assert score["step_seconds"] >= mine["step_seconds"] * (1 - 1e-9), name
    rho = mlp_run["spearman"]
    assert rho is None or -1.0 <= rho <= 1.0


def test_smsg_beats_data_parallel_on_the_mlp(mlp_run):
    """The MLP's weights (and their gradient AllReduce: 2048² of 4 bytes in fc2 alone) dominate a
    batch of 8 rows per device: a plan that slices weights moves fewer bytes than replicating
    them, so smsg's neutral step cost is below data parallel's. (At widths of 128 the launch and
    collective latencies, which the neutral measure does not count, dominate instead, and data
    parallel with its synchronisation hidden under the backward pass is smsg's plan too.)"""
    by = rows(mlp_run)
    assert by["smsg"]["measures"]["comm_bytes"] < by["data_parallel"]["measures"]["comm_bytes"]
    assert by["smsg"]["measures"]["step_seconds"] < by["data_parallel"]["measures"]["step_seconds"]
