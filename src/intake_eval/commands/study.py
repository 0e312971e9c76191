"""`intake-eval study` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from intake_eval.errors import IntakeEvalError

app = typer.Typer(help="(not built yet)")


@app.command()
def study() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'study' is not built yet")


def demo() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'demo' is not built yet")


def estimate() -> None:
    """(not built yet)"""
    raise IntakeEvalError("'estimate' is not built yet")
