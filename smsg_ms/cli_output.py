"""Output of the command line for people and for scripts.

``--json``: the command's result as one JSON document on stdout and nothing else there (what
MindSpore or a library prints while the command works goes to stderr: file descriptor 1 points at
stderr until the document is written). Without ``--json``, long work shows a rich spinner on
stderr when stderr is a terminal, and nothing in a pipe.
"""
from __future__ import annotations

import contextlib
import os
import sys


def _plain(value):
    """orjson's fallback: tuples and sets as arrays, anything else as its text."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict
        return asdict(value)
    return str(value)


def dumps(data) -> str:
    """``data`` as indented JSON with sorted keys (deterministic: same data, same text)."""
    import orjson

    return orjson.dumps(data, default=_plain,
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
                        | orjson.OPT_NON_STR_KEYS).decode()


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True):
    """While active, everything written to stdout (Python or C++, file descriptor 1) goes to
    stderr; the descriptor is restored on exit."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def emit_json(data) -> None:
    """Write ``data`` to stdout as JSON (:func:`dumps`) and a newline."""
    sys.stdout.write(dumps(data) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def working(label: str, json_mode: bool = False):
    """A rich spinner with ``label`` on stderr while the block runs, only when stderr is a
    terminal; with ``json_mode`` the block's stdout also goes to stderr
    (:func:`stdout_to_stderr`)."""
    with stdout_to_stderr(json_mode):
        if not sys.stderr.isatty():
            yield
            return
        from rich.console import Console

        with Console(stderr=True).status(label):
            yield


def wrap_whole_words(text: str, width: int) -> list[str]:
    """``text``'s lines wrapped at spaces to ``width`` columns, never inside a word: a name
    longer than ``width`` stays whole on its own line (rich folds it; ``textwrap`` with
    ``break_long_words`` and ``break_on_hyphens`` off does not)."""
    import textwrap

    return [part for line in text.split("\n")
            for part in (textwrap.wrap(line, max(width, 1), break_long_words=False,
                                       break_on_hyphens=False) or [""])]


def console():
    """A ``rich`` console whose closed stdout raises ``BrokenPipeError`` (to :func:`main`,
    which exits 0) instead of rich's default ``SystemExit(1)``. Off a terminal (a pipe, a
    file) a line of text is wrapped at spaces only (:func:`wrap_whole_words`): rich would fold
    a name longer than the width in two; tables are rich's own."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError("stdout closed")

        def print(self, *objects, **kwargs):
            if self.is_terminal or len(objects) != 1 or not isinstance(objects[0], str) \
                    or set(kwargs) - {"markup", "highlight"}:
                return super().print(*objects, **kwargs)
            plain = self.render_str(objects[0], markup=kwargs.get("markup")).plain
            for line in wrap_whole_words(plain, self.width):
                super().print(line, markup=False, highlight=False, soft_wrap=True)

    return PipeConsole()


def check_writable(path: str) -> None:
    """Refuse an output path before any work: a folder, a missing folder or one not writable.

    Raises:
        smsg_ms.plan.PlanFileError: the one-line reason (bad input: exit 2).
    """
    from .plan import PlanFileError

    if os.path.isdir(path):
        raise PlanFileError(f"cannot write {path}: it is a folder; name a file in it "
                        f"({os.path.join(path, 'NAME.json')})")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PlanFileError(f"cannot write {path}: folder {folder} does not exist (create it, "
                        "or name a file in an existing folder)")
    if not os.access(folder, os.W_OK):
        raise PlanFileError(f"cannot write {path}: folder {folder} is not writable (name a file in "
                        "a folder you can write)")


@contextlib.contextmanager
def progress_steps(label: str, total: int, json_mode: bool = False, quiet: bool = False):
    """A rich progress bar of ``total`` steps on stderr while the block runs, only when stderr
    is a terminal (and not ``quiet``); nothing in a pipe. Yields ``step(name)``, to call as each
    step starts: it completes the previous one and shows ``label: name``. With ``json_mode`` the
    block's stdout goes to stderr (:func:`stdout_to_stderr`)."""
    with stdout_to_stderr(json_mode):
        if quiet or not sys.stderr.isatty():
            yield lambda name: None
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn)

        bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                       MofNCompleteColumn(), TimeElapsedColumn(),
                       console=Console(stderr=True), transient=True)
        task = bar.add_task(label, total=total)
        started = [0]

        def step(name: str) -> None:
            bar.update(task, completed=started[0], description=f"{label}: {name}")
            started[0] += 1

        with bar:
            yield step
