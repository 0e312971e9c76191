"""`intake-eval report`: metrics CSVs (refreshed when stale), report/index.html, report/summary.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, RunDirOption


def report(
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge whose labels drive the numbers (default: the primary judge of the judge stage).")] = None,
    open_: Annotated[bool, typer.Option("--open", help="Open report/index.html in the default browser when done.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the report's path (no summary table).")] = False,
    figures: Annotated[str | None, typer.Option("--figures", help="Also write every chart as a standalone file in report/figures/, in these formats (comma-separated: png,svg,pdf).", show_default=False)] = None,
) -> None:
    """Write report/index.html (coverage matrix, domains, trajectories, judge agreement, drill-down,
    transcript viewer), report/summary.md and report/headline.csv; print the report's path.

    Works on a run in progress: whatever is missing is listed at the top of the report."""
    from intake_eval.commands.common import console
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.report.build import build_report
    from intake_eval.report.terminal import print_summary

    err = console()
    try:
        from intake_eval.report.figure_files import parse_formats

        formats = parse_formats(figures) if figures is not None else ()
        result = _build(err, build_report, Path(run_dir), judge, quiet, formats)
    except IntakeEvalError as exc:
        # typer 0.29 runs its own vendored click, which does not recognise click.ClickException
        # subclasses; print the one-line error and exit 2 here so the contract holds regardless.
        exc.show()
        raise typer.Exit(exc.exit_code) from None
    if not quiet:
        print_summary(err, result)
        err.print(f"Markdown summary: {result.summary}")
    if result.figures:
        err.print(f"Figures: {len(result.figures)} files in {result.figures[0].parent}")
    typer.echo(str(result.index))
    if open_:
        import webbrowser

        webbrowser.open(result.index.resolve().as_uri())


def _build(err, build_report, run_dir: Path, judge: str | None, quiet: bool, figures: tuple[str, ...]):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=quiet or not err.is_terminal) as progress:  # off a terminal it would leave a blank line
        task = progress.add_task("report", total=None)
        shards = progress.add_task("transcripts", total=None, visible=False)

        def on_step(name: str) -> None:
            progress.update(task, description=name)

        def on_shard(n: int) -> None:
            progress.update(shards, advance=n, visible=True)

        return build_report(run_dir, judge=judge, progress=on_step, shard_progress=on_shard, figures=figures)
