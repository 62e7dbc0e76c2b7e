"""Hybrid configurations priced in the Megatron layout (``smsg_ms.score(config=...)``,
``smsg-ms score --config / --configs``) and the ``gpt`` built-in.

Oracles: MindSpore's parallel compiler (the dry-run compiles the plan made from the expansion and
inserts the collectives the cost model predicts: ``check_plan``); the Megatron / mindformers
layout written out by hand from the paper and mindformers 1.9.0's source (expected strategies);
the 1F1B formula ``(m + p − 1)·t + g``, affine in the micro-batch count ``m`` (differences of
scores); and the configuration rules of the issue (one-line reasons).
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

import smsg_ms
from smsg_ms.compare.configs import ConfigError, expand, parse_config
from smsg_ms.compare.score_configs import ShapeScorer, score_csv
from smsg_ms.graph.batch_scale import BatchFamily
from smsg_ms.integration.check import check_plan
from smsg_ms.planner import plan_graph

SMALL = dict(layers=2, seq=64, hidden=128, heads=8, vocab=1024)


def test_gpt_head_tied_to_embedding_and_plan_passes_check(captured):
    graph = captured("gpt", batch=8, **SMALL)
    gather = next(op for op in graph.ops if op.type == "Gather")
    head = next(op for op in graph.ops if op.prim_path == "head.lm_head")
    assert gather.inputs[0] == head.inputs[1] == "embedding_weight"
    assert graph.tensors["embedding_weight"].shape == (1024, 128)
    plan = plan_graph(graph, 8, network="gpt", options=dict(SMALL, batch=8))
    report = check_plan(plan, [0])
    assert report.ok, [r.error for r in report.ranks]


def test_parser_is_strict():
    c = parse_config("dp=2,tp=4,pp=1,micro_batch=1,global_batch=8,recompute=true")
    assert (c.dp, c.tp, c.pp, c.micro_batch, c.global_batch, c.recompute,
            c.optimizer_shard) == (2, 4, 1, 1, 8, True, False)
    for bad, says in [("dp=2,tp=4,pp=1,micro_batch=1", "lacks global_batch"),
                      ("dp=2,tp=4,pp=1,micro_batch=1,global_batch=8,dp=2", "twice"),
                      ("dp=2,tp=4,pp=1,micro_batch=1,global_batch=8,zz=1", "unknown"),
                      ("dp=-2,tp=4,pp=1,micro_batch=1,global_batch=8", "positive integer"),
                      ("dp=2,tp=4,pp=1,micro_batch=1,global_batch=8,recompute=maybe",
                       "true or false"),
                      ("dp=2;tp=4", "dp wants a positive integer, got '2;tp=4'"),
                      ("dp=2,tp", "not key=value")]:
        with pytest.raises(ConfigError, match=says):
            parse_config(bad)


@pytest.mark.parametrize("text, says", [
    ("dp=2,tp=4,pp=2,micro_batch=1,global_batch=8", "not the device count 8"),
    ("dp=1,tp=8,pp=1,micro_batch=1,global_batch=8", None),
    ("dp=8,tp=1,pp=1,micro_batch=3,global_batch=8", "not a multiple of micro_batch·dp"),
    ("dp=4,tp=1,pp=2,micro_batch=2,global_batch=8", "1 micro-batches for pp=2"),
])
def test_invalid_configurations_give_a_reason(text, says):
    config = parse_config(text)
    if says is None:
        config.validate(devices=8, heads=8, layers=2, vocab=1024)
        with pytest.raises(ConfigError, match="does not divide the 12 attention heads"):
            config.validate(heads=12)
        return
    with pytest.raises(ConfigError, match=says):
        config.validate(devices=8, heads=8, layers=2, vocab=1024)


def test_llama_expansion_is_mindformers_layout(captured):
    """Expected strategies from mindformers 1.9.0 ``llama_layer.py`` / ``llama_transformer.py``
    with dp=2, mp=4 (its Linear weights are ``(out, in)`` with ``transpose_b``; the built-in
    llama's are ``(in, out)``, so the weight's cuts swap): wq/wk/wv/w1/w3 ``((dp,1),(mp,1))`` →
    ``((2,1),(1,4))``; wo/w2 ``((dp,mp),(1,mp))`` → ``((2,4),(4,1))``; the attention
    BatchMatMuls and softmax ``(dp,mp,1,1)``; lm_head ``((dp,1),(mp,1))`` → ``((2,1),(1,4))``;
    the embedding ``((mp,1),(dp,1))`` on 1-D ids → ``((4,1),(2,))``; around them (2-D
    tokens here, 3-D there): norms ``(dp,1)`` with the weight whole, residual Adds
    ``((dp,1),(dp,1))``, SiLU and the gate Mul ``(dp,mp)``, the head-splitting transpose
    ``(dp,1,mp,1)``, the merging one and the score scale ``(dp,mp,1,1)``."""
    graph = captured("llama", batch=4, **{k: v for k, v in SMALL.items() if k != "vocab"})
    got = {graph.ops[i].prim_path: s for i, (_, s) in expand(graph, 2, 4).items()
           if not graph.ops[i].prim_path.startswith("layers.1.")}
    col, row, att = ((2, 1), (1, 4)), ((2, 4), (4, 1)), ((2, 4, 1, 1), (2, 4, 1, 1))
    assert got == {"gather": ((4, 1), (2,)),
                   "layers.0.attention.wq.matmul": col, "layers.0.attention.wk.matmul": col,
                   "layers.0.attention.wv.matmul": col, "layers.0.attention.wo.matmul": row,
                   "layers.0.attention.qk": att, "layers.0.attention.pv": att,
                   "layers.0.attention.softmax": ((2, 4, 1, 1),),
                   "layers.0.feed_forward.w1.matmul": col, "layers.0.feed_forward.w3.matmul": col,
                   "layers.0.feed_forward.w2.matmul": row, "lm_head.matmul": col,
                   "layers.0.attention_norm.norm": ((2, 1), (1,)),
                   "layers.0.ffn_norm.norm": ((2, 1), (1,)), "norm_out.norm": ((2, 1), (1,)),
                   "layers.0.add_attn": ((2, 1), (2, 1)), "layers.0.add_ffn": ((2, 1), (2, 1)),
                   "layers.0.feed_forward.silu": ((2, 4),),
                   "layers.0.feed_forward.mul": ((2, 4), (2, 4)),
                   "layers.0.attention.transpose": ((2, 1, 4, 1),),
                   "layers.0.attention.merge_transpose": ((2, 4, 1, 1),),
                   "layers.0.attention.scale": ((2, 4, 1, 1), ())}


@pytest.mark.parametrize("spec", ["llama", "gpt"])
def test_expansion_compiles_with_predicted_collectives(spec):
    """The plan made from dp=2, tp=4 passes MindSpore's compiler with every compared collective
    equal in count and bytes to the cost model's prediction."""
    options = dict(SMALL) if spec == "gpt" else {k: v for k, v in SMALL.items() if k != "vocab"}
    result = smsg_ms.score(spec, 8, config="dp=2,tp=4,pp=1,micro_batch=2,global_batch=4",
                           plan=True, **options)
    plan = result["plan"]
    assert plan.strategies["layers.0.attention.wq.matmul"] == [[2, 1], [1, 4]]
    assert plan.strategies["layers.0.attention.wo.matmul"] == [[2, 4], [4, 1]]
    assert result["step_seconds"] == pytest.approx(plan.totals["step_seconds"], rel=1e-12)
    report = check_plan(plan, [0])
    assert report.ok, [(r.error, [row for row in r.rows if not row.ok]) for r in report.ranks]


def test_micro_batches_enter_as_the_1f1b_formula(captured, capture_of):
    """``(m + p − 1)·t + g`` is affine in ``m``: equal steps of ``m`` give equal steps of the
    score, the slope (one slowest-stage micro-step) is the same for every ``m``."""
    scorer = ShapeScorer("gpt", options=dict(SMALL))
    scorer.family = BatchFamily(capture_of("gpt", **SMALL))   # session captures (score_fast)
    for pp in (1, 2):
        dp = 2 if pp == 1 else 1
        steps = [scorer.score(parse_config(f"dp={dp},tp=4,pp={pp},micro_batch=1,"
                                           f"global_batch={m * dp}"))["step_seconds"]
                 for m in (2, 4, 6)]
        assert steps[2] - steps[1] == pytest.approx(steps[1] - steps[0], rel=1e-9)
        assert steps[1] > steps[0] > 0
        if pp == 1:
            # one micro-batch is priced by plan_graph's single-stage total, not the formula:
            # with m ≥ 2 MindSpore synchronises the accumulated gradients after the last
            # micro-batch (the line m·t + g), with m = 1 it overlaps them with the backward
            # pass, so the single step lies between t (all hidden) and t + g (none hidden)
            one = scorer.score(parse_config("dp=2,tp=4,pp=1,micro_batch=1,global_batch=2"))
            slope = (steps[1] - steps[0]) / 2          # t: per micro-batch (m: 2 → 4)
            g = steps[0] - 2 * slope
            assert g > 0
            assert slope * (1 - 1e-9) <= one["step_seconds"] <= (slope + g) * (1 + 1e-9)
    # recompute adds forward work, never removes any
    base = scorer.score(parse_config("dp=1,tp=4,pp=2,micro_batch=1,global_batch=4"))
    rc = scorer.score(parse_config("dp=1,tp=4,pp=2,micro_batch=1,global_batch=4,recompute=1"))
    assert rc["step_seconds"] > base["step_seconds"]
    assert rc["memory_bytes"] < base["memory_bytes"]


def test_shallow_capture_stretched_equals_full_depth():
    """A 4-block capture with its middle block repeated (``ShapeScorer.depth``, what
    ``scripts/bench_measured.py`` uses) prices the 6-block network as its own full-depth capture
    does (oracle: the full capture), pipelined and with recompute / optimizer sharding."""
    full = ShapeScorer("gpt", options=dict(SMALL, layers=6))
    shallow = ShapeScorer("gpt", options=dict(SMALL, layers=4), depth=6)
    for text in ("dp=2,tp=2,pp=2,micro_batch=1,global_batch=8",
                 "dp=1,tp=4,pp=3,micro_batch=2,global_batch=8,recompute=1,optimizer_shard=1"):
        want = full.score(parse_config(text))
        got = shallow.score(parse_config(text))
        assert got["step_seconds"] == pytest.approx(want["step_seconds"], rel=1e-9)
        assert got["memory_bytes"] == pytest.approx(want["memory_bytes"], rel=1e-9)
    with pytest.raises(ConfigError, match="4 to"):
        ShapeScorer("gpt", options=dict(SMALL, layers=4), depth=3)


def test_csv_rows_scored_and_errors_kept():
    text = ("devices,global_batch,micro_batch,tp,dp,pp,layers,name\n"
            "8,8,1,4,2,1,,a\n"
            "8,8,1,4,2,2,,b\n"
            "8,8,1,4,1,2,4,c\n"
            "16,16,1,16,1,1,,d\n"
            "8,8,x,4,2,1,,e\n")
    out = io.StringIO()
    rows, errors = score_csv("gpt", io.StringIO(text), out, **SMALL)
    got = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert (rows, errors) == (5, 3)
    assert [r["name"] for r in got] == list("abcde")
    assert list(got[0]) == ["devices", "global_batch", "micro_batch", "tp", "dp", "pp", "layers",
                            "name", "step_seconds", "error"]
    assert float(got[0]["step_seconds"]) > 0 and got[0]["error"] == ""
    assert float(got[2]["step_seconds"]) > 0 and got[2]["error"] == ""
    assert got[1]["step_seconds"] == "" and "not the device count 8" in got[1]["error"]
    assert "does not divide the 8 attention heads" in got[3]["error"]
    assert "micro_batch wants a positive integer" in got[4]["error"]
    with pytest.raises(ConfigError, match="lacks the column"):
        score_csv("gpt", io.StringIO("devices,tp\n8,1\n"), io.StringIO(), **SMALL)


def test_csv_header_of_a_spreadsheet_export_is_read():
    """A byte-order mark and blanks around the column names (a spreadsheet's CSV export) name
    the same columns: the row is priced as the plain header's row is."""
    plain = io.StringIO()
    score_csv("gpt", io.StringIO("devices,global_batch,micro_batch,tp,dp,pp\n8,8,1,4,2,1\n"),
              plain, **SMALL)
    exported = io.StringIO()
    rows, errors = score_csv("gpt", io.StringIO("\ufeffdevices , global_batch,micro_batch,tp,"
                                                "dp,pp\n8,8,1,4,2,1\n"), exported, **SMALL)
    assert (rows, errors) == (1, 0)
    assert exported.getvalue() == plain.getvalue()


def test_cli_score_config_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "smsg_ms.cli", "score", "gpt", "--config",
                           "dp=2,tp=4,pp=1,micro_batch=1"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2     # bad input, as argparse's
    assert proc.stderr.strip().splitlines()[-1] == ("smsg-ms: error: configuration lacks "
                                                    "global_batch (see 'smsg-ms score --help')")


def test_mindformers_llama_roles_found(captured):
    """On mindformers 1.9.0 ``LlamaForCausalLM`` (Linear with ``transpose_b``, token reshapes
    around each MatMul, a decomposed RmsNorm) the expansion writes the strategies of its
    ``shard()`` calls for dp=2, mp=4 (``llama_transformer.py``: wq/wk/wv ``((dp,1),(mp,1))``, wo
    ``((dp,mp),(1,mp))``, the attention BatchMatMuls ``(dp,mp,1,1)``; ``llama_layer.py``: w1/w3
    ``((dp,1),(mp,1))``, w2 ``((dp,mp),(1,mp))``, the embedding ``((mp,1),(dp,1))``;
    ``llama.py``: lm_head ``((dp,1),(mp,1))``)."""
    pytest.importorskip("mindformers")
    graph = captured("mf-llama", layers=1, hidden=256, heads=8, ffn=512, seq=64, batch=4,
                     vocab=1024, dtype="float32")
    got = {graph.ops[i].prim_path: s for i, (role, s) in expand(graph, 2, 4).items()
           if graph.ops[i].type in ("MatMul", "BatchMatMul", "Gather")}
    col, row, att = ((2, 1), (4, 1)), ((2, 4), (1, 4)), ((2, 4, 1, 1), (2, 4, 1, 1))
    layer = "model.layers.0."
    assert got == {"model.tok_embeddings.gather": ((4, 1), (2, 1)),
                   layer + "attention.wq.matmul": col, layer + "attention.wk.matmul": col,
                   layer + "attention.wv.matmul": col, layer + "attention.wo.matmul": row,
                   layer + "attention.batch_matmul_q_k": att,
                   layer + "attention.batch_matmul": att,
                   layer + "feed_forward.w1.matmul": col, layer + "feed_forward.w3.matmul": col,
                   layer + "feed_forward.w2.matmul": row, "lm_head.matmul": col}
    # and the plan made from it compiles with the collectives the cost model predicts
    result = smsg_ms.score("mf-llama", 8, config="dp=2,tp=4,pp=1,micro_batch=2,global_batch=4",
                           plan=True, layers=1, hidden=256, heads=8, ffn=512, seq=64,
                           vocab=1024, dtype="float32")
    report = check_plan(result["plan"], [0])
    assert report.ok, [(r.error, [row for row in r.rows if not row.ok]) for r in report.ranks]


def test_sends_between_stages_cross_the_node(capture_of):
    """A stage of 8 devices fills a node of the ``dgx-a100`` preset, so each Send/Receive between
    two stages crosses the node boundary (ranks r and r + 8) and is priced on the inter-node
    level. Oracle, by hand: only that level's bandwidth differs between the two machines, dp = 1
    leaves no gradient synchronisation across nodes, so the steps differ by the transfers of the
    slowest stage: ``(m + p − 1) = 5`` slots × 2 transfers (both stages are end stages) of the
    boundary activation, 1 sample × 64 tokens × 128 hidden × 4 bytes (float32, replicated over
    the tensor-parallel group: mindformers' (dp, 1) layout), at ``1/(B/2) − 1/B = 1/B`` s/byte;
    plus, once per step, the embedding table tied to the head on the other stage: its slice
    (1024 vocab × 128 hidden / tp 8 × 4 bytes) Sent forward and its gradient Received back
    (MindSpore's ``HandleSharedParameter``, ``tests/test_pipeline_tied_stages.py``)."""
    from dataclasses import replace

    from smsg_ms.cost.hardware import get_hardware

    base = get_hardware("dgx-a100")
    inter = base.levels[-1]
    slow = replace(base, levels=base.levels[:-1] + (replace(inter,
                                                            bandwidth=inter.bandwidth / 2),))
    text = "dp=1,tp=8,pp=2,micro_batch=1,global_batch=4"
    steps = []
    for machine in (base, slow):
        scorer = ShapeScorer("gpt", hardware=machine, options=dict(SMALL))
        scorer.family = BatchFamily(capture_of("gpt", **SMALL))
        steps.append(scorer.score(parse_config(text))["step_seconds"])
    activation, table = 1 * 64 * 128 * 4, 1024 * 128 // 8 * 4
    assert steps[1] - steps[0] == pytest.approx((5 * 2 * activation + 2 * table)
                                                / inter.bandwidth, rel=1e-6)


def test_recompute_reruns_the_decoder_blocks_only(capture_of):
    """``recompute=1`` re-spends the forward of every decoder block, not of the embedding nor of
    the head and loss (mindformers recomputes its decoder layers; Megatron-DeepSpeed checkpoints
    only its transformer layers). Oracle by differences: one block more (``depth`` 5 against 4,
    the same capture) adds ``m·(f + b)`` without recompute and ``m·(2f + b)`` with it, which
    gives one block's forward ``f``; recompute then adds ``m·4·f`` to the 4-block network."""
    options = dict(SMALL, layers=4)
    steps = {}
    for depth in (4, 5):
        scorer = ShapeScorer("gpt", options=options, depth=depth)
        scorer.family = BatchFamily(capture_of("gpt", **options))
        for rc in (0, 1):
            text = f"dp=2,tp=2,pp=1,micro_batch=1,global_batch=4,recompute={rc}"
            steps[depth, rc] = scorer.score(parse_config(text))["step_seconds"]
    m = 2
    forward = ((steps[5, 1] - steps[4, 1]) - (steps[5, 0] - steps[4, 0])) / m
    assert forward > 0
    assert steps[4, 1] - steps[4, 0] == pytest.approx(m * 4 * forward, rel=1e-6)
