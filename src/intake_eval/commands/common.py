"""Options every command shares, and the console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.fs import blocking_file


def checked_run_dir(value: Path | None) -> Path | None:
    """--run-dir must be a folder (or not exist yet): a file there is refused before any work."""
    if value is None:
        return value
    blocker = value if value.exists() and not value.is_dir() else blocking_file(value)
    if blocker is not None:
        where = "" if blocker == value else f" ({blocker} is a file)"
        raise IntakeEvalError(f"--run-dir {value}: is not a folder{where}; choose a folder (it is created if missing)")
    return value


RunDirOption = Annotated[
    Path,
    typer.Option("--run-dir", help="Run folder to read and write (created if missing).", show_default=True,
                 callback=checked_run_dir),
]
ModelsOption = Annotated[
    list[Path] | None,
    typer.Option("--models", show_default=False, metavar="<path>",
                 help="Extra model aliases (YAML) merged over configs/models.yaml. Repeatable: files merge in the "
                      "order given, a later file's alias replacing an earlier one's."),
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


def print_money(out: Any, run_dir: Any) -> None:
    """The closing money line of a command: the folder's billed, saved-by-the-cache and records' cost figures
    (the names status, the report and metrics/cost*.csv use)."""
    from intake_eval.commands.status import money_lines
    from intake_eval.core.calls import money_figures
    from intake_eval.core.manifest import Manifest
    from intake_eval.core.store import RunPaths

    paths = run_dir if isinstance(run_dir, RunPaths) else RunPaths(run_dir)
    if not paths.manifest.exists():
        return
    try:
        manifest = Manifest(paths).data
    except Exception:  # a malformed manifest is the status command's to explain
        return
    out.print(f"run folder: {money_lines(money_figures(paths, manifest))[0]}", markup=False)


def budget_left_text(left: dict, setting: str = "--budget") -> str:
    """What a budget stop left, in the one wording of run, judge and study: '$X of $Y spent in this run
    folder; N conversations [and M judgments] left, about $Z more to finish (<setting> W or more)'."""
    more = left["dollars_to_finish"]
    work = (f"{left['conversations']} conversations and {left['judgments']} judgments left" if left.get("judgments")
            else f"{left['conversations']} conversations left to run")
    return (f"${left['spent']:.2f} of ${left['limit']:.2f} spent in this run folder; {work}, about ${more:.2f} more "
            f"to finish ({setting} {left['spent'] + more:.2f} or more)")


def budget_stop_line(left: dict | None, not_started: int, what: str = "conversations") -> str:
    """One line: what the budget stop left to run, and roughly what finishing would cost."""
    if not left:
        return f"[yellow]budget reached[/]: {not_started} {what} not started; run again with a larger --budget."
    return f"[yellow]budget reached[/]: {budget_left_text(left)}."
