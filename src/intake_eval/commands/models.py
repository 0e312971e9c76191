"""`intake-eval models`: the model aliases, their provider ids and parameters, and whether each
needed API key is set (never its value); ``--check`` sends each model one tiny request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import ModelsOption

StudyCheckOption = Annotated[
    Path | None,
    typer.Option("--study", metavar="CONFIG",
                 help="With --check (or alone): check every model this study config uses.", show_default=False),
]


def models(
    models_file: ModelsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the aliases as JSON on stdout.")] = False,
    check: Annotated[
        list[str] | None,
        typer.Option("--check", metavar="MODEL",
                     help="Send this alias or provider id one tiny request and print its latency or the server's "
                          "error (repeat for several). Exit 2 naming any key variable that is not set, 1 if a "
                          "model does not answer."),
    ] = None,
    study: StudyCheckOption = None,
) -> None:
    """List model aliases (configs/models.yaml merged with --models FILE): provider id, role,
    temperature, max tokens, reasoning, endpoint limits, and whether the API key each one needs
    is set in the environment. Key values are never shown.

    A model argument elsewhere may be one of these aliases, a raw provider id (openai/…,
    hosted_vllm/…, gemini/…, together_ai/…) or an offline participant (offline/…).
    """
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.llm.registry import (
        key_is_set,
        load_model_specs,
        needed_key,
        preflight,
        resolve_spec,
    )

    try:
        specs = load_model_specs(models_file)
        names = list(dict.fromkeys(check or []))
        if study is not None:
            from intake_eval.study.config import load_study_config

            names += [name for name in load_study_config(study).model_names() if name not in names]
        chosen = [resolve_spec(name, specs) for name in names]
        preflight(chosen)
    except IntakeEvalError as error:
        # typer 0.29 runs a vendored click that does not recognise click.ClickException subclasses:
        # print the one line and exit 2 here so the contract holds.
        error.show()
        raise typer.Exit(error.exit_code) from None
    if names:
        _check(specs, names)
        return

    rows = []
    for alias, spec in specs.items():
        rows.append({
            "alias": alias,
            "model": spec.model,
            "role": spec.description,
            "temperature": spec.temperature,
            "max_tokens": spec.max_tokens,
            "reasoning": spec.reasoning,
            "api_base": spec.api_base,
            "rpm": spec.rpm,
            "max_concurrency": spec.max_concurrency,
            "key_env": needed_key(spec),
            "key_set": key_is_set(spec),
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return

    from rich.console import Console
    from rich.table import Table

    table = Table(title="model aliases", title_justify="left")
    for column in ("alias", "provider id", "role", "temp", "max tok", "reasoning", "limits", "API key"):
        table.add_column(column, overflow="fold")
    for row in rows:
        limits = ", ".join(part for part in (
            f"{row['rpm']} rpm" if row["rpm"] else "", f"{row['max_concurrency']} in flight" if row["max_concurrency"] else "",
        ) if part) or "-"
        if row["key_env"] is None:
            key = "not needed"
        else:
            key = f"[green]{row['key_env']} set[/green]" if row["key_set"] else f"[red]{row['key_env']} missing[/red]"
        model = row["model"] + (f"\n@ {row['api_base']}" if row["api_base"] else "")
        table.add_row(row["alias"], model, row["role"] or "-",
                      "-" if row["temperature"] is None else f"{row['temperature']:g}",
                      "-" if row["max_tokens"] is None else str(row["max_tokens"]),
                      "yes" if row["reasoning"] else "no", limits, key)
    Console(width=max(120, Console().width)).print(table)


def _check(specs, names: list[str]) -> None:
    """One request per model, concurrently; one line each with latency or error; exit 1 if any failed."""
    import asyncio

    from intake_eval.llm.check import check_models

    results = asyncio.run(check_models(specs, names))
    for result in results:
        where = result.model + (f" @ {result.api_base}" if result.api_base else "")
        latency = f" in {result.latency_s:.2f} s" if result.latency_s is not None else ""
        status = "ok" if result.ok else "FAILED"
        typer.echo(f"{status:6} {result.name} ({where}){latency}: {result.detail}")
    failed = [result.name for result in results if not result.ok]
    if failed:
        typer.echo(f"failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
