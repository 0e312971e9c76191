"""`intake-eval report` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def report() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'report' is not built yet")
