"""The configuration CSV of ``smsg-ms score --configs FILE.csv``: its columns, and the reader that
refuses a file it would misread (an unknown or repeated column, a row with more or fewer cells
than the header, text that is not UTF-8) before any row is scored."""
from __future__ import annotations

import csv
import difflib

from ..errors import InputError
from .configs import ConfigError

#: CSV columns a configuration row needs
CSV_COLUMNS = ("devices", "global_batch", "micro_batch", "tp", "dp", "pp")
#: optional columns: the row's network shape, overriding the command line's
SHAPE_COLUMNS = ("layers", "hidden", "heads", "seq", "vocab", "ffn")
#: every other column a configuration CSV may have: the optional flags, a free-text ``name``
#: copied through, and the columns the scored CSV adds (so it can be scored again)
OPTIONAL_COLUMNS = ("recompute", "optimizer_shard") + SHAPE_COLUMNS + ("name",)
ADDED_COLUMNS = ("step_seconds", "error")


class ConfigFileError(ConfigError, InputError):
    """A configuration CSV that cannot be read as one (bad input: exit 2); one line naming the
    file, the line where it applies, and what to do."""


def read_config_rows(src) -> tuple[list[str], list[dict]]:
    """``(header, rows)`` of the open text file ``src`` (CSV with a header line): column names
    without blanks around them or a leading byte-order mark (a spreadsheet's export); each row a
    ``{column: text}`` dict. Blank lines are skipped (the csv module's rule).

    Raises:
        ConfigFileError: the header names a column twice or a misspelt known one (an
            unknown column close to one of :data:`CSV_COLUMNS`, :data:`OPTIONAL_COLUMNS`,
            :data:`ADDED_COLUMNS`; other unknown columns are copied through), or lacks one
            of :data:`CSV_COLUMNS`; a row with more or fewer cells than the header (its line
            number); a CSV error of the csv module (its line number); text that is not UTF-8.
    """
    name = getattr(src, "name", "configuration CSV")
    reader = csv.DictReader(src)
    try:
        header = [column.lstrip("\ufeff").strip() for column in reader.fieldnames or []]
        _check_header(name, header)
        reader.fieldnames = header
        rows = []
        for row in reader:
            cells = len(header) + len(row.get(None, ())) - sum(
                row[c] is None for c in header)
            if cells != len(header):
                raise ConfigFileError(
                    f"{name}, line {reader.line_num}: {cells} cells for the header's "
                    f"{len(header)} columns (give one cell per column, an empty one for a "
                    "value left out)")
            rows.append(row)
    except UnicodeDecodeError:
        raise ConfigFileError(f"{name}: not UTF-8 text (a spreadsheet file? export it as CSV "
                              "UTF-8)") from None
    except csv.Error as exc:
        raise ConfigFileError(f"{name}, line {reader.line_num}: not CSV ({exc})") from None
    return header, rows


def _check_header(name: str, header: list[str]) -> None:
    """Raises: ConfigFileError naming the first bad column of ``header`` (see
    :func:`read_config_rows`): a column given twice, or an unknown one that reads like a
    misspelt known one (``recompte``: it would be copied through, not read). Other unknown
    columns (``measured_seconds``, a note) are copied through: :func:`passed_through`."""
    known = CSV_COLUMNS + OPTIONAL_COLUMNS + ADDED_COLUMNS
    for i, column in enumerate(header):
        if column in header[:i]:
            raise ConfigFileError(f"{name}: column '{column}' is given twice (keep one)")
        close = difflib.get_close_matches(column.lower(), known, n=1, cutoff=0.8)
        if column not in known and close:
            raise ConfigFileError(
                f"{name}: unknown column '{column}' (did you mean '{close[0]}'?); "
                f"columns: {', '.join(CSV_COLUMNS)}, optional {', '.join(OPTIONAL_COLUMNS)}")
    lacking = [c for c in CSV_COLUMNS if c not in header]
    if lacking:
        raise ConfigFileError(f"{name}: configuration CSV lacks the column(s) "
                              f"{', '.join(lacking)} (needs {','.join(CSV_COLUMNS)})")


def passed_through(header: list[str]) -> list[str]:
    """The columns of ``header`` no configuration reads, copied to the output as they are."""
    return [c for c in header if c not in CSV_COLUMNS + OPTIONAL_COLUMNS + ADDED_COLUMNS]


__all__ = ["ADDED_COLUMNS", "CSV_COLUMNS", "ConfigFileError", "OPTIONAL_COLUMNS",
           "SHAPE_COLUMNS", "passed_through", "read_config_rows"]
