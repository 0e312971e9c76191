"""`intake-eval study CONFIG`, `intake-eval demo`, `intake-eval estimate CONFIG`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import (
    CatalogOption,
    ForceOption,
    ModelsOption,
    NoCacheOption,
    PromptsOption,
    ShardOption,
    budget_left_text,
    checked_run_dir,
)

ConfigArgument = Annotated[
    Path, typer.Argument(help="Study config YAML (e.g. configs/paper.yaml), or a bundled config's name (paper, demo, "
                         "local). Its prompts_dir:, catalog: and phenotypes: [ids] name your own files.",
                         show_default=False)
]
StudyRunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Run folder (default: runs/<name> from the config).", show_default=False,
                 callback=checked_run_dir),
]


def study(
    config: ConfigArgument,
    run_dir: StudyRunDirOption = None,
    models: ModelsOption = None,
    force: ForceOption = False,
    no_cache: NoCacheOption = False,
    prompts: PromptsOption = None,
    catalog: CatalogOption = None,
    shard: ShardOption = None,
) -> None:
    """Run a whole study from one config: generate → run → judge → report, resumable.

    Judging starts as soon as each conversation finishes, so the study takes about as long as its conversations.

    Rerun the same command after a crash or Ctrl-C to finish what is missing.

    Rerunning a finished study makes no model calls and rebuilds the report.

    A changed config is refused with the differences shown; --force starts the changed stages over.

    Past one machine: run --shard 1/N … N/N (default folders runs/<name>.shard-<i>-of-<N>), then
    intake-eval merge SHARD_DIR… --into DIR.

    See the cost first: intake-eval estimate CONFIG. See progress: intake-eval status --run-dir DIR.
    """
    from intake_eval.commands.common import console
    from intake_eval.core.shard import parse_shard
    from intake_eval.study.pipeline import run_study

    out = console()
    outcome = run_study(config, run_dir=run_dir, models_file=models, force=force, use_cache=not no_cache,
                        console=out, catalog_dir=catalog, shard=parse_shard(shard))
    typer.echo(str(outcome.report_path))
    missing = _incomplete(outcome.counts)
    if missing:
        from rich.markup import escape

        out.print(f"[yellow]incomplete[/]: {escape(missing)}; the report shows what there is. Run the same command again "
                  "to retry (a budget stop needs a larger budget in the config).")
        raise typer.Exit(1)


def _incomplete(counts: dict) -> str:
    """'' when every planned conversation is ok and judged by every judge, else what is missing."""
    run = counts.get("run", {})
    parts = [f"{run[key]} conversations {key.replace('_', ' ')}" for key in ("failed", "not_started") if run.get(key)]
    for label, judged in counts.get("judge", {}).items():
        problems = {key: value for key, value in judged.items() if key != "done" and value}
        if problems:
            parts.append(f"judge {label}: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in problems.items()))
    formulations = counts.get("formulations", {})
    if formulations.get("provider_error"):
        parts.append(f"{formulations['provider_error']} formulations failed at the provider")
    if formulations.get("invalid_this_time"):
        parts.append(f"{formulations['invalid_this_time']} formulations not valid after one repair")
    parts += [f"stopped: {reason}" for reason in counts.get("stopped", [])]
    skipped = counts.get("skipped_inputs") or {}
    if skipped:
        files = ", ".join(f"{name}: {n}" for name, n in skipped.items())
        parts.append(f"{sum(skipped.values())} unreadable input lines left out, the study is short by those "
                     f"records ({files})")
    budget = counts.get("budget")
    if budget:
        parts.append(f"budget reached: {budget_left_text(budget, 'budget:')}")
    return "; ".join(parts)


def demo(
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Run folder: new or empty, or one an earlier demo made "
                                      "(its contents move to superseded/; any other folder is refused).",
                                      callback=checked_run_dir)]
    = Path("runs/demo"),
) -> None:
    """The offline study end to end (configs/demo.yaml) in a fresh run folder: simulated patients,
    a screening clinician (the ceiling), an anchored one (the floor) and a drifting one in between,
    a rule-based judge.

    No network, no keys, under a minute. Prints where the report is.
    """
    typer.echo(str(_fresh_demo(run_dir)))


def _fresh_demo(run_dir: Path) -> Path:
    from intake_eval.commands.common import console
    from intake_eval.core.package_data import package_folder
    from intake_eval.study.demo_folder import prepare_demo_folder
    from intake_eval.study.pipeline import run_study

    prepare_demo_folder(run_dir)
    out = console()
    outcome = run_study(package_folder("configs") / "demo.yaml", run_dir=run_dir, console=out)
    out.print(f"[bold green]Report:[/bold green] {outcome.report_path}  (open it in a browser; "
              f"`intake-eval status --run-dir {run_dir}` shows the manifest)")
    return outcome.report_path


def _fmt_money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:,.4f}"


def _fmt_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


def _prices(line) -> str:
    if line.offline:
        return "— (offline)"
    if line.input_cost_per_token is None or line.output_cost_per_token is None:
        return "unknown"
    return f"{line.input_cost_per_token * 1e6:,.2f}/{line.output_cost_per_token * 1e6:,.2f}"


def _cached(line) -> str:
    """The share of prompt tokens the provider's cache would serve."""
    return f"{line.cached_prompt_tokens / line.prompt_tokens:.0%}" if line.prompt_tokens else "—"


def _stage_role(line) -> str:
    return line.stage if line.role in (line.stage, "generator") else f"{line.stage} {line.role}"


def _estimate_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], total: tuple[str, ...],
                    width: int) -> str:
    """One estimate table as plain lines within ``width`` columns: the two text columns wrap between
    words (an alias stays whole), numbers are right-aligned, never wrapped and never cut."""
    cells = [[column, *(row[index] for row in (*rows, total))] for index, column in enumerate(columns)]
    numbers = [max(len(cell) for cell in column) for column in cells[2:]]
    room = width - sum(numbers) - 2 * (len(columns) - 1)
    words = [max(len(word) for cell in column for word in cell.split() or [""]) for column in cells[:2]]
    whole = [max(len(cell) for cell in column) for column in cells[:2]]
    stage = max(words[0], min(whole[0], room - whole[1]))
    widths = [stage, max(words[1], min(whole[1], room - stage)), *numbers]

    def lines_of(row: tuple[str, ...]) -> list[str]:
        parts = [textwrap.wrap(cell, widths[i], break_long_words=False) or [""] if i < 2 else [cell]
                 for i, cell in enumerate(row)]
        out = []
        for depth in range(max(len(part) for part in parts)):
            texts = [part[depth] if depth < len(part) else "" for part in parts]
            out.append("  ".join(text.ljust(widths[i]) if i < 2 else text.rjust(widths[i])
                                 for i, text in enumerate(texts)).rstrip())
        return out

    rule = "─" * (sum(widths) + 2 * (len(columns) - 1))
    body = [line for row in rows for line in lines_of(row)]
    return "\n".join([title, *lines_of(columns), rule, *body, rule, *lines_of(total)])


def _print_estimate(result, out) -> None:
    from intake_eval.commands.common import compact_number

    lines = result.lines
    labels = [(_stage_role(line), line.alias + (" (reasoning)" if line.reasoning else "")) for line in lines]
    totals = {key: sum(getattr(line, key) for line in lines)
              for key in ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")}
    cached_share = totals["cached_prompt_tokens"] / totals["prompt_tokens"] if totals["prompt_tokens"] else 0.0
    out.print(f"Estimate for study '{result.study}': {result.profiles} profiles, {result.conversations} conversations\n")
    out.out(_estimate_table(
        "Calls and tokens (k = thousand, M = million; output includes reasoning)",
        ("stage", "model", "calls", "prompt", "cached", "output", "reasoning"),
        [(*label, compact_number(line.calls), compact_number(line.prompt_tokens), _cached(line),
          compact_number(line.completion_tokens), compact_number(line.reasoning_tokens))
         for label, line in zip(labels, lines)],
        ("total", "", compact_number(totals["calls"]), compact_number(totals["prompt_tokens"]), f"{cached_share:.0%}",
         compact_number(totals["completion_tokens"]), compact_number(totals["reasoning_tokens"])), out.width))
    cap_values = [line.dollars_at_cap for line in lines]
    cap_total = None if any(v is None for v in cap_values) else sum(cap_values)
    out.out("")
    out.out(_estimate_table(
        "Dollars ($/1M = price per million tokens in/out)",
        ("stage", "model", "$/1M in/out", "dollars", "uncached", "at caps"),
        [(*label, _prices(line), _fmt_money(line.dollars), _fmt_money(line.dollars_without_cache),
          _fmt_money(line.dollars_at_cap)) for label, line in zip(labels, lines)],
        ("total", "", "", _fmt_money(result.dollars) if result.dollars is not None
         else f"≥ {_fmt_money(result.known_dollars)} + unknown", _fmt_money(result.dollars_without_cache),
         _fmt_money(cap_total) if cap_total is not None else "unknown"), out.width))
    from rich.table import Table

    stages = Table(title="Wall time, lower bound", title_justify="left")
    stages.add_column("stage")
    stages.add_column("at least", justify="right")
    for stage, seconds in result.wall_s.items():
        label = "whole study (judging overlaps the run)" if stage == "study" else stage
        stages.add_row(label, _fmt_seconds(seconds))
    out.print(stages)
    if result.unknown_price_models:
        out.print(f"[yellow]Unknown price for: {', '.join(result.unknown_price_models)} — set "
                  "input_cost_per_token/output_cost_per_token on the alias to include it.[/yellow]")
    a = result.assumptions
    out.print(f"[dim]Prompts rendered from the real templates for {result.sampled_profiles} sampled profiles and "
              f"scaled; answers assumed {a['answer_tokens']} tokens, "
              f"reasoning models +{a['reasoning_overhead_tokens']} "
              f"per call (up to their cap); 'at caps' = dollars if every answer used its max_tokens. No failures, "
              f"repairs or response-cache hits counted. Wall time: {a['first_token_s']} s first token + "
              f"{a['decode_tokens_per_s']:.0f} tok/s, concurrency {a['concurrency']}, alias rpm/tpm limits; "
              f"local/ models: {a['local_tokens_per_s']['prompt']:.0f} prompt + "
              f"{a['local_tokens_per_s']['generated']:.0f} generated tok/s of this machine's CPU per server, "
              "its calls adding up.[/dim]")
    out.print("[dim]Provider prompt caching: each call reads the prefix it shares with the same role's previous "
              "call (Anthropic: up to the breakpoints it marked), once that prefix reaches the provider's minimum; "
              "cached input at the provider's published cached price (litellm's table or the alias's override), "
              "the input price where none is published (no saving claimed). 'cached' = share of prompt tokens a prefix "
              "cache would serve; "
              "'uncached' = the same study without provider prompt caching.[/dim]")
    for alias, cache in a.get("prompt_cache", {}).items():
        if cache["read_cost_per_token"] is not None:
            write = cache["write_cost_per_token"]
            out.print(f"[dim]  {alias}: {'breakpoints' if cache['breakpoints'] else 'automatic'}, from "
                      f"{cache['min_tokens']:,} tokens; cached read ${cache['read_cost_per_token'] * 1e6:,.3f}/1M"
                      + (f", write ${write * 1e6:,.3f}/1M" if write is not None else "") + "[/dim]")


def estimate(
    config: ConfigArgument,
    models: ModelsOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print the estimate as JSON on stdout."),
    prompts: PromptsOption = None,
    catalog: CatalogOption = None,
) -> None:
    """What a study will cost before anything is spent: per stage and model, the number of calls,
    prompt and completion tokens (measured on the real prompts of sampled profiles, reasoning
    overhead included), dollars from the price table (unknown prices shown as unknown), and a
    wall-time lower bound from the concurrency and the aliases' rate limits. Runs offline.
    """
    from rich.console import Console

    from intake_eval.commands.common import console
    from intake_eval.study.pipeline import estimate_config

    with console().status("Rendering sample prompts and counting tokens…"):
        result = estimate_config(config, models_file=models, catalog_dir=catalog)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return
    _print_estimate(result, Console())
    console().print("[dim]Provider ids and prices per alias: `intake-eval models`; every figure: --json.[/dim]")
