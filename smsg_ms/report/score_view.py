"""The block ``smsg-ms score`` prints for one priced configuration: a head line, then one
``label value`` row per quantity, in the units and words of the ``plan`` command's totals
(:mod:`smsg_ms.report.tables`: seconds in the unit that fits, bytes in GiB / MiB ...). Lines
fold at spaces to the width given (80 columns by default), a row's continuation indented under
its value. Nothing here computes a cost: it lays out the scorer's result.
"""
from __future__ import annotations

from ..words import count
from .tables import LABELS, SUPER_STEP_LABEL
from .units import fmt_bytes, fmt_seconds, glue, wrap

#: the memory row of a pipelined configuration (its largest stage is the one that must fit)
LARGEST_STAGE = "memory per device (largest stage)"


def score_rows(result: dict, stages: int = 1) -> list[tuple[str, str]]:
    """``(label, value)`` rows of a score ``result`` (``step_seconds``, ``memory_bytes``; with
    ``micro_batches`` and ``devices_per_stage`` a micro-batch row): the step and memory rows are
    labelled as ``plan``'s totals label them, a pipelined configuration's (``stages`` > 1)
    naming the super-step and the largest stage."""
    piped = int(stages) > 1
    rows = [(SUPER_STEP_LABEL if piped else LABELS["step_seconds"],
             fmt_seconds(result["step_seconds"])),
            (LARGEST_STAGE if piped else LABELS["memory_bytes"],
             fmt_bytes(result["memory_bytes"]))]
    if "micro_batches" in result and "devices_per_stage" in result:
        rows.append(("micro-batches",
                     f"{count(result['micro_batches'], 'micro-batch', 'micro-batches')} on "
                     f"{count(result['devices_per_stage'], 'device')} per stage"))
    return rows


def score_lines(head: str, rows: list[tuple[str, str]], width: int = 80) -> list[str]:
    """``head`` (folded at ``width``), then each row as ``  label  value`` with the labels in
    one column, folded at ``width`` with continuation lines under the value."""
    lines = wrap(head, width, "", "  ")
    label_w = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        lead = f"  {label.ljust(label_w)}  "
        lines += wrap(glue(lead) + value, width, "", " " * len(lead))
    return lines


def print_score(head: str, rows: list[tuple[str, str]], width: int = 80) -> None:
    """Print :func:`score_lines` on stdout, at most ``width`` columns (80 by default; a
    narrower terminal's width where stdout is one)."""
    import shutil
    import sys

    if sys.stdout.isatty():
        width = min(width, shutil.get_terminal_size((width, 24)).columns)
    for line in score_lines(head, rows, width):
        print(line)


#: the head line's end (the rows' units and words: ``plan``'s totals)
HEAD = "predicted " + glue("(per device, one training step)")


def show_score(subject: str, result: dict, stages: int, extra: list[tuple[str, str]]) -> None:
    """Print a scored configuration (``score``'s ``show_score``): ``subject: predicted (per
    device, one training step)``, then :func:`score_rows` of ``result`` at ``stages``
    pipeline stages and the ``extra`` rows."""
    print_score(f"{subject}: {HEAD}", score_rows(result, stages) + list(extra))
