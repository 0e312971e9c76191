"""`intake-eval compare RUN_A RUN_B […]`: paired differences between runs and the sensitivity of conclusions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def compare(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders whose profiles come from the same generate config (the first is the reference), or one run with several judges.", show_default=False)],
    out: Annotated[Path | None, typer.Option("--out", help="Folder for compare.html, compare.md and compare_paired.csv (default: RUN_A/compare).", show_default=False)] = None,
) -> None:
    """Compare runs that interviewed the same profiles (e.g. another condition, patient model or judge),
    or the judges of one run.

    Paired differences with 95% CIs for every headline metric (later run minus the first, matched
    profiles); clinician rankings per run × judge with Kendall's τ, flipped orderings and changed
    paired-test conclusions against the first run's primary judge, and a one-line verdict each.
    Prints the verdict and the path of compare.html.
    """
    from intake_eval.commands.common import console
    from intake_eval.compare.build import compare_runs

    result = compare_runs(list(run_dirs), out)
    err = console()
    for item in result.comparison.sensitivities:
        err.print(f"{item.scorer.label}: {item.verdict}", soft_wrap=True, markup=False)
    err.print(f"verdict: {result.comparison.verdict}", soft_wrap=True, markup=False)
    err.print(f"Markdown: {result.markdown}", soft_wrap=True, markup=False)
    typer.echo(str(result.html))
