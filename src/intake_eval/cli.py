"""Thin Typer CLI. Each command lives in intake_eval/commands/<name>.py; heavy imports happen
inside commands so `intake-eval --help` answers fast.

Before any command runs, a `.env` in the working folder fills the variables the environment lacks
(the real environment wins); the names it set travel in the click context (``ctx.obj``) so
`models` can say where each key came from. Typer's shell completion is on
(`--install-completion`, `--show-completion`)."""

from __future__ import annotations

import os
import warnings

import typer
from typer.core import TyperGroup

from intake_eval.commands import (
    annotate,
    classify,
    compare,
    export,
    generate,
    init,
    judge,
    merge,
    models,
    phenotypes,
    qc,
    report,
    run,
    show,
    status,
    study,
    view,
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


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """intake-eval: measure intake interviews by LLM clinicians."""
    import warnings

    from intake_eval.core.envfile import load_env_file

    warnings.showwarning = _show_warning
    ctx.obj = {"env_file_keys": load_env_file()}


def _register() -> None:
    # Single-command modules expose a function with the command's name; groups expose a Typer app.
    app.command("generate")(generate.generate)
    app.add_typer(phenotypes.app, name="phenotypes")
    app.command("run")(run.run)
    app.command("judge")(judge.judge)
    app.command("report")(report.report)
    app.command("compare")(compare.compare)
    app.command("view")(view.view)
    app.command("study")(study.study)
    app.command("demo")(study.demo)
    app.command("estimate")(study.estimate)
    app.command("merge")(merge.merge)
    app.command("status")(status.status)
    app.command("models")(models.models)
    app.command("classify")(classify.classify)
    app.command("show")(show.show)
    app.command("export")(export.export)
    app.command("qc-patient")(qc.qc_patient)
    app.add_typer(annotate.app, name="annotate")
    app.command("init")(init.init)


_register()


def main() -> None:
    # Offline safety for litellm, before anything can import it.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    app()


if __name__ == "__main__":
    main()
