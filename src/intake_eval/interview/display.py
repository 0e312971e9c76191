"""The run stage's live progress display (rich, on stderr)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from intake_eval.interview.plan import RunTotals


class RunDisplay:
    """Rich progress on stderr: done / failed / in flight, tokens, dollars so far, ETA."""

    def __init__(self, console: Any, total: int):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(compact=True),
            console=console, transient=False, refresh_per_second=4,
        )
        self.task = self.progress.add_task("run", total=total, status="")

    def update(self, totals: "RunTotals") -> None:
        dollars = f"${totals.dollars:.2f}" + ("" if totals.cost_known else "+ (some prices unknown)")
        status = (f"ok {totals.ok} failed {totals.failed} in flight {totals.in_flight} · "
                  f"{totals.tokens / 1000:.0f}k tok {dollars}")
        self.progress.update(self.task, completed=totals.ok + totals.failed, total=max(totals.to_run, 1), status=status)

    def __enter__(self) -> "RunDisplay":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class NoDisplay:
    """Stands in for RunDisplay when there is no console (library use)."""

    def __enter__(self) -> "NoDisplay":
        return self

    def __exit__(self, *exc: object) -> None:
        return None
