"""What ``explain`` shows: the symbolic cost the planner stores per decision (checked against
hand-derived FLOPs and bytes), per-operator times that add up to the step, block instances
folded per primitive, a legend of each einsum's letters, and lines that fit 80 columns without
splitting a number from its unit or a symbol of a formula."""
from __future__ import annotations

import io
import math
import re
from pathlib import Path

import pytest
from rich.console import Console

from integration_support import MLP_OPTIONS
from smsg_ms.integration.plan_io import load_plan
from smsg_ms.plan import OpDecision, Plan
from smsg_ms.planner import plan_graph
from smsg_ms.report.explain_view import (explained_decisions, legend_items, print_explain,
                                         time_order)
from smsg_ms.report.tables import print_summary, summary_rows, totals_rows
from smsg_ms.report.units import fmt_bytes, fmt_seconds, fold_formula

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mlp_plan(captured):
    graph = captured("mlp", **MLP_OPTIONS)
    return graph, plan_graph(graph, 8, network="mlp", options=MLP_OPTIONS)


def test_matmul_symbolic_terms_match_hand_derivation(mlp_plan):
    """A MatMul (m, k) x (k, n) with in_strategy ((c_m, c_k), (c_k, c_n)) does 2·m·k·n /
    (c_m·c_k·c_n) FLOPs forward per device and holds k·n / (c_k·c_n) fp32 weight elements."""
    graph, plan = mlp_plan
    matmuls = [d for d in plan.decisions if d.op_type == "MatMul"]
    assert matmuls
    for d in matmuls:
        op = next(o for o in graph.ops if o.prim_path == d.name)
        a, b = (graph.tensors[t].shape for t in op.inputs[:2])
        sa, sb = d.strategy
        if op.attrs.get("transpose_a"):
            a, sa = a[::-1], sa[::-1]
        if op.attrs.get("transpose_b"):
            b, sb = b[::-1], sb[::-1]
        (m, k), (k2, n) = a, b
        (cm, ck), (_, cn) = sa, sb
        assert k == k2
        sym = plan.symbolic_of(d)
        terms = {t["term"]: t for t in sym["terms"]}
        assert terms["FLOPs forward"]["value"] == 2 * m * k * n / (cm * ck * cn)
        assert terms["FLOPs forward"]["unit"] == "FLOPs"
        assert terms["memory: parameter"]["value"] == 4 * k * n / (ck * cn)
        assert sym["D"] == 8
        assert {sym["cuts"][f"c_{ch}"] for ch in "mkn"} <= {1, 2, 4, 8}


def test_decision_seconds_add_up_to_the_step(mlp_plan):
    _, plan = mlp_plan
    total = sum(d.seconds for d in plan.decisions)
    assert math.isclose(total, plan.totals["step_seconds"], rel_tol=1e-9)


def test_no_pure_data_parallel_baseline_when_batch_does_not_divide(captured):
    """Batch 8 on 16 devices: MindSpore's batch-parallel plan cannot split the data inputs."""
    options = dict(MLP_OPTIONS, batch=8)
    graph = captured("mlp", **options)
    plan = plan_graph(graph, 16, network="mlp", options=options)
    assert plan.totals["data_parallel_step_seconds"] is None
    assert plan.totals["relative_to_data_parallel"] is None


def _decision(name, strategy, seconds=1e-3):
    return OpDecision(name=name, op_type="MatMul", strategy=strategy, seconds=seconds,
                      block="layers.*" if name.startswith("layers.") else None)


def _four_layers() -> Plan:
    """Four instances of a two-primitive block; ``b`` differs in the last instance."""
    same, other = [[2, 1], [1, 4]], [[8, 1], [1, 1]]
    decisions = [_decision("embed", [[8, 1]])]
    for i in range(3):
        decisions += [_decision(f"layers.{i}.a", same), _decision(f"layers.{i}.b", same)]
    decisions += [_decision("layers.3.a", same, 2e-3), _decision("layers.3.b", other),
                  _decision("head", other)]
    return Plan(network="t", fingerprint="f", devices=8, options={}, input_shapes=[[6, 4]],
                hardware="ascend910b", decisions=decisions)


def test_block_instances_fold_per_primitive():
    """``a`` has one strategy in all four instances: shown once (the first instance's decision)
    with each instance's time; ``b`` differs in layers.3: shown for layers.0–2 and layers.3."""
    plan = _four_layers()
    rows = explained_decisions(plan)
    assert [r.name for r in rows if r.decision is not None] == [
        "embed", "layers.*.a", "layers.0–2.b", "layers.3.b", "head"]
    heading = [r.name for r in rows if r.decision is None]
    assert len(heading) == 1 and "4 instances (layers.0–3)" in heading[0]
    assert "1 of 2 primitives" in heading[0] and heading[0].endswith("per instance: b")
    shown = {r.name: r for r in rows if r.decision is not None}
    assert shown["layers.*.a"].decision.name == "layers.0.a"
    assert shown["layers.*.a"].instances == "layers.0–2 1.000 ms (shown) · layers.3 2.000 ms"
    assert shown["layers.0–2.b"].instances is None      # same time in each
    assert shown["layers.3.b"].instances is None
    assert [r.name for r in explained_decisions(plan, show_all=True)] == [
        d.name for d in plan.decisions]


def test_an_out_strategy_in_one_instance_is_its_own_strategy():
    """Sequence parallel in layers.3 only: ``a`` has the same in_strategy everywhere, but an
    out_strategy in layers.3 makes it another strategy (MatMul ``shard(in, out)``), so ``a`` is
    shown for layers.0–2 and for layers.3, not folded into one entry."""
    from dataclasses import replace

    plan = _four_layers()
    plan = replace(plan, out_strategies={"layers.3.a": [[8, 1]]})
    names = [r.name for r in explained_decisions(plan) if r.decision is not None]
    assert "layers.0–2.a" in names and "layers.3.a" in names and "layers.*.a" not in names


def test_plan_table_names_the_instances_of_each_strategy():
    rows = summary_rows(_four_layers())
    assert rows == [("(outside blocks)", "embed", "(8,1)"),
                    ("(outside blocks)", "head", "(8,1)(1,1)"), ("layers.*", "a", "(2,1)(1,4)"), ("layers.0–2", "b (x3)", "(2,1)(1,4)"),
                    ("layers.3", "b", "(8,1)(1,1)")]


def test_missing_data_parallel_baseline_says_why():
    """Batch 6 on 8 devices: the batch-parallel plan cannot cut the data input."""
    plan = _four_layers()
    plan.totals = {"step_seconds": 1e-3, "data_parallel_step_seconds": None,
                   "memory_bytes": 3 * 2 ** 30, "parameter_bytes": 2 ** 20}
    rows = dict(totals_rows(plan))
    assert rows["pure data parallel: step"] == "n/a: batch 6 not divisible by 8 devices"
    # one byte unit per table: 1 MiB = 1/1024 GiB = 0.0009765625 GiB, 6 decimals at most
    assert rows["memory per device"] == "3.000 GiB" and rows["parameters"] == "0.000977 GiB"


@pytest.mark.parametrize("seconds, text", [(2.7771e-3, "2.777 ms"), (5.9524e-4, "595.2 µs"),
                                           (4.1e-8, "41.00 ns"), (1.5, "1.500 s"), (0, "0 s")])
def test_seconds_get_a_unit_per_value(seconds, text):
    assert fmt_seconds(seconds) == text


def test_bytes_in_a_given_unit():
    assert fmt_bytes(4096, ("MiB", 2 ** 20)) == "0.003906 MiB"     # 4096 / 2**20
    assert fmt_bytes(189.6 * 2 ** 20) == "189.6 MiB" and fmt_bytes(0) == "0"


def test_time_line_follows_the_terms_order():
    """Gather: the terms list the forward ReduceScatter before the backward AllGather."""
    d = OpDecision(name="gather", op_type="Gather", strategy=[[4, 2], [1]], symbolic="g",
                   breakdown={"AllGather": 1.0, "ReduceScatter": 1.0, "compute": 1.0,
                              "grad_sync": 1.0, "redistribution": 1.0, "parameter_bytes": 8.0})
    terms = ["FLOPs backward", "forward ReduceScatter of out", "backward AllGather of out",
             "grad sync AllReduce of weight in0", "memory: parameter"]
    plan = Plan(network="t", fingerprint="f", devices=8, options={}, input_shapes=[],
                hardware="ascend910b", decisions=[d],
                symbolic={"g": {"terms": [{"term": t, "unit": "bytes", "formula": "a",
                                           "value": 1.0} for t in terms]}})
    assert time_order(plan, d) == ["compute", "ReduceScatter", "AllGather", "grad_sync",
                                   "redistribution"]


def test_legend_names_each_letter_from_the_graph(mlp_plan):
    """Each MatMul letter (m, k, n of (m, k) x (k, n); the weight stored (n, k) under
    transpose_b) names its tensor axes, its size from the graph's tensor shapes and its cut from
    the strategy."""
    graph, plan = mlp_plan
    matmuls = [d for d in plan.decisions if d.op_type == "MatMul"]
    assert matmuls
    for d in matmuls:
        op = next(o for o in graph.ops if o.prim_path == d.name)
        assert not op.attrs.get("transpose_a")
        (m, k), b = (graph.tensors[t].shape for t in op.inputs[:2])
        (cm, ck), sb = d.strategy
        operands, items = legend_items(plan.symbolic_of(d))
        if op.attrs.get("transpose_b"):
            (n, _), (cn, _) = b, sb
            assert operands == "in0 mk, in1 nk = weight, out mn"
            axes_k, axes_n = "in0[1] in1[1]", "in1[0] out[1]"
        else:
            (_, n), (_, cn) = b, sb
            assert operands == "in0 mk, in1 kn = weight, out mn"
            axes_k, axes_n = "in0[1] in1[0]", "in1[1] out[1]"
        assert items == [f"m = in0[0] out[0]: {m}, cut {cm}", f"k = {axes_k}: {k}, cut {ck}",
                         f"n = {axes_n}: {n}, cut {cn}"]


@pytest.mark.parametrize("width", [8, 12, 20, 27, 40])
def test_formulas_fold_after_an_operator(width):
    plan = load_plan(ROOT / "strategies" / "llama-8dev.plan.json")
    formulas = {t["formula"] for s in plan.symbolic.values() for t in s["terms"]}
    formulas.add("8*a*b*m*n*(c_k - 1)/(c_a*c_b*c_k*c_m*c_n) + a**2")
    for f in sorted(formulas):
        lines = fold_formula(f, width)
        assert re.sub(r"\s", "", "".join(lines)) == re.sub(r"\s", "", f)
        assert all(line[-1] in "*/+-" for line in lines[:-1]), lines
        assert not any(line.endswith("**") or line.startswith("*") for line in lines), lines
        assert all(len(line) <= width or not re.search(r"[*/+-]", line[:-1]) for line in lines)


UNIT = r"(?:s|ms|µs|ns|B|KiB|MiB|GiB|FLOPs)"


def _render(print_fn, plan, width=80) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_fn(plan, console)
    return console.export_text()


def test_explain_and_plan_fit_80_columns_without_splitting_a_value():
    plan = load_plan(ROOT / "strategies" / "llama-8dev.plan.json")
    for text in (_render(print_explain, plan), _render(print_summary, plan)):
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines), max(lines, key=len)
        assert not [(a, b) for a, b in zip(lines, lines[1:])
                    if re.search(r"\d$", a) and re.match(rf"\s*{UNIT}\b", b)
                    and not re.match(r"\s*FLOPs (forward|backward)", b)]
        assert "0.000" not in text
    explain = _render(print_explain, plan)
    # every operator entry (between blank lines) uses one byte unit
    for entry in explain.split("\n\n"):
        assert len(set(re.findall(r"\d (KiB|MiB|GiB)\b", entry))) <= 1, entry
    head = explain.splitlines()[0]
    assert head.startswith("llama: 8 devices") and f"plan {plan.content_hash[:12]}" in head
    summary = _render(print_summary, plan)
    totals = summary[summary.index("predicted totals"):]
    assert len(set(re.findall(r"\d (KiB|MiB|GiB) ", totals))) == 1
    title = next(line for line in totals.splitlines() if "predicted totals" in line)
    assert "(per device, one training step)" in title


def test_default_llama_folds_its_layers():
    """The 2-layer LLaMA reference plan: both layers take the same strategies (since the
    optimizer update is priced per replica, add_ffn no longer differs in layers.1), so every
    primitive folds to one ``layers.*`` entry (an instance that differs: the sequence-parallel
    test below)."""
    plan = load_plan(ROOT / "strategies" / "llama-8dev.plan.json")
    text = _render(print_explain, plan)
    assert "layers.*.attention.wq.matmul" in text and "layers.1.attention" not in text
    assert "layers.*.add_ffn  Add  (4,1)(4,1)" in text
    assert "layers.0." not in text and "layers.1." not in text
    assert "letters: m = in0[0] out[0]: 4096, cut 4" in text


def test_explain_shows_degrees_and_runner_up():
    """#17 item 7: the chosen degrees of a pipelined reference plan (2 stages x 2 micro-batches,
    16 devices, plain 1F1B, optimizer sharding off in that file) and a runner-up line with its
    difference."""
    import io
    import json
    from pathlib import Path

    from rich.console import Console

    from smsg_ms.plan import Plan
    from smsg_ms.report.explain_view import chosen_degrees, print_explain

    path = Path(__file__).parent / "data/plans_before_redesign/llama12-16dev-p2-mb2.plan.json"
    data = json.loads(path.read_text())
    plan = Plan.from_dict(data)
    degrees = chosen_degrees(plan)
    assert degrees["pp"] == 2 and degrees["vp"] == 1 and degrees["micro-batches"] == 2
    assert degrees["recompute"] == "0/12 blocks"        # 12 layers, none recomputed
    plan.pipeline["runner_up"] = {"stages": 4, "micro_batches": 4, "virtual_stages": 2,
                                  "optimizer_level": "level2", "step_seconds": 2.0,
                                  "difference_seconds": 0.5}
    out = io.StringIO()
    print_explain(plan, Console(file=out, width=100))
    text = out.getvalue()
    assert "chosen: dp " in text and "pp 2" in text and "vp 1" in text
    assert "runner-up: pp 4, micro-batches 4, virtual stages 2, optimizer level2" in text


def test_degrees_are_the_dominant_device_matrix_of_the_blocks():
    """#17 item 7: a plan whose degrees are known by construction. Three instances of
    ``layers.*`` on 8 devices: in layers.0 and layers.1 three MatMuls ((4,1),(1,2)) (device
    matrix m4·k1·n2: dp 4, tp 2) and one Add ((4,1),(4,1)) (dp 4 on 4 devices); layers.2 is all
    dp 8 ((8,1),(1,1)); the head outside the blocks is ((1,1),(1,8)). The dominant per instance
    is (4,2), (4,2), (8,1); the one most instances share is dp 4, tp 2. One of the three
    instances recomputed: 1/3 blocks. The data set's layout (1,1) says nothing about dp (the
    token ids of an embedding are not cut)."""
    from smsg_ms.plan import OpDecision, Plan
    from smsg_ms.report.explain_view import chosen_degrees

    def matmul(name, a, b, block="layers.*"):
        cuts = {"c_m": a[0], "c_k": a[1], "c_n": b[1]}
        return OpDecision(name, "MatMul", [list(a), list(b)], block=block,
                          symbolic=f"s{a}{b}"), {f"s{a}{b}": {"cuts": cuts}}

    decisions, symbolic = [], {}
    for i, (a, b) in enumerate([((4, 1), (1, 2)), ((4, 1), (1, 2)), ((8, 1), (1, 1))]):
        for j in range(3):
            d, sym = matmul(f"layers.{i}.w{j}.matmul", a, b)
            decisions.append(d)
            symbolic.update(sym)
        decisions.append(OpDecision(f"layers.{i}.add", "Add", [list(a), list(a)],
                                    block="layers.*"))
    head, sym = matmul("head.matmul", (1, 1), (1, 8), block=None)
    decisions.append(head)
    symbolic.update(sym)
    plan = Plan("toy", "f", 8, {}, [[8, 16]], "a100", decisions, dataset_strategy=[[1, 1]],
                symbolic=symbolic,
                pipeline={"stages": 1, "devices_per_stage": 8,
                          "recompute": {"layers.0": False, "layers.1": True, "layers.2": False}})
    degrees = chosen_degrees(plan)
    assert (degrees["dp"], degrees["tp"]) == (4, 2)
    assert "repeated" not in degrees                     # 4 x 2 = the 8 devices
    assert degrees["recompute"] == "1/3 blocks"
    plan.pipeline = None                                 # a single-stage plan: no record
    assert chosen_degrees(plan)["recompute"] == "0/3 blocks"
    for d in decisions[:8]:                              # layers.0 and 1 become dp 2 x tp 2
        d.strategy[0][0] = 2
        if d.symbolic:
            d.symbolic = "s2"
    plan.symbolic["s2"] = {"cuts": {"c_m": 2, "c_k": 1, "c_n": 2}}
    degrees = chosen_degrees(plan)
    assert (degrees["dp"], degrees["tp"], degrees["repeated"]) == (2, 2, "x2")


def test_totals_say_when_the_gradient_sync_is_hidden_by_overlap():
    """#14 item 4: a single-stage plan whose gradient AllReduces the backward pass hides shows
    ``gradient sync (exposed) 0 s`` and, beside it, the collectives it overlaps: here two
    replicated biases of 512 float32 elements (2 KiB each) and one of 256 (1 KiB), synchronised
    by three AllReduces of 5 KiB in all, none exposed. A pipelined plan synchronises after its
    last micro-batch (no overlap): its row stays as it is."""
    from smsg_ms.plan import OpDecision, Plan
    from smsg_ms.report.tables import totals_rows

    def bias(name, elements):
        sync = {"kind": "AllReduce", "group": 8, "phase": "grad_sync",
                "bytes": 4.0 * elements, "tensor": f"{name}.bias"}
        return OpDecision(name, "BiasAdd", [[8, 1], [1]], collectives=[sync])

    plan = Plan("toy", "f", 8, {}, [[8, 16]], "a100",
                [bias("fc1", 512), bias("fc2", 512), bias("fc3", 256),
                 OpDecision("fc4", "MatMul", [[8, 1], [1, 1]])],
                totals={"step_seconds": 1e-3, "grad_sync": 0.0})
    rows = dict(totals_rows(plan))
    assert rows["gradient sync (exposed)"] == "0 s"
    assert rows["gradient sync, overlapped with backward"] == "3 AllReduces (5.000 KiB)"
    assert "gradient sync" not in rows
    plan.pipeline = {"stages": 2, "micro_batches": 2, "devices_per_stage": 4}
    labels = [label for label, _ in totals_rows(plan)]
    assert "gradient sync, overlapped with backward" not in labels


def test_degrees_by_block_on_a_mixed_plan():
    """#17 item 7: a plan whose blocks take different degrees, known by construction (the
    MatMuls carry their device matrix's cuts, as a plan's symbolic descriptions do). Four
    instances of ``layers.*`` on 8 devices: layers.0 and layers.1 a MatMul ((4,1),(1,2)) (dp 4,
    tp 2) and an attention BatchMatMul ((4,1,2,1),(4,1,1,1)) whose queries' sequence (axis 2)
    is cut 2-way (cp 2); layers.2 and layers.3 a MatMul ((8,1),(1,1)) (dp 8, tp 1), an
    attention BatchMatMul ((8,1,1,1),(8,1,1,1)) (cp 1) and a routed-experts BatchMatMul
    ``layers.i.moe.experts.w1`` ((2,1,1),(4,1,1)) whose stacked weights' expert axis is cut
    4-way (ep 4). The by-block line joins the equal neighbours: ``layers.0–1`` and
    ``layers.2–3``; the plan's line takes the largest ep and cp (4 and 2)."""
    import io

    from rich.console import Console

    from smsg_ms.plan import OpDecision, Plan
    from smsg_ms.report.degrees import degrees_by_block
    from smsg_ms.report.explain_view import chosen_degrees

    decisions = []
    for i in range(4):
        wide = i < 2
        mm = ((4, 1), (1, 2)) if wide else ((8, 1), (1, 1))
        att = ((4, 1, 2, 1), (4, 1, 1, 1)) if wide else ((8, 1, 1, 1), (8, 1, 1, 1))
        decisions.append(OpDecision(f"layers.{i}.wq.matmul", "MatMul", [list(s) for s in mm],
                                    block="layers.*", symbolic=f"mm{wide}"))
        decisions.append(OpDecision(f"layers.{i}.attention.qk", "BatchMatMul",
                                    [list(s) for s in att], block="layers.*"))
        if not wide:
            decisions.append(OpDecision(f"layers.{i}.moe.experts.w1", "BatchMatMul",
                                        [[2, 1, 1], [4, 1, 1]], block="layers.*"))
    symbolic = {"mmTrue": {"cuts": {"c_m": 4, "c_k": 1, "c_n": 2}},
                "mmFalse": {"cuts": {"c_m": 8, "c_k": 1, "c_n": 1}}}
    plan = Plan("toy", "f", 8, {}, [[8, 16]], "a100", decisions, dataset_strategy=[[1, 1]],
                symbolic=symbolic)
    assert degrees_by_block(plan) == [
        ("layers.0–1", {"dp": 4, "tp": 2, "ep": 1, "cp": 2}),
        ("layers.2–3", {"dp": 8, "tp": 1, "ep": 4, "cp": 1})]
    degrees = chosen_degrees(plan)
    assert (degrees["ep"], degrees["cp"]) == (4, 2)
    out = io.StringIO()
    print_explain(plan, Console(file=out, width=100))
    text = out.getvalue()
    assert "degrees by block: layers.0–1: dp 4, tp 2, ep 1, cp 2; layers.2–3: dp 8, tp 1, ep " \
           "4, cp 1" in " ".join(text.split())
    # every instance alike (layers.0 and its copy as layers.1): no by-block line
    same = Plan("toy", "f", 8, {}, [[8, 16]], "a100", decisions[:2] + [
        OpDecision(d.name.replace("layers.0", "layers.1"), d.op_type, d.strategy, block=d.block)
        for d in decisions[:2]], dataset_strategy=[[1, 1]])
    assert degrees_by_block(same) == []


def test_symbolic_rows_name_the_out_strategy_collectives():
    """A MatMul planned with an out_strategy reduce-scatters its partial sums (MindSpore's
    ``MatMul::CheckOutputStrategy``, ``forward_reduce_scatter_``; bprop AllGather): the explain
    rows of its symbolic cost name those collectives, as its time line and its predicted
    collectives do, not the AllReduce of the in_strategy alone.

    By hand for the reference ``mlp`` plan's ``fc3.matmul`` (x (64, 2048) · W (512, 2048)ᵀ,
    in_strategy ((1, 8), (1, 8)), out_strategy ((8, 1),), fp32): each device holds partial
    sums (64, 512), S = 64·512·4 = 131072 bytes, reduce-scattered over the 8 devices of the
    contracting cut forward (ReduceScatter) and gathered back backward (AllGather): explain
    shows S for both, as check does (the ring volume sent, (8 − 1)/8 · S, is not shown). Every
    other reference plan's out_strategy decisions: the rows' collectives are among the
    decision's own."""
    plan = load_plan(ROOT / "strategies" / "mlp-8dev.plan.json")
    d = next(d for d in plan.decisions if d.name == "fc3.matmul")
    assert plan.out_strategies[d.name] == [[8, 1]] and d.strategy == [[1, 8], [1, 8]]
    text = _render(print_explain, plan, width=100)
    entry = next(e for e in text.split("\n\n") if e.startswith("fc3.matmul"))
    rows = {line.strip().split("  ")[0]: line for line in entry.splitlines()}
    s = 64 * 512 * 4
    for term in ("forward ReduceScatter of out", "backward AllGather of out"):
        assert term in rows, entry
        assert rows[term].rstrip().endswith(fmt_bytes(s, ("MiB", 2 ** 20))), rows[term]
    assert "AllReduce of out" not in entry, entry
    time_line = " ".join(entry.split("memory:")[0].split())
    assert "ReduceScatter" in time_line and "AllGather" in time_line and \
        "AllReduce" not in time_line
    from smsg_ms.report.explain_view import symbolic_shown

    for path in sorted((ROOT / "strategies").glob("*.plan.json")):
        plan = load_plan(path)
        for d in plan.decisions:
            if not plan.out_strategies.get(d.name) or not plan.symbolic_of(d):
                continue
            own = {(c["phase"], c["kind"]) for c in d.collectives}
            shown = {tuple(t["term"].split()[:2]) for t in symbolic_shown(plan, d)["terms"]
                     if t["term"].split()[0] in ("forward", "backward")}
            assert shown and shown <= own, (path.name, d.name, shown, own)


def _reference_plans():
    return sorted((ROOT / "strategies").glob("*.plan.json")) + sorted(
        (ROOT / "tests" / "data" / "plans_before_redesign").glob("*.plan.json"))


def test_runner_up_of_the_same_in_strategy_says_what_differs():
    """The reference ``mlp`` plan's ``fc3.matmul`` takes ((1, 8), (1, 8)) with the out_strategy
    ((8, 1),); its runner-up is the same in_strategy without it, which all-reduces the partial
    sums of the 8-way contracting cut instead of reduce-scattering them (docs/sequence-
    parallel.md, the dry-run's table). Its line must say so, not print a strategy that reads as
    the chosen one. In every reference plan: a runner-up whose in_strategy is the chosen one
    names its out_strategy difference."""
    from smsg_ms.report.tables import fmt_runner_up

    plan = load_plan(ROOT / "strategies" / "mlp-8dev.plan.json")
    text = " ".join(_render(print_explain, plan, width=100).split())
    assert ("runner-up: (1,8)(1,8): same in_strategy, output AllReduce instead of ReduceScatter "
            "(no out_strategy) (+") in text, text
    seen = 0
    for path in _reference_plans():
        plan = load_plan(path)
        for d in plan.decisions:
            r = d.runner_up
            if not (r and d.shardable and r.get("strategy") == d.strategy):
                continue
            seen += 1
            mine, theirs = plan.out_strategies.get(d.name), r.get("out_strategy")
            assert mine != theirs, (path.name, d.name)     # two options differ in something
            line = fmt_runner_up(r, d.strategy, mine)
            assert "same in_strategy" in line, (path.name, d.name, line)
            if mine and not theirs:
                assert "AllReduce instead of ReduceScatter" in line, line
            elif theirs and not mine:
                assert "ReduceScatter instead of AllReduce" in line, line
    assert seen >= 2


def test_stays_best_deviation_of_the_same_in_strategy_says_what_differs():
    """A deviation that keeps the chosen in_strategy and drops (or adds) the out_strategy is
    named with its difference; an out_strategy deviation prints as ``in→out``."""
    from smsg_ms.report.explain_view import stays_best_lines

    twin = {"variable": "fc3.matmul", "strategy": [[1, 8], [1, 8]], "out_strategy": None,
            "chosen_strategy": [[1, 8], [1, 8]], "chosen_out_strategy": [[8, 1]]}
    other = {"variable": "fc3.matmul", "strategy": [[4, 2], [8, 2]], "out_strategy": [[8, 8]],
             "chosen_strategy": [[8, 8], [1, 8]], "chosen_out_strategy": [[64, 1]]}
    lines = stays_best_lines([{"parameter": "bandwidth", "level": None, "low": 0.5,
                               "high": 2.0, "below": other, "above": twin}])
    assert lines == ["bandwidth x0.5 to x2 (below x0.5: fc3.matmul takes (4,2)(8,2)→(8,8); "
                     "above x2: fc3.matmul takes (1,8)(1,8): same in_strategy, output AllReduce "
                     "instead of ReduceScatter (no out_strategy))"]


def test_stays_best_items_fold_under_their_text():
    """A stays-best item longer than 80 columns folds at spaces: no line is wider than the
    console, every continuation line is indented deeper than its item (4 spaces against the
    item's 2), and the words read back in order."""
    from smsg_ms.report.explain_view import print_stays_best, stays_best_lines

    twin = {"variable": "layers.0.feed_forward.w2.matmul", "strategy": [[1, 8], [1, 8]],
            "out_strategy": None, "chosen_strategy": [[1, 8], [1, 8]],
            "chosen_out_strategy": [[8, 1]]}
    ranges = [{"parameter": "bandwidth", "level": 1, "level_name": "inter-node", "low": 0.25,
               "high": 4.0, "below": twin, "above": twin}]
    out = io.StringIO()
    print_stays_best(ranges, "atlas-800t-a2", Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    items = [i for i, line in enumerate(lines) if line.startswith("  bandwidth")]
    assert len(items) == 1 and len(lines) > items[0] + 1, lines
    assert all(line.startswith("    ") for line in lines[items[0] + 1:]), lines
    assert " ".join(" ".join(lines[items[0]:]).split()) == stays_best_lines(ranges)[0]


def _title(plan, width=200) -> str:
    text = _render(print_summary, plan, width=width)
    return " ".join(text[:text.index("┏")].split())


def test_plan_title_states_the_shape_planned_for():
    """The ``plan`` table's title names the network's shape. The default ``llama`` and ``mlp``
    reference plans (no option given): each value read off the captured graph the plan records,
    not off the network's defaults: batch and seq the data input's shape, layers the block
    instances, hidden and ffn the widths of ``wq`` and ``w1``, heads the attention scores'
    second axis, vocab the LM head's output; mlp's batch its input rows, hidden fc1's output.
    A given option (the redesign plans' ``--hidden 256 ...``) is the one named."""
    plan = load_plan(ROOT / "strategies" / "llama-8dev.plan.json")
    assert plan.options == {}
    sizes = {d.name: plan.symbolic_of(d)["sizes"] for d in plan.decisions
             if plan.symbolic_of(d)}
    batch, seq = plan.input_shapes[0]
    layers = len({d.name.split(".")[1] for d in plan.decisions if d.name.startswith("layers.")})
    want = {"batch": batch, "seq": seq, "layers": layers,
            "hidden": sizes["layers.0.attention.wq.matmul"]["k"],
            "heads": sizes["layers.0.attention.qk"]["b"],
            "ffn": sizes["layers.0.feed_forward.w1.matmul"]["n"],
            "vocab": sizes["lm_head.matmul"]["n"]}
    title = _title(plan)
    assert title.startswith("llama (") and title.endswith("): 8 devices, atlas-800t-a2"), title
    for key, value in want.items():
        assert re.search(rf"[(,] ?{key} {value}[,)]", title), (key, value, title)
    mlp = load_plan(ROOT / "strategies" / "mlp-8dev.plan.json")
    fc1 = next(mlp.symbolic_of(d) for d in mlp.decisions if d.name == "fc1.matmul")
    assert _title(mlp) == (f"mlp (batch {mlp.input_shapes[0][0]}, hidden {fc1['sizes']['n']}): "
                           "8 devices, atlas-800t-a2")
    given = load_plan(ROOT / "tests/data/plans_before_redesign/llama-8dev.plan.json")
    title = _title(given)
    for key, value in given.options.items():
        assert re.search(rf"[(,] ?{key} {value}[,)]", title), (key, value, title)


def test_plan_title_states_the_shape_of_every_builtin():
    """Every built-in network: the title names a shape, and each option it names is a flag that
    ``plan <network>`` accepts (the CLI's own check refuses the others)."""
    from smsg_ms.cli_options import UsageError, check_flags
    from smsg_ms.networks import BUILTINS

    for name in BUILTINS:
        plan = Plan(network=name, fingerprint="f", devices=8, options={}, input_shapes=[],
                    hardware="atlas-800t-a2", decisions=[])
        title = _title(plan)
        assert title.startswith(f"{name} (batch "), title
        shown = re.findall(r"[(,] ?([a-z-]+) ", title[:title.index("):")])
        for flag in shown:
            check_flags(name, {flag.replace("-", "_"): 1})      # no UsageError
        with pytest.raises(UsageError):
            check_flags(name, {"no_such_option": 1})


def _splits_a_sequence(rows: int, batch: int, cut: int) -> bool:
    """Brute force: ``rows`` = ``batch`` samples of ``rows / batch`` consecutive rows each, laid
    in ``cut`` contiguous slices (MindSpore's layout of a dimension cut ``cut``-way): does a
    sample have rows on two devices?"""
    per_sample, per_device = rows // batch, rows // cut
    owner = {}
    for row in range(rows):
        if owner.setdefault(row // per_sample, row // per_device) != row // per_device:
            return True
    return False


def test_sequence_parallel_only_where_a_sequence_is_cut():
    """``sp`` of the degrees line: the ReduceScatter group of an out_strategy MatMul whose
    token rows are cut through a sample's sequence. Expected per reference plan by brute force
    over the rows (:func:`_splits_a_sequence`); a plan whose rows are its samples (mlp, 64 rows
    = batch 64: no sequence axis) has none. The 8-device mindformers LLaMA (batch 8, rows 8 ·
    2048, out_strategy (8, 1)) holds whole sequences: its decoder norms after ``wo`` take
    (8, 1, 1) on (batch, seq, hidden), the sequence uncut."""
    from smsg_ms.report.degrees import chosen_degrees

    for path in _reference_plans():
        plan = load_plan(path)
        batch = plan.input_shapes[0][0]
        want = 1
        for d in plan.decisions:
            out = plan.out_strategies.get(d.name)
            if not out:
                continue
            sym = plan.symbolic_of(d)
            ins, outs = sym["einsum"].split("->")
            rows = sym["sizes"][outs[0]]
            contracting = [ch for ch in ins.split(",")[0] if ch not in outs]
            b = math.prod(sym["cuts"][f"c_{ch}"] for ch in contracting)
            if rows % batch == 0 and _splits_a_sequence(rows, batch, out[0][0]):
                want = max(want, b)          # the ReduceScatter group: the contracting cut
        assert chosen_degrees(plan)["sp"] == want, path
    mlp = load_plan(ROOT / "strategies" / "mlp-8dev.plan.json")
    assert mlp.out_strategies and chosen_degrees(mlp)["sp"] == 1
    mf = load_plan(ROOT / "strategies" / "mf-llama-7b-2l-8dev.plan.json")
    norms = [d for d in mf.decisions if ".ffn_norm." in d.name and d.op_type == "Square"]
    assert norms and all(d.strategy[0][1] == 1 for d in norms)
    assert mf.out_strategies and chosen_degrees(mf)["sp"] == 1
    big = load_plan(ROOT / "strategies" / "llama-64dev.plan.json")      # 64 slices of 8 samples
    assert chosen_degrees(big)["sp"] > 1


def test_pipelined_explain_says_d_is_a_stage_s_devices():
    """In a pipelined plan the symbolic costs are the stage plan's: every description's ``D`` is
    the pipeline record's devices per stage (16 devices in 2 stages: 8), not the plan's 16,
    and the legend and each ``D = `` say it is a stage's count. A single-stage plan's legend
    says the device count."""
    plan = load_plan(ROOT / "tests/data/plans_before_redesign/llama12-16dev-p2-mb2.plan.json")
    per_stage = plan.devices // plan.pipeline["stages"]
    assert per_stage == plan.pipeline["devices_per_stage"] == 8
    d_values = {plan.symbolic_of(d)["D"] for d in plan.decisions if plan.symbolic_of(d)}
    assert d_values == {per_stage}
    text = " ".join(_render(print_explain, plan, width=200).split())
    assert (f"D the device count of one pipeline stage ({per_stage} of the plan's "
            f"{plan.devices})") in text, text
    shown = re.findall(r"D = (\d+)(, a stage's devices)?\)", text)
    assert shown and all(int(n) == per_stage and tag for n, tag in shown), shown
    single = " ".join(_render(print_explain, load_plan(
        ROOT / "strategies" / "llama-8dev.plan.json"), width=200).split())
    assert "and D the device count;" in single and "a stage's devices" not in single


def test_explain_collective_bytes_are_check_s():
    """explain's bytes of a collective are the figure check predicts for it (the decision's
    collective ``bytes``, ``S``: the tensor each device reduces or gathers, the convention of
    the inserted bytes check reads off MindSpore's graph), not the ring volume sent.

    By hand for the reference ``bert`` plan's ``layers.0.attention.output.matmul``: x (m, k) ·
    W (k, n), m = 1024 rows, n = 768 columns, in_strategy ((2, 4), (4, 1)) cuts k 4-way, so
    each device holds partial sums of (m/2) x (n/1) float32 (4 bytes, bert's default dtype)
    that one forward AllReduce over 4 devices sums: 1024·768·4 / (2·1) = 1572864 bytes =
    1.5 MiB (its ring volume, 2·(4 − 1)/4 of that, is what explain showed before). For every
    decision of the reference plans, each collective row explain shows equals one of the
    decision's predicted collectives of that phase and kind."""
    from smsg_ms.integration.check import mib, predicted_collectives
    from smsg_ms.report.explain_view import symbolic_shown

    plan = load_plan(ROOT / "strategies" / "bert-8dev.plan.json")
    name = "layers.0.attention.output.matmul"
    d = next(d for d in plan.decisions if d.name == name)
    assert d.strategy == [[2, 4], [4, 1]]
    sizes = plan.symbolic_of(d)["sizes"]
    hand = sizes["m"] * sizes["n"] * 4 / (d.strategy[0][0] * d.strategy[1][1])
    assert hand == 1572864
    (checked,) = [c for c in predicted_collectives(plan)
                  if c["op"] == name and c["phase"] == "forward" and c["kind"] == "AllReduce"]
    assert checked["bytes"] == hand
    text = _render(print_explain, plan, width=100)
    entry = next(e for e in text.split("\n\n")
                 if e.startswith("layers.*.attention.output.matmul"))
    row = next(line for line in entry.splitlines() if "forward AllReduce of out" in line)
    number, unit = row.split()[-2:]
    assert unit == "MiB" and float(number) * 2 ** 20 == pytest.approx(hand, rel=1e-3)
    assert float(mib(checked["bytes"])) == float(number)     # check's pred. MiB column
    compared = 0
    for path in sorted((ROOT / "strategies").glob("*.plan.json")):
        plan = load_plan(path)
        for d in plan.decisions:
            for t in (symbolic_shown(plan, d) or {}).get("terms", []):
                words = t["term"].split()
                if t["unit"] != "bytes" or words[0] == "memory:" or not t.get("value"):
                    continue
                phase, kind = ("grad_sync", words[2]) if words[0] == "grad" else words[:2]
                own = [c["bytes"] for c in d.collectives
                       if c["phase"] == phase and c["kind"] == kind]
                if not own:     # described, not predicted (a loss's folded backward): no pair
                    continue
                compared += 1
                assert any(b == pytest.approx(t["value"], rel=1e-9) for b in own), \
                    (path.name, d.name, t, own)
    assert compared > 100
