"""`intake-eval study CONFIG`, `intake-eval demo`, `intake-eval estimate CONFIG`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import (
    ForceOption,
    ModelsOption,
    NoCacheOption,
    checked_run_dir,
)

ConfigArgument = Annotated[
    Path, typer.Argument(help="Study config YAML (e.g. configs/paper.yaml, configs/demo.yaml).", show_default=False)
]
StudyRunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Run folder (default: runs/<name> from the config).", show_default=False,
                 callback=checked_run_dir),
]
PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEMO_CONFIG = PROJECT_ROOT / "configs" / "demo.yaml"


def study(
    config: ConfigArgument,
    run_dir: StudyRunDirOption = None,
    models: ModelsOption = None,
    force: ForceOption = False,
    no_cache: NoCacheOption = False,
) -> None:
    """Run a whole study from one config: generate → run → judge → report, resumable.

    Judging starts as soon as each conversation finishes, so the study takes about as long as its conversations.

    Rerun the same command after a crash or Ctrl-C to finish what is missing.

    Rerunning a finished study makes no model calls and rebuilds the report.

    A changed config is refused with the differences shown; --force starts the changed stages over.

    See the cost first: intake-eval estimate CONFIG. See progress: intake-eval status --run-dir DIR.
    """
    from intake_eval.commands.common import console
    from intake_eval.study.pipeline import run_study

    out = console()
    outcome = run_study(config, run_dir=run_dir, models_file=models, force=force, use_cache=not no_cache,
                        console=out)
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
        parts.append(f"budget reached (${budget['spent']:.2f} of ${budget['limit']:.2f} spent in this run folder; "
                     f"{budget['conversations']} conversations left, about ${budget['dollars_to_finish']:.2f} more "
                     "to finish)")
    return "; ".join(parts)


def demo(
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Run folder; emptied first so the demo starts fresh.",
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
    import shutil

    from intake_eval.commands.common import console
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.store import RunLock, RunPaths
    from intake_eval.study.pipeline import run_study

    if run_dir.exists():
        if not run_dir.is_dir():
            raise IntakeEvalError(f"--run-dir {run_dir}: exists and is not a folder")
        if any(run_dir.iterdir()) and not (run_dir / "manifest.json").exists():
            raise IntakeEvalError(f"--run-dir {run_dir}: is a folder that is not a run folder; "
                                  "choose an empty or new path (the demo empties it first)")
        with RunLock(RunPaths(run_dir)):  # refuse to wipe a folder another process is using
            pass
        shutil.rmtree(run_dir)
    out = console()
    outcome = run_study(DEMO_CONFIG, run_dir=run_dir, console=out)
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


def _cached(line) -> str:
    """The share of prompt tokens the provider's cache would serve."""
    return f"{line.cached_prompt_tokens / line.prompt_tokens:.0%}" if line.prompt_tokens else "—"


def _print_estimate(result, out) -> None:
    from rich.table import Table

    table = Table(title=f"Estimate for study '{result.study}': {result.profiles} profiles, "
                        f"{result.conversations} conversations", title_justify="left")
    widest = max((len(line.alias) + (12 if line.reasoning else 0) for line in result.lines), default=5)
    for column in ("stage", "role", "model", "calls", "prompt tok", "cached", "completion", "reasoning",
                   "$/1M in/out", "dollars", "uncached", "at caps"):
        text = column in ("stage", "role", "model")
        table.add_column(column, justify="left" if text else "right", overflow="fold", no_wrap=not text,
                         min_width=widest if column == "model" else None)
    for line in result.lines:
        if line.offline:
            prices = "— (offline)"
        elif line.input_cost_per_token is None or line.output_cost_per_token is None:
            prices = "unknown"
        else:
            prices = f"{line.input_cost_per_token * 1e6:,.2f} / {line.output_cost_per_token * 1e6:,.2f}"
        table.add_row(line.stage, line.role, line.alias + (" (reasoning)" if line.reasoning else ""),
                      f"{line.calls:,}", f"{line.prompt_tokens:,}", _cached(line), f"{line.completion_tokens:,}",
                      f"{line.reasoning_tokens:,}", prices, _fmt_money(line.dollars),
                      _fmt_money(line.dollars_without_cache), _fmt_money(line.dollars_at_cap))
    totals = {key: sum(getattr(line, key) for line in result.lines)
              for key in ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")}
    cap_values = [line.dollars_at_cap for line in result.lines]
    cap_total = None if any(v is None for v in cap_values) else sum(cap_values)
    table.add_section()
    cached_share = totals["cached_prompt_tokens"] / totals["prompt_tokens"] if totals["prompt_tokens"] else 0.0
    table.add_row("total", "", "", f"{totals['calls']:,}", f"{totals['prompt_tokens']:,}",
                  f"{cached_share:.0%}", f"{totals['completion_tokens']:,}",
                  f"{totals['reasoning_tokens']:,}", "",
                  _fmt_money(result.dollars) if result.dollars is not None
                  else f"≥ {_fmt_money(result.known_dollars)} + unknown",
                  _fmt_money(result.dollars_without_cache),
                  _fmt_money(cap_total) if cap_total is not None else "unknown")
    out.print(table)
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
              f"{a['decode_tokens_per_s']:.0f} tok/s, concurrency {a['concurrency']}, alias rpm/tpm limits.[/dim]")
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
        result = estimate_config(config, models_file=models)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return
    _print_estimate(result, Console(width=max(160, Console().width)))
    console().print("[dim]Provider ids and prices per alias: `intake-eval models`; every figure: --json.[/dim]")
