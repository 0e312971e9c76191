"""`intake-eval classify` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def classify() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'classify' is not built yet")
