"""Thin Typer CLI. Each command lives in intake_eval/commands/<name>.py; heavy imports happen
inside commands so `intake-eval --help` answers fast.

Before any command runs, a `.env` in the working folder fills the variables the environment lacks
(the real environment wins); the names it set travel in the click context (``ctx.obj``) so
`models` can say where each key came from. Typer's shell completion is on
(`--install-completion`, `--show-completion`)."""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from functools import cache
from typing import Any

import typer
from typer.core import TyperGroup

# Every command: its name, the module in intake_eval/commands/ that holds it, and the attribute there
# (a function for a single command, a Typer app for a group), in the order `--help` lists them.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("generate", "generate", "generate"),
    ("phenotypes", "phenotypes", "app"),
    ("run", "run", "run"),
    ("judge", "judge", "judge"),
    ("report", "report", "report"),
    ("compare", "compare", "compare"),
    ("view", "view", "view"),
    ("study", "study", "study"),
    ("demo", "study", "demo"),
    ("estimate", "study", "estimate"),
    ("merge", "merge", "merge"),
    ("status", "status", "status"),
    ("models", "models", "models"),
    ("classify", "classify", "classify"),
    ("show", "show", "show"),
    ("export", "export", "export"),
    ("qc-patient", "qc", "qc_patient"),
    ("annotate", "annotate", "app"),
    ("init", "init", "init"),
)

# prints; a recorder replaces it while recording (a private hook typeshed does not declare)
_DEFAULT_SHOW_IMPL = warnings._showwarnmsg_impl  # type: ignore[attr-defined]


class _OneLineErrors(TyperGroup):
    """Every user-facing error (ours, a click usage error, a filesystem fault on the run folder) as one
    `error: …` line and exit 2."""

    def invoke(self, ctx):
        from intake_eval.core.errors import ClickException, IntakeEvalError
        from intake_eval.core.fs import filesystem_errors

        try:
            with filesystem_errors():
                return super().invoke(ctx)
        except IntakeEvalError as error:
            error.show()
            raise typer.Exit(error.exit_code) from None
        except ClickException as error:
            hint = ""
            command = getattr(getattr(error, "ctx", None), "command_path", "")
            if command:
                hint = f" (see `{command} --help`)"
            IntakeEvalError(error.format_message() + hint).show()
            raise typer.Exit(2) from None


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI with every command, or with the one named ``only``: a command's own invocation builds its
    command alone (building each command's parameters from its signature is a measurable part of the
    time before a run's first request)."""
    app = typer.Typer(
        cls=_OneLineErrors,
        name="intake-eval",
        help=(
            "Measure how well LLM clinicians run a mental-health intake interview: simulated patients with "
            "hidden comorbid conditions, 12-turn intakes, per-turn LLM judges, coverage reports.\n\n"
            "Pipeline: generate → run → judge → report (or `study CONFIG` for all of them; `demo` offline)."
        ),
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # errors print as one `error: …` line (IntakeEvalError.show), not a truncating box
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name, module, attribute in COMMANDS:
        if only is None or name == only:
            target = getattr(importlib.import_module(f"intake_eval.commands.{module}"), attribute)
            if isinstance(target, typer.Typer):
                app.add_typer(target, name=name)
            else:
                app.command(name)(target)
    return app


@cache
def _full_app() -> typer.Typer:
    return build_app()


def __getattr__(name: str) -> Any:
    """``intake_eval.cli.app``: the CLI with every command (what tests and embedding code invoke)."""
    if name == "app":
        return _full_app()
    raise AttributeError(f"module 'intake_eval.cli' has no attribute {name!r}")


def _version(value: bool) -> None:
    if value:
        from intake_eval import __version__

        typer.echo(f"intake-eval {__version__}")
        raise typer.Exit()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning (e.g. a corrupt JSONL line skipped) as one `warning: …` line, not a source dump.

    When warnings are being recorded (warnings.catch_warnings(record=True), as pytest does), the
    record is kept as well.
    """
    import sys
    import warnings

    print(f"warning: {message}", file=file if file is not None else sys.stderr)
    recorder = warnings._showwarnmsg_impl  # type: ignore[attr-defined]  # private hook, not in typeshed
    if recorder is not _DEFAULT_SHOW_IMPL:
        recorder(warnings.WarningMessage(message, category, filename, lineno, file, line))


def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """intake-eval: measure intake interviews by LLM clinicians."""
    import warnings

    from intake_eval.core.envfile import load_env_file

    warnings.showwarning = _show_warning
    ctx.obj = {"env_file_keys": load_env_file()}


def main() -> None:
    # Offline safety for litellm, before anything can import it.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    named = sys.argv[1] if len(sys.argv) > 1 else None
    build_app(only=named if named in {name for name, _, _ in COMMANDS} else None)()


if __name__ == "__main__":
    main()
