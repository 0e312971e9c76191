"""Options every command shares, and the console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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


def compact_number(value: Any) -> str:
    """A count for an 80-column table: 473 → '473', 725760 → '725.8k', 12_400_000 → '12.4M' (never cut)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}" if suffix != "k" else f"{value / 1e3:.1f}k"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"
