"""`intake-eval show` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def show() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'show' is not built yet")
