"""`intake-eval models` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def models() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'models' is not built yet")
