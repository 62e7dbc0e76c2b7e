"""A progress bar (rich) that appears only when planning lasts longer than about a second."""
from __future__ import annotations

import sys
import time

#: seconds of planning before the bar appears
DELAY_S = 1.0


class LazyProgress:
    """Context manager; ``enabled=None`` means: only when stderr is a terminal.

    Nothing is drawn before :data:`DELAY_S` seconds have passed, so quick plans print nothing.
    """

    def __init__(self, enabled: bool | None, label: str):
        self.enabled = sys.stderr.isatty() if enabled is None else bool(enabled)
        self.label, self.steps, self.done = label, 0, 0
        self.bar = self.task = None
        self.start = time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        return False

    def __bool__(self):
        return self.enabled

    def total(self, steps: int) -> None:
        """Set the number of steps expected."""
        self.steps = steps
        if self.bar is not None:
            self.bar.update(self.task, total=steps)

    def advance(self) -> None:
        """One step done; starts the bar once planning has lasted :data:`DELAY_S`."""
        self.done += 1
        if not self.enabled:
            return
        if self.bar is None and time.monotonic() - self.start >= DELAY_S:
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.steps or None,
                                          completed=self.done)
        elif self.bar is not None:
            self.bar.update(self.task, completed=self.done)
