"""``smsg-ms check STRATEGY.json --network SPEC --devices N``: does MindSpore take a strategy
checkpoint file (``smsg-ms export``'s, or MindSpore's own ``strategy_ckpt_config`` save) for this
network on this many devices?

The file is first matched against the network's operators (its keys are ``<primitive type>_<first
Parameter read>``, :mod:`smsg_ms.integration.strategy_files`): a key the network lacks means the
file is for another network (MindSpore would silently ignore it). Then the network is compiled in
the dry-run with ``strategy_ckpt_config={"load_file": ...}``; MindSpore's rejection is reported
in one line with the likely cause (a strategy that cuts into more parts than there are devices, or
into a count that does not divide them, was exported for another device count). A file that
records its device count (``device_num``, written by ``export``) is refused before the compile
when ``--devices`` differs: MindSpore would take a file written for 4 devices on 8 whenever
every cut divides 8, repeating the computation.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..plan import PlanFileError
from .plan_io import PlanError
from ..words import count


def read_strategy_file(path: str) -> dict | None:
    """The ``parallel_strategy_item`` map of a strategy checkpoint JSON file, ``None`` when the
    file is anything else (a plan file; or unreadable, not JSON, truncated: the plan reader
    then says which, :func:`smsg_ms.integration.plan_io.load_plan`).

    Raises:
        PlanFileError: a strategy file with a malformed item.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or "parallel_strategy_item" not in data:
        return None
    items = data["parallel_strategy_item"]
    if not isinstance(items, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("parallel_strategy"), list)
            for v in items.values()):
        raise PlanFileError(f"{path}: parallel_strategy_item is not a map of "
                            "{key: {parallel_strategy: [[cuts]...]}}")
    _check_field_types(path, data, items)
    return items


def _count(value, least: int) -> bool:
    """``value`` is an integer (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _check_field_types(path: str, data: dict, items: dict) -> None:
    """Refuse a field of the wrong type before MindSpore reads it (its JSON reader fails with
    ``type must be number, but is string``, naming no field).

    Raises:
        PlanFileError: naming the field, its value and the type expected.
    """
    for key, least in (("device_num", 1), ("current_stage", 0)):
        if key in data and not _count(data[key], least):
            raise PlanFileError(f"{path}: {key} must be an integer of at least {least}, got "
                                f"{data[key]!r}")
    for key, item in items.items():
        if "stage" in item and not _count(item["stage"], 0):
            raise PlanFileError(f"{path}: parallel_strategy_item['{key}'].stage must be a "
                                f"non-negative integer, got {item['stage']!r}")
        cuts = item["parallel_strategy"]
        if not all(isinstance(dims, list) and all(_count(c, 1) for c in dims) for dims in cuts):
            raise PlanFileError(f"{path}: parallel_strategy_item['{key}'].parallel_strategy must "
                                f"be lists of positive integers (cuts per dimension), got "
                                f"{cuts!r}")


def recorded_devices(path: str) -> int | None:
    """The device count a strategy file was written for: ``device_num`` (``smsg-ms export``
    records it), else, for MindSpore's own single-stage save (every item and ``current_stage``
    stage 0), the device matrix of its parameter layouts (``parallel_layout_item``
    ``dev_matrix``: MindSpore pads an operator's device matrix with the repeated-calculation
    dimension to the stage's devices, ``ops_info/operator_info.cc``); ``None`` when the file
    tells neither."""
    data = json.loads(Path(path).read_text())
    if isinstance(data.get("device_num"), int):
        return data["device_num"]
    layouts = data.get("parallel_layout_item")
    stages = {v.get("stage", 0) for v in data["parallel_strategy_item"].values()}
    if not isinstance(layouts, dict) or not layouts or stages - {0} or data.get("current_stage"):
        return None
    matrices = {math.prod(int(x) for x in v.get("dev_matrix", [])) for v in layouts.values()
                if isinstance(v, dict)}
    return matrices.pop() if len(matrices) == 1 else None


def network_keys(graph) -> set[str]:
    """The strategy-checkpoint keys a network's operators can take: ``<type>_<first parameter
    read>`` for each operator that reads a Parameter."""
    keys = set()
    for op in graph.ops:
        param = next((n for n in op.inputs if graph.tensors[n].kind == "parameter"), None)
        if param is not None:
            keys.add(f"{op.type}_{param}")
    return keys


@dataclass
class StrategyFileReport:
    """A strategy file MindSpore compiled: ``collectives`` (one dict per call, see
    :func:`smsg_ms.dryrun.collectives.collectives_in`)."""

    path: str
    network: str
    devices: int
    strategies: int
    collectives: list = field(default_factory=list)


def _largest_cut(items: dict) -> int:
    return max((math.prod(int(c) for c in cuts)
                for v in items.values() for cuts in v["parallel_strategy"] if cuts), default=1)


def check_strategy_file(path: str, spec: str, devices: int, options: dict) -> StrategyFileReport:
    """Compile ``spec`` on ``devices`` devices with the strategy file ``path`` loaded.

    Raises:
        PlanFileError: not a strategy file, a file written for another device count
            (:func:`recorded_devices`), keys the network lacks (bad input).
        PlanError: MindSpore's rejection (one line with its reason and the likely cause).
    """
    from ..graph.capture import capture_network
    from ..dryrun.runner import DryRunError, run_child
    from ..devices import check_device_count

    check_device_count(devices)
    items = read_strategy_file(path)
    if items is None:
        raise PlanFileError(f"{path} is not a strategy checkpoint (no parallel_strategy_item)")
    written_for = recorded_devices(path)
    if written_for is not None and written_for != devices:
        raise PlanFileError(f"{path} was written for {written_for} devices, not --devices "
                            f"{devices}: check it with --devices {written_for}, or plan and "
                            f"export again for {devices}")
    unknown = sorted(set(items) - network_keys(capture_network(spec, **options)))
    if unknown:
        shown = ", ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
        raise PlanFileError(f"{path} is for another network: {len(unknown)} of {len(items)} "
                            f"strategies name operators that '{spec}' does not have ({shown})")
    job = {"job": "compile", "spec": spec, "options": options, "strategies": {},
           "context": {"full_batch": True,
                       "strategy_ckpt_config": {"load_file": str(Path(path).resolve())}}}
    try:
        result = run_child(job, devices=devices)
    except DryRunError as exc:
        if exc.kind in ("timeout", "crash"):
            raise
        largest = _largest_cut(items)
        cause = ""
        if largest > devices or devices % largest:
            cause = (f"; its strategies cut into up to {largest} parts, so it was exported for "
                     f"another device count than {devices}")
        from ..dryrun.runner import parallel_error
        reason = parallel_error(exc.log) or str(exc).splitlines()[0]
        raise PlanError(f"MindSpore rejects {path} for '{spec}' on {count(devices, 'device')} "
                        f"({reason}){cause}") from None
    return StrategyFileReport(path, spec, devices, len(items), result["collectives"])


def collectives_table(collectives: list[dict], title: str):
    """A rich table of collectives counted per kind, pass (``grad_sync`` for gradient
    synchronisation) and group size; an empty one says so in its caption."""
    from collections import Counter

    from rich.table import Table

    # as wide as the title (up to the console's width), so the title wraps between words
    # instead of folding inside a long path
    table = Table(title=title, min_width=len(title))
    for col in ("collective", "pass", "group", "count"):
        table.add_column(col, justify="right" if col in ("group", "count") else "left",
                         min_width=len(col))
    counts = Counter((c["type"], "grad_sync" if c["grad_sync"] else c["pass"], c["group_size"])
                     for c in collectives)
    for (kind, phase, group), n in sorted(counts.items()):
        table.add_row(kind, phase, str(group), str(n))
    if not counts:
        table.caption = "MindSpore inserted none"
    return table


def print_strategy_report(report: StrategyFileReport, console) -> None:
    """The collectives MindSpore inserted, counted per kind, pass and group size."""
    console.print(collectives_table(report.collectives,
                                    f"{report.network} on {report.devices} devices with "
                                    f"{report.path}: collectives MindSpore inserted"))
    took = count(report.strategies, "strategy", "strategies")
    console.print(f"check: passed (MindSpore took {took})")
