"""Plan files: atomic write, verified read, and the checks that a plan fits a network.

A plan file is :meth:`smsg_ms.plan.Plan.to_json` text. Reading it checks, in this order, that it
is complete JSON, that it is a plan of a known format, and that its ``content_hash`` matches its
content (an edited file is refused). :func:`check_plan_fits` compares a plan with the network it is
about to be applied to.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..plan import PLAN_FORMAT, Plan, PlanError, PlanFileError


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 ``text`` → :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    A reader sees the old file or the new one, never a partial one; on failure no temporary file
    is left behind.

    Raises:
        PlanError: the folder does not exist or is not writable.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise PlanError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise PlanError(f"cannot write {path}: {exc.strerror or exc} (folder {folder})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise PlanError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_plan(plan: Plan, path: str | os.PathLike) -> Path:
    """Seal ``plan`` (if not yet sealed) and write it atomically as canonical JSON.

    Raises:
        PlanError: the folder is missing or not writable.
    """
    if not plan.content_hash:
        plan.seal()
    elif plan.content_hash != plan.compute_hash():
        raise PlanError("plan was changed after it was sealed: call plan.seal() again")
    return write_text_atomic(path, plan.to_json())


def plan_from_text(text: str, source: str = "plan") -> Plan:
    """Parse and verify plan JSON text (see :func:`load_plan`)."""
    def non_finite(name):
        raise PlanFileError(f"{source}: holds {name}, which no plan holds (not an smsg-ms "
                            "plan, or edited by hand)")

    try:
        data = json.loads(text, parse_constant=non_finite)
    except json.JSONDecodeError as exc:
        # text that does not start like a JSON document is some other file; a document whose
        # error is at its very end (or in a string never closed) was cut off
        if not text.strip():
            raise PlanFileError(f"{source}: empty file, not an smsg-ms plan file") from exc
        if text.lstrip()[:1] not in ("{", "["):
            raise PlanFileError(f"{source}: not JSON, so not an smsg-ms plan file (it starts "
                                f"with {text.lstrip()[:20]!r})") from exc
        ended_early = (exc.pos >= len(text.rstrip())
                       or exc.msg.startswith("Unterminated string"))
        what = "truncated" if ended_early else "not valid JSON"
        # Python's message ends where its position would follow ("... starting at")
        raise PlanFileError(f"{source}: {what} (JSON error: {exc.msg}: line {exc.lineno}, column "
                            f"{exc.colno})") from exc
    if not isinstance(data, dict) or "decisions" not in data or "content_hash" not in data:
        raise PlanFileError(f"{source}: not an smsg-ms plan file (no 'decisions' / "
                            "'content_hash'): make one with 'smsg-ms plan'")
    if data.get("format") != PLAN_FORMAT:
        raise PlanFileError(f"{source}: plan format {data.get('format')!r} is not supported "
                            f"(this smsg-ms reads format {PLAN_FORMAT})")
    try:
        plan = Plan.from_dict(data)
    except TypeError as exc:
        raise PlanFileError(f"{source}: malformed plan ({exc})") from exc
    expected = plan.compute_hash()
    if plan.content_hash != expected:
        raise PlanFileError(f"{source}: content hash mismatch (file says "
                            f"{plan.content_hash[:12]}, content gives {expected[:12]}): the file "
                            "was edited or corrupted; re-run 'smsg-ms plan'")
    return plan


def load_plan(path: str | os.PathLike) -> Plan:
    """Read a plan file and verify it.

    Raises:
        PlanFileError: missing or unreadable file, not JSON (another kind of file), truncated or
            invalid JSON, not a plan, unknown format, or content hash mismatch (edited file).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise PlanFileError(f"plan file {path} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise PlanFileError(f"{path}: not UTF-8 text, so not an smsg-ms plan file") from exc
    except OSError as exc:
        raise PlanFileError(f"cannot read plan file {path}: {exc}") from exc
    return plan_from_text(text, str(path))


def _shapes(shapes) -> list[list]:
    return [list(s) for s in shapes]


def check_plan_fits(plan: Plan, *, fingerprint: str | None = None, devices: int | None = None,
                    input_shapes=None, network: str | None = None) -> None:
    """Refuse a plan made for another network, device count or input shapes.

    Only the arguments given are compared.

    Raises:
        PlanError: naming the first mismatch.
    """
    who = f"plan for '{plan.network}'"
    if devices is not None and devices != plan.devices:
        raise PlanError(f"{who} was made for {plan.devices} devices, not {devices}: re-plan with "
                        f"--devices {devices}")
    if input_shapes is not None and _shapes(input_shapes) != _shapes(plan.input_shapes):
        raise PlanError(f"{who} was made for input shapes {_shapes(plan.input_shapes)}, the "
                        f"network gets {_shapes(input_shapes)}: re-plan with these shapes")
    if fingerprint is not None and fingerprint != plan.fingerprint:
        other = f" '{network}'" if network else ""
        raise PlanError(f"{who} does not fit the network{other}: graph fingerprint "
                        f"{fingerprint[:12]} differs from the plan's {plan.fingerprint[:12]} "
                        "(another network or other options)")
