"""Options every command shares, and the console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RunDirOption = Annotated[
    Path,
    typer.Option("--run-dir", help="Run folder to read and write (created if missing).", show_default=True),
]
ModelsOption = Annotated[
    Path | None,
    typer.Option("--models", help="Extra model aliases (YAML) merged over configs/models.yaml.", show_default=False),
]
ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Start this stage over if its configuration changed (old files move to superseded/)."),
]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Bypass the response cache (still writes to it).")]

DEFAULT_RUN_DIR = Path("runs/default")


def console():
    """A rich console on stderr for progress and messages (stdout stays for data such as JSON)."""
    from rich.console import Console

    return Console(stderr=True)
