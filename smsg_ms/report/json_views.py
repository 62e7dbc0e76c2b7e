"""The ``--json`` documents of ``graph``, ``plan``, ``explain`` and ``check``: the data their
tables show, as plain JSON values (units: seconds, bytes, elements). Nothing here recomputes a
cost: it reads the captured graph, the plan and the check report."""
from __future__ import annotations

from dataclasses import asdict

from ..plan import Plan


def _dim(d):
    return d if isinstance(d, int) else str(d)


def graph_json(graph, network: str, options: dict) -> dict:
    """``smsg-ms graph --json``: :func:`smsg_ms.report.graph_summary.summarize` (operator counts,
    parameter totals, repeated blocks, functional calls, unknown operators, warnings) with the
    network, its options and ``parameter_tensors`` (``name``, ``shape`` in elements, ``dtype``)."""
    from .graph_summary import summarize

    data = summarize(graph)
    data.update(network=network, options=dict(options),
                parameter_tensors=[{"name": p.name, "shape": [_dim(d) for d in p.shape],
                                    "dtype": p.dtype} for p in graph.parameters()])
    return data


def plan_json(plan: Plan, path: str) -> dict:
    """``smsg-ms plan --json``: the plan file written (``file``), its hash, the summary rows
    (``block``, ``primitive``, ``strategy`` per distinct primitive of a block, as in the table),
    the predicted ``totals`` (seconds, bytes), data-input layout, pipeline record and
    write-back; ``largest_stage`` (a pipelined plan's stage needing the most memory per device,
    ``{"stage", "memory_bytes"}``, else ``None``) and ``not_written_back`` (operator names folded
    over block instances, by kind: ``Reshape``, ``functional``, ``other``); ``shape``: the
    network options planned for, given or at their defaults
    (:func:`smsg_ms.cli_options.network_shape`, as the table's title names them)."""
    from ..cli_options import network_shape
    from .plan_notes import largest_stage, unwritten_groups
    from .tables import summary_rows

    largest = largest_stage(plan)
    return {"largest_stage": None if largest is None else
            {"stage": largest[0], "memory_bytes": largest[1]},
            "not_written_back": dict(unwritten_groups(plan)),
            "file": path, "content_hash": plan.content_hash, "network": plan.network,
            "devices": plan.devices, "hardware": plan.hardware, "options": plan.options,
            "shape": network_shape(plan.network, plan.options),
            "strategies": [{"block": b, "primitive": p, "strategy": s}
                           for b, p, s in summary_rows(plan)],
            "totals": plan.totals, "dataset_strategy": plan.dataset_strategy,
            "pipeline": plan.pipeline, "write_back": plan.write_back}


def explain_json(plan: Plan, show_all: bool = False) -> dict:
    """``smsg-ms explain --json``: one entry per shown decision (folded as the view folds them;
    ``show_all`` for every instance) with the decision's fields (strategy, seconds, breakdown,
    collectives, runner-up) and its symbolic cost description (``symbolic``, ``None`` without
    an einsum; with the collectives of its out_strategy, as ``explain`` shows it:
    :func:`~smsg_ms.report.explain_view.symbolic_shown`); the plan's ``degrees`` (:func:`~smsg_ms.report.degrees.chosen_degrees`),
    ``degrees_by_block`` (empty when every block takes the same) and the pipeline search's
    ``runner_up`` configuration (``None`` for a single-stage plan; ``explain --runner-up``
    then puts :func:`smsg_ms.planner.runner_up.plan_runner_up`'s there)."""
    from .explain_view import explained_decisions, symbolic_shown

    entries = []
    for shown in explained_decisions(plan, show_all):
        if shown.decision is None:
            continue
        entry = asdict(shown.decision)
        entry.update(shown=shown.name, instances=shown.instances,
                     symbolic=symbolic_shown(plan, shown.decision))
        entries.append(entry)
    from .degrees import chosen_degrees, degrees_by_block

    return {"content_hash": plan.content_hash, "network": plan.network,
            "devices": plan.devices, "totals": plan.totals, "degrees": chosen_degrees(plan),
            "degrees_by_block": [{"blocks": label, **d} for label, d in degrees_by_block(plan)],
            "runner_up": (plan.pipeline or {}).get("runner_up"), "decisions": entries}


def check_json(report) -> dict:
    """``smsg-ms check --json``: per rank MindSpore's rejection (``error``) or the rows of the
    side-by-side table (collective, phase, group size, predicted and inserted count and bytes of
    the group's whole tensor, ``compared``: ``False`` for the loss's), Send/Receive rows of a
    pipelined plan, the weights the plan leaves unplanned (``unplanned_weights``) and the verdict
    (``ok``, ``summary``)."""
    from ..integration.check import summary_line

    ranks = []
    for r in report.ranks:
        rows = [{"collective": row.key[0], "phase": row.key[1], "group": row.key[2],
                 "predicted": row.predicted, "predicted_bytes": row.predicted_bytes,
                 "inserted": row.inserted, "inserted_bytes": row.inserted_bytes,
                 "dynamic_shape": bool(row.dynamic),
                 "compared": row.planned and report.has_predictions, "ok": row.ok}
                for row in r.rows]
        p2p = [{"kind": row.key[0], "pass": row.key[1], "slice": list(row.key[2]),
                "dtype": row.key[3], "predicted": row.predicted, "inserted": row.inserted,
                "ok": row.ok} for row in r.p2p]
        ranks.append({"rank": r.rank, "stage": r.stage, "error": r.error, "collectives": rows,
                      "send_receive": p2p})
    return {"ok": report.ok, "summary": summary_line(report),
            "content_hash": report.plan.content_hash, "ranks": ranks,
            "unplanned_weights": list(report.unplanned)}
