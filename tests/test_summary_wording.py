"""The ``plan`` summary's words (issue #14 item 4, a new user's trial): the not-written-back note's
count agrees with the names it lists, titles fold between phrases at 80 columns, the largest
stage is named by its 0-based number among a count, and the gradient sync row has one name in
single-stage and pipelined plans. The plans are written out here (no capture): only the words
are under test, and every expected text is worked out by hand in the comments."""
from __future__ import annotations

import io
import re

from rich.console import Console

from smsg_ms.plan import OpDecision, Plan
from smsg_ms.report.plan_notes import unwritten_lines
from smsg_ms.report.tables import print_summary, stage_plan_rows, totals_rows

GIB = 2 ** 30


def _reshapes() -> list[OpDecision]:
    """A two-layer decoder's Reshapes: one before the layers, three per layer (q, k, v: calls
    #0–#2) and one merging the heads per layer: 1 + 2·3 + 2 = 9 operators under 3 names."""
    out = [OpDecision("reshape", "Reshape", None, shardable=False)]
    for layer in (0, 1):
        out += [OpDecision(f"layers.{layer}.attention.reshape#{call}", "Reshape", None,
                           shardable=False, block="layers.*") for call in range(3)]
        out.append(OpDecision(f"layers.{layer}.attention.merge_reshape", "Reshape", None,
                              shardable=False, block="layers.*"))
    return out


def _plan(pipeline: dict | None) -> Plan:
    sync = {"kind": "AllReduce", "group": 4, "phase": "grad_sync", "bytes": 4.0 * 1024,
            "tensor": "layers.0.wq.weight"}
    decisions = _reshapes() + [
        OpDecision(f"layers.{i}.wq.matmul", "MatMul", [[2, 1], [1, 2]], block="layers.*",
                   collectives=[sync]) for i in (0, 1)]
    totals = {"step_seconds": 2e-3, "compute": 1e-3, "grad_sync": 1e-4,
              "memory_bytes": 2 * GIB, "parameter_bytes": GIB}
    return Plan("gpt", "f", 8, {"layers": 2}, [[8, 512]], "atlas-800t-a2", decisions,
                totals=totals, pipeline=pipeline)


def _pipeline(stages: int) -> dict:
    """8 devices in ``stages`` stages, global batch 8 in 2 micro-batches of 4."""
    return {"stages": stages, "devices_per_stage": 8 // stages, "micro_batches": 2,
            "micro_batch_size": 4, "global_batch": 8,
            "stage_of_block": {"layers.0": 0, "layers.1": stages - 1},
            "stage_seconds": [1e-3] * stages, "stage_memory_bytes": [GIB, 3 * GIB][:stages],
            "bubble_fraction": (stages - 1) / (2 + stages - 1), "step_seconds": 3e-3,
            "optimizer_sharding": False}


def _printed(plan: Plan, width: int) -> str:
    out = io.StringIO()
    print_summary(plan, Console(file=out, width=width))
    return out.getvalue()


def test_not_written_back_counts_agree_with_the_names_listed():
    lines = unwritten_lines(_plan(None))
    assert lines[0] == ("not written back (9 operators, 3 distinct names; their cost is in the "
                        "totals):")
    assert lines[1] == ("  reshape, layers.*.attention.reshape (x6), "
                        "layers.*.attention.merge_reshape (x2)")
    # the counts listed add up to the operators of the first line
    listed = [int(k) for k in re.findall(r"\(x(\d+)\)", lines[1])] + [1]   # reshape: once
    assert sum(listed) == 9
    # fewer names shown: the rest counted as names and operators (6 + 2 = 8)
    short = unwritten_lines(_plan(None), shown=1)
    assert short[1] == "  reshape and 2 more names (8 operators)"


def test_pipelined_titles_fold_between_phrases_at_80_columns():
    """The stage plan's title names 8 / 2 = 4 devices per stage and its micro-batch of 4; the
    pipeline title 2 stages of 4 devices and 2 micro-batches of 8 / 2 = 4 samples. At 80
    columns no line is longer and no phrase of a title is split; at 40 the pipeline title
    folds after its comma."""
    text = _printed(_plan(_pipeline(2)), 80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text
    assert "on 4 devices, one micro-batch of 4," in " ".join(text.split()), text
    assert "pipeline: 2 stages x 4 devices, 2 micro-batches of 4" in text, text
    narrow = [line.strip() for line in _printed(_plan(_pipeline(2)), 40).splitlines()]
    assert "pipeline: 2 stages x 4 devices," in narrow and "2 micro-batches of 4" in narrow
    assert "predicted totals of the chosen configuration" in " ".join(narrow)


def test_largest_stage_is_numbered_among_a_count():
    """Stage 1 (0-based) needs 3 GiB, stage 0 1 GiB: the second of 2 stages is the largest. One
    stage: nothing to choose, no stage named."""
    rows = dict(totals_rows(_plan(_pipeline(2))))
    assert rows["memory per device (stage 1, the largest of 2)"] == "3.000 GiB"
    labels = [label for label, _ in totals_rows(_plan(_pipeline(1)))]
    assert "memory per device" in labels
    assert not [label for label in labels if "largest" in label or re.search(r"stage \d", label)]


def test_gradient_sync_row_has_one_name_in_both_kinds_of_plan():
    single = [label for label, _ in totals_rows(_plan(None)) if "gradient sync" in label]
    piped = [label for label, _ in stage_plan_rows(_plan(_pipeline(2)))
             if "gradient sync" in label]
    assert single[0] == "gradient sync (exposed)"
    # a pipelined plan's time rows are its stage plan's, in a table of their own
    assert piped == ["gradient sync (exposed)"]


def test_pipelined_input_shapes_say_they_are_one_micro_batch():
    """A pipelined plan records the global batch 8 in its options and the inputs of one
    micro-batch (8 / 2 = 4 samples): the data-input line says per micro-batch; a single-stage
    plan's does not."""
    from smsg_ms.report.plan_notes import dataset_lines

    piped = _plan(_pipeline(2))
    piped.input_shapes, piped.dataset_strategy = [[4, 512]], [[1, 1]]
    assert dataset_lines(piped)[1] == ("  input 0 (4, 512) per micro-batch: not cut: every "
                                       "device reads the whole input")
    single = _plan(None)
    single.dataset_strategy = [[1, 1]]
    assert dataset_lines(single)[1].startswith("  input 0 (8, 512): ")
