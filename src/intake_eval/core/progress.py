"""The one simple progress bar (rich, on stderr) that stages without a custom display share."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A labelled rich progress bar; a no-op without a console (library use, tests)."""

    def __init__(self, console: Any, label: str, total: int, completed: int = 0):
        self.bar = None
        if console is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                console=console, transient=False)
            self.task = self.bar.add_task(label, total=total, completed=completed)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def __enter__(self) -> "ProgressBar":
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
