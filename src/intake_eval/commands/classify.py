"""`intake-eval classify "TEXT"`: which domains a clinician utterance asks about, and its question type."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, ModelsOption, RunDirOption
from intake_eval.core.errors import IntakeEvalError


def classify(
    text: Annotated[
        str | None,
        typer.Argument(help="The clinician utterance to classify (quote it). Omit when using --file.", show_default=False),
    ] = None,
    disclosed: Annotated[
        list[str] | None,
        typer.Option(
            "--disclosed",
            help="A domain the patient has already talked about (repeatable). A question confined to "
            "disclosed domains is 'clarifying' rather than 'closed_hypothesis'.",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Classify every non-empty line of this file; prints one JSON object per line.",
                     show_default=False),
    ] = None,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
) -> None:
    """Classify a clinician utterance with the offline rule-based classifier (no model, no network).

    Prints JSON: question_type (closed_hypothesis, open, clarifying, treatment_planning, other),
    domains (the catalog domains the utterance asks about specifically: it names the domain or
    describes one of its features), scores and matched phrases per domain, and 'mentioned'
    (domains named only in advice or statements, which do not count as asking).
    Open invitations ("tell me more"), empathy and logistics never produce domains.
    The offline patient, tracker, clinicians and judge use this same classifier.
    --run-dir and --models are accepted like every command but not used.

    Example: intake-eval classify "How have you been sleeping?" --disclosed depression
    """
    try:
        _classify(text, disclosed or [], file)
    except IntakeEvalError as exc:
        # typer 0.29 runs a vendored click that does not recognise click.ClickException
        # subclasses; print the one-line error and exit 2 here so the contract holds.
        exc.show()
        raise typer.Exit(exc.exit_code) from None


def _classify(text: str | None, disclosed: list[str], file: Path | None) -> None:
    import json

    from intake_eval.catalog.classifier import classify as classify_text
    from intake_eval.catalog.classifier import domain_ids

    known = set(domain_ids())
    unknown = [domain for domain in disclosed if domain not in known]
    if unknown:
        raise IntakeEvalError(
            f"--disclosed: unknown domain '{unknown[0]}'; known domains: {', '.join(sorted(known))}"
        )
    if (text is None) == (file is None):
        raise IntakeEvalError("give either TEXT or --file FILE (exactly one)")
    if file is not None:
        try:
            lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise IntakeEvalError(f"--file {file}: cannot read ({exc.__class__.__name__}: {exc})") from None
        for line in lines:
            if line:
                found = classify_text(line, disclosed=disclosed)
                typer.echo(json.dumps({"text": line, **found.to_dict()}, ensure_ascii=False))
        return
    if not text or not text.strip():
        raise IntakeEvalError("TEXT is empty; give the clinician utterance to classify")
    found = classify_text(text, disclosed=disclosed)
    typer.echo(json.dumps(found.to_dict(), indent=2, ensure_ascii=False))
