"""`intake-eval qc` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def qc_patient() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'qc' is not built yet")
