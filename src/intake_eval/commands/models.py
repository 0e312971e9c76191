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
    ctx: typer.Context,
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
    temperature, max tokens, reasoning, endpoint limits, prices per 1M tokens (input, cached input,
    output, and their source: the alias's override or litellm's table), and whether the API key each
    one needs is set, in the environment or in ./.env. Key values are never shown.

    A model argument elsewhere may be one of these aliases, a raw provider id (openai/…,
    hosted_vllm/…, gemini/…, together_ai/…) or an offline participant (offline/…).
    """
    from intake_eval.core.envfile import key_source
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.llm.base import api_base_label
    from intake_eval.llm.prices import model_prices
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

    from_env_file = (ctx.obj or {}).get("env_file_keys", frozenset())
    rows = []
    for alias, spec in specs.items():
        key_env = needed_key(spec)
        rows.append({
            "alias": alias,
            "model": spec.model,
            "role": spec.description,
            "temperature": spec.temperature,
            "max_tokens": spec.max_tokens,
            "reasoning": spec.reasoning,
            "api_base": api_base_label(spec.api_base) if spec.api_base else None,
            "rpm": spec.rpm,
            "max_concurrency": spec.max_concurrency,
            "key_env": key_env,
            "key_set": key_is_set(spec),
            "key_source": None if key_env is None else key_source(key_env, from_env_file),
            **model_prices(spec).to_dict(),
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console

    typer.echo(_listing(rows, Console().width))


def per_million_text(value: float | None) -> str:
    """A price per 1M tokens in full (2.5 → '2.50', 0.075 → '0.075', None → '—'): never rounded away."""
    if value is None:
        return "—"
    text = f"{value:,.6f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


def _listing(rows: list[dict], width: int) -> str:
    """One block per alias, wrapped between words to the terminal's width (80 columns stay readable;
    no number is ever cut): the alias and provider id, then indented detail lines."""
    import textwrap

    def wrapped(text: str, indent: str) -> list[str]:
        return textwrap.wrap(text, max(width, 40), initial_indent=indent, subsequent_indent=indent + "  ",
                             break_long_words=False, break_on_hyphens=False)

    lines = ["model aliases (prices: dollars per 1M tokens)"]
    for row in rows:
        limits = ", ".join(part for part in (
            f"{row['rpm']} rpm" if row["rpm"] else "",
            f"{row['max_concurrency']} in flight" if row["max_concurrency"] else "") if part) or "none"
        if row["key_env"] is None:
            key = "API key: not needed"
        elif row["key_set"]:
            key = f"API key: {row['key_env']} set (from {row['key_source']})"
        else:
            key = f"API key: {row['key_env']} missing"
        settings = (f"temp {'-' if row['temperature'] is None else format(row['temperature'], 'g')}, "
                    f"max tokens {'-' if row['max_tokens'] is None else row['max_tokens']}, "
                    f"reasoning {'yes' if row['reasoning'] else 'no'}, limits {limits}")
        prices = (f"price: input {per_million_text(row['input_per_1m'])}, cached input "
                  f"{per_million_text(row['cached_input_per_1m'])}, output {per_million_text(row['output_per_1m'])}"
                  f" ({row['price_source']})")
        lines.append("")
        lines += wrapped(f"{row['alias']}  {row['model']}" + (f" @ {row['api_base']}" if row["api_base"] else ""), "")
        if row["role"]:
            lines += wrapped(row["role"], "    ")
        for detail in (settings, prices, key):
            lines += wrapped(detail, "    ")
    return "\n".join(lines)


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
