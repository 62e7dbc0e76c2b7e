"""Published measured step times of hybrid configurations, and how well a predicted time ranks them.

A data file (``benchmarks/measured/*.csv``) holds one measured configuration per row: the columns
:data:`MEASURED_COLUMNS` (``source`` names the publication and its table; ``measured_seconds``
is seconds per training iteration as published, or a throughput converted, as the row's
``note`` says). Rows of one ``group`` do the same work (same model, global batch, device count
and hardware, measured on the same day), so only their order matters: the benchmark
(``scripts/bench_measured.py``) compares the order smsg's predicted step time gives them with
the measured one by

* Kendall's tau (``scipy.stats.kendalltau``, the tau-b variant, which accounts for ties):
  ``(concordant − discordant) / pairs``, 1 for the same order, −1 for the reverse;
* the top-1 regret: the measured time of the configuration predicted fastest over the
  fastest measured, minus one (0 when the prediction picks the best; a fraction, 0.05 = 5 %).
"""
from __future__ import annotations

import csv
import os
import math
from collections import OrderedDict

#: Columns every row of a measured-data CSV has (``approximate``: ``true`` when read off a
#: figure; ``note``: conversions and caveats, may be empty).
MEASURED_COLUMNS = ("group", "hardware", "source", "layers", "hidden", "heads", "seq", "vocab",
                    "dtype", "devices", "global_batch", "micro_batch", "tp", "dp", "pp",
                    "recompute", "optimizer_shard", "measured_seconds", "approximate", "note")
_INTEGERS = ("layers", "hidden", "heads", "seq", "vocab", "devices", "global_batch",
             "micro_batch", "tp", "dp", "pp")
_FLAGS = ("recompute", "optimizer_shard", "approximate")
#: optional flag columns (false when the file has no such column): ``p2p_partitioned``, the
#: framework measured cuts each boundary tensor over the tensor-parallel group before sending
#: it (:attr:`smsg_ms.compare.score_configs.ShapeScorer.partitioned_sends`); ``fp32_main_grads``,
#: the framework accumulates and AllReduces the gradients in fp32 beside an fp32 master weight
#: (:attr:`smsg_ms.compare.score_configs.ShapeScorer.fp32_main_grads`); ``p2p_paired``, the
#: framework batches the Send and Receive at each stage border into one overlapped pair
#: (:attr:`smsg_ms.compare.score_configs.ShapeScorer.paired_transfers`)
OPTIONAL_FLAGS = ("p2p_partitioned", "fp32_main_grads", "p2p_paired")
_DTYPES = ("bf16", "fp16", "fp32")


class MeasuredDataError(ValueError):
    """A measured-data file that does not follow :data:`MEASURED_COLUMNS` (one-line message
    naming the file, the line and the field)."""


def _row_error(path, line: int, text: str) -> MeasuredDataError:
    return MeasuredDataError(f"{path}:{line}: {text}")


#: endings of a machine description file a row's ``hardware`` may name
_MACHINE_FILES = (".yaml", ".yml", ".json")


def _check_row(path, line: int, row: dict, presets) -> dict:
    out = dict(row)
    for key in ("group", "hardware", "source"):
        if not str(row.get(key) or "").strip():
            raise _row_error(path, line, f"{key} is empty")
    name = str(row["hardware"]).strip()
    if name.lower().endswith(_MACHINE_FILES):
        # a machine description beside the CSV (the cluster the measurement ran on)
        out["hardware_path"] = os.path.join(os.path.dirname(os.path.abspath(path)), name)
        from ..cost.hardware import load_machine

        try:
            load_machine(out["hardware_path"])
        except ValueError as exc:
            raise _row_error(path, line, str(exc).splitlines()[0]) from None
    elif presets is not None and name not in presets:
        raise _row_error(path, line, f"hardware {row['hardware']!r} is not a preset "
                                     f"({', '.join(sorted(presets))}) nor a machine file "
                                     "(.yaml, .yml, .json) beside the CSV")
    for key in _INTEGERS:
        try:
            out[key] = int(str(row[key]).strip())
        except ValueError:
            raise _row_error(path, line, f"{key} {row[key]!r} is not an integer") from None
        if out[key] <= 0:
            raise _row_error(path, line, f"{key} must be positive, not {out[key]}")
    try:
        out["measured_seconds"] = float(row["measured_seconds"])
    except ValueError:
        raise _row_error(path, line, f"measured_seconds {row['measured_seconds']!r} is not a "
                                     "number") from None
    if not (math.isfinite(out["measured_seconds"]) and out["measured_seconds"] > 0):
        raise _row_error(path, line, "measured_seconds must be a positive number")
    for key in OPTIONAL_FLAGS:
        if row.get(key) in (None, ""):
            row = {**row, key: "false"}
    for key in _FLAGS + OPTIONAL_FLAGS:
        text = str(row[key]).strip().lower()
        if text not in ("true", "false"):
            raise _row_error(path, line, f"{key} must be true or false, not {row[key]!r}")
        out[key] = text == "true"
    if row["dtype"] not in _DTYPES:
        raise _row_error(path, line, f"dtype {row['dtype']!r} is not one of {', '.join(_DTYPES)}")
    if out["dp"] * out["tp"] * out["pp"] != out["devices"]:
        raise _row_error(path, line, f"dp·tp·pp = {out['dp'] * out['tp'] * out['pp']} is not "
                                     f"devices {out['devices']}")
    if out["global_batch"] % (out["dp"] * out["micro_batch"]):
        raise _row_error(path, line, f"global_batch {out['global_batch']} is not a multiple of "
                                     "dp·micro_batch")
    return out


def load_measured(path, presets=None) -> list[dict]:
    """The rows of one measured-data CSV, numbers parsed (ints, ``measured_seconds`` float,
    flags bool), each checked; ``presets``: the hardware names a row may name (None: any).
    A ``hardware`` ending in ``.yaml``/``.yml``/``.json`` names a machine description file in
    the CSV's folder (:func:`smsg_ms.cost.hardware.load_machine`); the row gets its path as
    ``hardware_path``.

    Raises:
        MeasuredDataError: a missing column, an empty group/hardware/source, a hardware that
            is neither a preset nor a valid machine file, a non-positive
            number, ``dp·tp·pp`` not the device count, a global batch ``dp·micro_batch`` does
            not divide, a group with fewer than two rows, or a group whose rows differ in the
            work they do (model shape, global batch, devices, hardware).
        OSError: the file cannot be read.
    """
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        lacking = [c for c in MEASURED_COLUMNS if c not in (reader.fieldnames or [])]
        if lacking:
            raise MeasuredDataError(f"{path}: lacks the column(s) {', '.join(lacking)}")
        rows = [_check_row(path, n + 2, r, presets) for n, r in enumerate(reader)]
    work = ("hardware", "layers", "hidden", "heads", "seq", "vocab", "devices", "global_batch")
    for name, members in group_rows(rows).items():
        if len(members) < 2:
            raise MeasuredDataError(f"{path}: group {name} has {len(members)} row; a group needs "
                                    "two or more")
        for key in work:
            if len({m[key] for m in members}) > 1:
                raise MeasuredDataError(f"{path}: group {name} mixes {key} values "
                                        f"{sorted({m[key] for m in members})}")
    return rows


def group_rows(rows) -> "OrderedDict[str, list[dict]]":
    """Rows by their ``group``, groups and rows in file order."""
    out: OrderedDict[str, list[dict]] = OrderedDict()
    for row in rows:
        out.setdefault(row["group"], []).append(row)
    return out


def kendall_tau(predicted, measured) -> float:
    """Kendall's tau-b between two equally long sequences of times (``scipy.stats.kendalltau``);
    NaN when either is constant or has fewer than two values.

    Raises:
        ValueError: the lengths differ.
    """
    from scipy.stats import kendalltau

    if len(predicted) != len(measured):
        raise ValueError(f"{len(predicted)} predicted times for {len(measured)} measured")
    if len(predicted) < 2:
        return float("nan")
    tau = kendalltau(list(predicted), list(measured)).statistic
    return float(tau)


def top1_regret(predicted, measured, rel_tol: float = 1e-9) -> float:
    """``measured[k] / min(measured) − 1`` for ``k`` the configuration predicted fastest; when
    several are predicted equally fast (within ``rel_tol``), the slowest measured of them (the
    prediction does not tell them apart, so the worst pick is charged).

    Raises:
        ValueError: empty or unequal lengths, or a measured time that is not positive.
    """
    if not predicted or len(predicted) != len(measured):
        raise ValueError(f"{len(predicted)} predicted times for {len(measured)} measured")
    if min(measured) <= 0:
        raise ValueError("measured times must be positive")
    best = min(predicted)
    picked = [m for p, m in zip(predicted, measured) if p <= best * (1 + rel_tol)]
    return max(picked) / min(measured) - 1.0


def pair_weighted_tau(taus_and_sizes) -> float:
    """Mean of per-group taus weighted by each group's pair count ``n(n−1)/2`` (NaN taus
    skipped): with no ties it is the tau over all within-group pairs pooled."""
    num = den = 0.0
    for tau, n in taus_and_sizes:
        if math.isnan(tau):
            continue
        pairs = n * (n - 1) / 2
        num += tau * pairs
        den += pairs
    return num / den if den else float("nan")


__all__ = ["MEASURED_COLUMNS", "MeasuredDataError", "group_rows", "kendall_tau",
           "load_measured", "pair_weighted_tau", "top1_regret"]
