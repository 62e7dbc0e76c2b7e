"""Conv2D, BatchNorm, MaxPool/AvgPool, Concat/Split/StridedSlice, (Sparse)SoftmaxCrossEntropyWithLogits
families against MindSpore's parallel compiler (dry-run).

Collectives: one bank of cases compiled once on 8 devices, compared per case and phase as in
``test_cost_vs_mindspore.py``. Rejections: ``CostModel.check`` raises exactly when the compile
refuses the strategy (one compile per case, the other operators at MindSpore's default).
Differences kept on purpose are in docs/known-differences.md (D6).
"""
from __future__ import annotations

import pytest

from test_cost_vs_mindspore import assert_bank_matches

from smsg_ms.cost.api import StrategyError
from smsg_ms.cost.model import CostModel
from smsg_ms.dryrun import runner as dryrun

SPEC = "smsg_ms.networks.testnets:build"
DEVICES = 8


def act(*shape):
    return ["act", list(shape)]


def param(*shape):
    return ["param", list(shape)]


def state(*shape):
    return ["state", list(shape)]


CONV3 = {"out_channel": 16, "kernel_size": 3, "pad_mode": "same"}
CONV_PAD = {"out_channel": 16, "kernel_size": 3, "pad_mode": "pad", "pad": 1}
CONV2S2 = {"out_channel": 16, "kernel_size": 2, "stride": 2, "pad_mode": "valid"}
BN = {"is_training": True}
BN_INPUTS = [act(8, 16, 8, 8), param(16), param(16), state(16), state(16)]
SPARSE = "SparseSoftmaxCrossEntropyWithLogits"
SPARSE_INPUTS = [act(16, 16), ["index", [16], 16]]  # logits, int labels in [0, 16)

#: (name, type, init, inputs, strategy[, call args]) — one operator per case, valid on 8
#: devices.
CASES = [
    ("conv batch cut", "Conv2D", CONV3, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[8, 1, 1, 1], [1, 1, 1, 1]]),
    ("conv C_in cut", "Conv2D", CONV3, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[2, 4, 1, 1], [1, 4, 1, 1]]),
    ("conv C_out cut", "Conv2D", CONV_PAD, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[2, 1, 1, 1], [4, 1, 1, 1]]),
    ("conv C_in and C_out cut", "Conv2D", CONV_PAD, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[1, 2, 1, 1], [4, 2, 1, 1]]),
    ("conv replicated", "Conv2D", CONV3, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[1, 1, 1, 1], [1, 1, 1, 1]]),
    ("conv H/W cut, kernel = stride", "Conv2D", CONV2S2, [act(8, 8, 16, 16), param(16, 8, 2, 2)],
     [[2, 1, 2, 2], [1, 1, 1, 1]]),
    ("conv pad mode H cut (halo)", "Conv2D", CONV_PAD, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[2, 1, 4, 1], [1, 1, 1, 1]]),
    ("batchnorm N and C cut", "BatchNorm", BN, BN_INPUTS, [[4, 2, 1, 1], [2], [2], [2], [2]]),
    ("batchnorm batch cut", "BatchNorm", BN, BN_INPUTS, [[8, 1, 1, 1], [1], [1], [1], [1]]),
    ("batchnorm H cut", "BatchNorm", BN, BN_INPUTS, [[2, 1, 4, 1], [1], [1], [1], [1]]),
    ("maxpool N, C, H cut", "MaxPool", {"kernel_size": 2, "strides": 2},
     [act(8, 16, 8, 8)], [[2, 2, 2, 1]]),
    ("maxpool same 3/2 batch cut", "MaxPool",
     {"kernel_size": 3, "strides": 2, "pad_mode": "same"}, [act(8, 16, 8, 8)], [[4, 2, 1, 1]]),
    ("avgpool C cut", "AvgPool", {"kernel_size": 2, "strides": 2},
     [act(8, 16, 8, 8)], [[1, 8, 1, 1]]),
    ("concat axis 1, batch cut", "Concat", {"axis": 1}, [act(16, 8), act(16, 24)],
     [[8, 1], [8, 1]]),
    ("concat axis 0, column cut", "Concat", {"axis": 0}, [act(16, 8), act(8, 8)],
     [[1, 8], [1, 8]]),
    ("stridedslice columns, rows cut", "StridedSlice", {}, [act(16, 32)], [[8, 1]],
     [[0, 0], [16, 8], [1, 1]]),
    ("split axis 1, rows cut", "Split", {"axis": 1, "output_num": 2}, [act(16, 32)], [[4, 1]]),
    ("softmax cross entropy batch cut", "SoftmaxCrossEntropyWithLogits", {},
     [act(16, 10), act(16, 10)], [[8, 1], [8, 1]]),
    ("softmax cross entropy partial batch cut", "SoftmaxCrossEntropyWithLogits", {},
     [act(16, 10), state(16, 10)], [[2, 1], [2, 1]]),  # labels without gradient
    ("sparse softmax cross entropy batch cut", SPARSE, {}, SPARSE_INPUTS, [[8, 1], [8]]),
    ("sparse softmax cross entropy replicated", SPARSE, {}, SPARSE_INPUTS, [[1, 1], [1]]),
]

#: (name, phase) the model knowingly gets wrong (docs/known-differences.md); failing when fixed.
KNOWN = {("conv pad mode H cut (halo)", "forward")}  # D6: halo bytes vs exchanged tensor

#: (name, type, init, inputs, strategy) for the rejection test.
REJECTIONS = [
    ("conv padded kernel = stride H cut", "Conv2D",
     {"out_channel": 16, "kernel_size": 2, "stride": 2, "pad_mode": "pad", "pad": 1},
     [act(8, 8, 16, 16), param(16, 8, 2, 2)], [[1, 1, 2, 1], [1, 1, 1, 1]]),
    ("conv C_in cut differs", "Conv2D", CONV3, [act(8, 8, 16, 16), param(16, 8, 3, 3)],
     [[1, 2, 1, 1], [1, 4, 1, 1]]),
    ("conv group 2 C_out cut", "Conv2D", dict(CONV3, group=2),
     [act(8, 8, 16, 16), param(16, 4, 3, 3)], [[1, 1, 1, 1], [2, 1, 1, 1]]),
    ("conv valid kernel > stride W cut", "Conv2D", {"out_channel": 16, "kernel_size": 3,
                                                   "pad_mode": "valid"},
     [act(8, 8, 16, 16), param(16, 8, 3, 3)], [[1, 1, 1, 2], [1, 1, 1, 1]]),
    ("conv same kernel > stride H cut", "Conv2D", CONV3,
     [act(8, 8, 16, 16), param(16, 8, 3, 3)], [[1, 1, 2, 1], [1, 1, 1, 1]]),
    ("maxpool kernel > stride H cut", "MaxPool",
     {"kernel_size": 3, "strides": 2, "pad_mode": "same"}, [act(8, 16, 8, 8)], [[1, 1, 2, 1]]),
    ("maxpool H slice not divisible by stride", "MaxPool", {"kernel_size": 2, "strides": 2},
     [act(8, 16, 8, 8)], [[1, 1, 8, 1]]),
    ("concat axis cut", "Concat", {"axis": 1}, [act(16, 8), act(16, 24)], [[1, 2], [1, 2]]),
    ("stridedslice sliced dimension cut", "StridedSlice", {}, [act(16, 32)], [[1, 2]],
     [[0, 0], [16, 8], [1, 1]]),
    ("split axis cut", "Split", {"axis": 1, "output_num": 2}, [act(16, 32)], [[1, 2]]),
    ("softmax cross entropy class cut", "SoftmaxCrossEntropyWithLogits", {},
     [act(16, 10), act(16, 10)], [[4, 2], [4, 2]]),
    ("sparse softmax cross entropy batch cut 4 of 8", SPARSE, {}, SPARSE_INPUTS, [[4, 1], [4]]),
    ("sparse softmax cross entropy logits cut, labels not", SPARSE, {}, SPARSE_INPUTS,
     [[8, 1], [1]]),
    ("sparse softmax cross entropy two cuts", SPARSE, {}, SPARSE_INPUTS, [[2, 4], [2]]),
    ("sparse softmax cross entropy class cut", SPARSE, {}, SPARSE_INPUTS, [[1, 8], [1]]),
]
#: rejection cases where the model knowingly differs; failing when they agree.
#: D8: MindSpore accepts a class cut by the device count and ignores it (only dimension 0 enters
#: BatchParallelInfo's tensor map: the logits are gathered); the model refuses it.
KNOWN_REJECTIONS: set = {"sparse softmax cross entropy class cut"}


def net_cases(cases):
    return [{"ops": [{"type": c[1], "init": c[2], "inputs": c[3],
                      "args": c[5] if len(c) > 5 else [], "pack": c[1] == "Concat"}]}
            for c in cases]


def capture_cache(spec: str):
    """``get(cases)``: the capture of ``spec`` built from ``net_cases(cases)``, once per distinct
    network: cases that differ only in their strategy (which the capture does not read) share
    one capture."""
    import json

    from smsg_ms.graph.capture import capture_network

    graphs = {}

    def get(cases):
        key = json.dumps(net_cases(cases), sort_keys=True)
        if key not in graphs:
            graphs[key] = capture_network(spec, cases=net_cases(cases))
        return graphs[key]
    return get


def strategies(cases):
    out = {}
    for i, (_, _, _, ins, strat, *_args) in enumerate(cases):
        out[f"cases.{i}.steps.0.op"] = strat
        for k, inp in enumerate(ins):
            if inp[0] == "act":
                out[f"cases.{i}.steps.0.pre{k}"] = [strat[k], strat[k]]
    return out


def case_op(graph, i: int):
    """The operator of case ``i`` in a capture of a bank (path ``cases.{i}.steps.0.op``)."""
    return next(o for o in graph.ops if o.prim_path == f"cases.{i}.steps.0.op")


def capture_bank(cases):
    """The capture of one network holding ``cases`` (case ``i`` under ``cases.{i}``)."""
    from smsg_ms.graph.capture import capture_network

    return capture_network(SPEC, cases=net_cases(cases))


def compile_job(cases, strats: dict | None = None) -> dict:
    """The dry-run job that compiles the bank of ``cases`` with ``strats`` (primitive path →
    strategy; default: the cases' own, :func:`strategies`)."""
    return {"job": "compile", "spec": SPEC, "options": {"cases": net_cases(cases)},
            "strategies": strategies(cases) if strats is None else strats}


def assert_cases_match(cases, graph, known) -> None:
    """The bank of ``cases`` compiled by MindSpore on ``DEVICES`` devices: its collectives equal
    the model's case by case (``assert_bank_matches``; ``graph``: :func:`capture_bank`)."""
    result = dryrun.run_child(compile_job(cases), devices=DEVICES)
    assert_bank_matches([c[0] for c in cases], result["collectives"], graph,
                        CostModel(graph, DEVICES), strategies(cases), known)


def refused_by_both(graph, case, match: str | None = None) -> str:
    """Assert that the model (``StrategyError`` matching ``match``) and MindSpore's compile both
    refuse ``case`` alone (``graph``: the capture of ``[case]``); MindSpore's error text."""
    with pytest.raises(StrategyError, match=match):
        CostModel(graph, DEVICES).check(case_op(graph, 0), tuple(tuple(s) for s in case[4]))
    with pytest.raises(dryrun.DryRunError) as info:
        dryrun.run_child(compile_job([case]), devices=DEVICES)
    assert info.value.kind not in ("timeout", "crash")
    return str(info.value)


@pytest.fixture(scope="module")
def bank():
    return capture_bank(CASES)


def test_collectives_equal_mindspore(bank):
    assert_cases_match(CASES, bank, KNOWN)


def test_conv_cin_cut_allreduce_derivation(bank):
    """Independent derivation: C_in cut 4 of a (8,8,16,16) * (16,8,3,3) 'same' convolution
    leaves partial sums of the local output (8/2, 16, 16, 16) fp32 = 65536 bytes on 4 devices;
    FLOPs per device 2·4·16·16·16·2·3·3 forward."""
    op = case_op(bank, 1)
    cost = CostModel(bank, DEVICES).check(op, ((2, 4, 1, 1), (1, 4, 1, 1)))
    fwd = [(c.kind, c.group, int(c.full_bytes)) for c in cost.collectives if c.phase == "forward"]
    assert fwd == [("AllReduce", 4, 4 * 16 * 16 * 16 * 4)]
    assert cost.flops_fwd == 2 * 4 * 16 * 16 * 16 * 2 * 3 * 3


def test_conv_halo_bytes_derivation(bank):
    """H cut 4 of a 3×3 stride-1 convolution: each device sends kernel − stride = 2 rows of its
    local (8/2, 8, ·, 16) slice, 2·4·8·16 fp32 = 4096 bytes, over the 8 devices of the stage."""
    i = next(k for k, c in enumerate(CASES) if c[0] == "conv pad mode H cut (halo)")
    op = case_op(bank, i)
    cost = CostModel(bank, DEVICES).check(op, ((2, 1, 4, 1), (1, 1, 1, 1)))
    halo = [(c.kind, c.group, int(c.full_bytes), c.phase) for c in cost.collectives
            if c.kind == "NeighborExchangeV2"]
    assert halo == [("NeighborExchangeV2", 8, 2 * 4 * 8 * 16 * 4, "forward")]


def test_sparse_loss_batch_cut_derivation(bank):
    """Batch cut 8 of SparseSoftmaxCrossEntropyWithLogits on (16, 16) logits: each device holds
    2 samples, averages its own losses, no collective (BatchParallelInfo); forward FLOPs
    8 per local logit = 8·2·16, backward 6 per local logit for the one input with a gradient."""
    i = next(k for k, c in enumerate(CASES) if c[0] == "sparse softmax cross entropy batch cut")
    op = case_op(bank, i)
    cost = CostModel(bank, DEVICES).check(op, ((8, 1), (8,)))
    assert cost.collectives == []
    assert cost.flops_fwd == 8 * 2 * 16 and cost.flops_bwd == 6 * 2 * 16
    with pytest.raises(StrategyError, match="device count"):
        CostModel(bank, DEVICES).check(op, ((2, 1), (2,)))


@pytest.fixture(scope="module")
def rejection_bank():
    return capture_bank(REJECTIONS)


@pytest.mark.parametrize("i", range(len(REJECTIONS)), ids=[c[0] for c in REJECTIONS])
def test_check_raises_iff_mindspore_rejects(rejection_bank, i):
    name = REJECTIONS[i][0]
    op = case_op(rejection_bank, i)
    strat = REJECTIONS[i][4]
    try:
        CostModel(rejection_bank, DEVICES).check(op, tuple(tuple(s) for s in strat))
        model_rejects = None
    except StrategyError as exc:
        model_rejects = str(exc)
    try:  # the case alone: a smaller compile
        dryrun.run_child(compile_job(REJECTIONS[i:i + 1]), devices=DEVICES)
        ms_rejects = None
    except dryrun.DryRunError as exc:
        if exc.kind in ("timeout", "crash"):
            raise
        ms_rejects = str(exc).splitlines()[0]
    if name in KNOWN_REJECTIONS:
        assert (model_rejects is None) != (ms_rejects is None), f"{name} now agrees: drop KNOWN"
        return
    assert (model_rejects is None) == (ms_rejects is None), (
        f"model: {model_rejects or 'accepts'}; MindSpore: {ms_rejects or 'accepts'}")
