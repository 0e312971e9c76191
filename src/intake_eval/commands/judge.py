"""`intake-eval judge`: per-turn labels for every conversation, then metrics/*.csv."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.progress import Progress

from intake_eval.commands.common import (
    DEFAULT_RUN_DIR,
    ForceOption,
    ModelsOption,
    PromptsOption,
    NoCacheOption,
    RunDirOption,
    ShardOption,
    budget_stop_line,
)



def judge(
    judge: Annotated[list[str], typer.Option(
        "--judge", help="Judge model: an alias, a raw provider id, or offline/judge. Repeat for cross-checks: "
        "the first is the primary judge (the study: gemini, then claude-sonnet-4.6).", show_default=False)],
    mode: Annotated[str, typer.Option(
        "--mode", help="per-turn: one call per turn, seeing the conversation up to that turn (the study's design). "
        "conversation: one call labels every turn (cheaper; recorded as judge '<alias>+conversation' so both can "
        "be compared).")] = "per-turn",
    concurrency: Annotated[int, typer.Option(
        "--concurrency", help="Conversations judged at once (per-turn mode sends a conversation's turns one after "
        "another, each reusing the previous one's prompt from the provider's prompt cache; each model's rate limits "
        "still apply).")] = 64,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Only the first N ok conversations (by id): a cheap pilot.", show_default=False)] = None,
    batch: Annotated[bool, typer.Option(
        "--batch", help="Send the judge's requests as provider batches (Anthropic Message Batches; OpenAI-compatible "
        "/files + /batches: OpenAI, Together, Groq, Gemini) at the batch price, usually half. Results arrive within the provider's window "
        "(up to 24 h); rerun the same command after an interruption to collect a submitted batch, not resubmit it. "
        "Invalid answers are repaired online.")] = False,
    batch_poll: Annotated[float, typer.Option(
        "--batch-poll", help="Seconds between batch status checks.")] = 30.0,
    batch_wait: Annotated[float, typer.Option(
        "--batch-wait", help="Hours to wait for a submitted batch before stopping; the batch stays submitted and "
        "a rerun collects it.")] = 25.0,
    batch_out: Annotated[Path | None, typer.Option(
        "--batch-out", metavar="FILE", help="Write the judge's pending requests to FILE in the OpenAI batch input "
        "format (custom_id, method, url, body) for a cluster engine (`vllm run-batch`, Ray Data LLM) and judge "
        "nothing; then judge with --batch-in and the engine's output file.", show_default=False)] = None,
    batch_in: Annotated[Path | None, typer.Option(
        "--batch-in", metavar="FILE", help="Judge from an engine's output FILE in the OpenAI batch output format "
        "(id, custom_id, response{status_code, body}, error): answers are validated and repaired online, priced "
        "at the alias's prices; conversations whose requests are missing or failed in FILE stay pending. "
        "Reading the same FILE again adds nothing.", show_default=False)] = None,
    budget: Annotated[float | None, typer.Option(
        "--budget", help="Dollars for the whole run folder, as in `run --budget`: what its records already cost "
        "(generation, conversations, earlier judgments) counts. A judgment starts only if its estimated cost still "
        "fits (so judging many at once overshoots by at most about one judgment); a budget stop keeps what is "
        "judged, exits 1 saying what is left, and a rerun with a larger --budget continues. Not with --batch "
        "(a batch is submitted whole).", show_default=False)] = None,
    shard: ShardOption = None,
    no_cache: NoCacheOption = False,
    force: ForceOption = False,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
    prompts: PromptsOption = None,
) -> None:
    """Label every turn of every finished conversation with each judge, then write metrics/*.csv.

    For each clinician turn (and the patient's opening, turn 0) and each hidden domain of the profile, the judge decides asked_about (strict: the question addresses a specific symptom of the domain; open invitations never count) and disclosed, plus the turn's question_type and whether the patient kept to the disclosure rule.

    Answers are validated; an invalid answer gets one repair request, and a turn that still fails is recorded as a judge error (excluded from the rates and counted), never read as "no". Judgments go to RUN_DIR/judgments/<judge>/<clinician>.jsonl. Rerun the same command to resume: conversations already judged ok are skipped, errors are retried. The generator model may not judge.

    Example (offline, no keys): intake-eval judge --judge offline/judge
    """
    from intake_eval.commands.common import console
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.shard import parse_shard
    from intake_eval.core.store import RunPaths

    from intake_eval.judge.settings import JudgeSettings

    stage_settings = JudgeSettings.from_flags(judges=list(judge), mode=mode, concurrency=concurrency, limit=limit,
                                              budget=budget, shard=parse_shard(shard))
    if batch_poll <= 0:
        raise IntakeEvalError(f"--batch-poll must be positive (got {batch_poll})")
    if not 0 < batch_wait < float("inf"):
        raise IntakeEvalError(f"--batch-wait must be a positive number of hours (got {batch_wait})")
    if batch_out is not None and batch_in is not None:
        raise IntakeEvalError("--batch-out and --batch-in: give one (write the requests, then read the answers)")
    if (batch_out is not None or batch_in is not None) and (batch or budget is not None):
        raise IntakeEvalError("--batch-out/--batch-in cannot be combined with --batch or --budget: the engine "
                              "answers the file whole")
    if budget is not None and batch:
        raise IntakeEvalError("--budget cannot be combined with --batch: a batch is submitted and paid for whole")
    if shard is not None and batch:
        raise IntakeEvalError("--shard cannot be combined with --batch: a batch judges every conversation of the "
                              "folder (a shard's own folder holds only its conversations: judge it without --shard)")
    if len(set(judge)) != len(judge):
        raise IntakeEvalError("--judge: the same judge is given twice")
    from intake_eval.judge.batch import BatchSettings
    from intake_eval.judge.batch_files import BatchFiles
    from intake_eval.judge.stage import JudgeStage, judge_in_folder
    from intake_eval.metrics.tables import write_metrics
    from intake_eval.metrics.trials import write_trial_metrics
    from intake_eval.stage_kinds import stage_kinds

    out = console()
    kinds = stage_kinds()
    paths = RunPaths(Path(run_dir))
    files = BatchFiles(out=batch_out, into=batch_in, on_progress=lambda line: out.print(line, markup=False)) \
        if batch_out is not None or batch_in is not None else None
    settings = BatchSettings(poll_s=batch_poll, wait_s=batch_wait * 3600.0,
                             on_progress=lambda line: out.print(line)) if batch else None

    stage = JudgeStage(stage_settings, force=force, batch=settings, batch_files=files, display=_Display(out))
    outcome = judge_in_folder(paths, stage, models_file=models, use_cache=not no_cache, console=out, kinds=kinds)
    tables = write_metrics(paths, kinds)
    trials_csv = write_trial_metrics(paths)  # metrics/trials.csv when the run repeats trials
    if trials_csv is not None:
        tables["trials"] = trials_csv
    _summarize(out, paths, outcome, tables)
    pending = max((counts.get("not_judged", 0) for counts in outcome.counts.values()), default=0)
    if batch_in is not None and pending:
        out.print(f"{pending} conversations left pending (their requests are missing or failed in {batch_in}): "
                  f"write them with --batch-out, run them through the engine and judge with --batch-in again",
                  markup=False)
        raise typer.Exit(1)


class _Display:
    """A rich progress bar on stderr (silent without a console)."""

    def __init__(self, console: Any):
        self.console = console
        self.progress: Progress | None = None
        self.errors = 0

    def planned(self, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=total)

    def done(self, judgment: Any) -> None:
        self.errors += not judgment.ok
        if self.progress is not None:
            self.progress.update(self.task, advance=1, note=f"errors {self.errors}")

    def __enter__(self) -> "_Display":
        if self.console is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(TextColumn("[bold]judge[/]"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=self.console)
            self.task = self.progress.add_task("judge", total=None, note="")
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


def _summarize(out: Any, paths: Any, outcome: Any, tables: dict[str, Path]) -> None:
    import csv

    from rich import box
    from rich.table import Table

    from intake_eval.metrics import registry
    from intake_eval.report.tables import headline_metric_values

    result = outcome.result
    if result is not None:
        for label in outcome.labels:
            usage = result.usage[label]
            dollars = f"${usage.cost_usd:.2f}" + ("" if usage.cost_known else " (some prices unknown)")
            out.print(f"judge {label}: {result.judged[label]} judged ok, {result.skipped[label]} already done, "
                      f"{result.judge_errors[label]} judge errors, {result.provider_errors[label]} provider errors "
                      f"· {usage.prompt_tokens + usage.completion_tokens:,} tokens · records' cost {dollars}")
    from intake_eval.commands.common import print_money

    print_money(out, paths)
    with open(tables["clinicians"], encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["judge"] == outcome.labels[0]]
    if rows:
        several = len({(r["condition"], r["patient_mode"]) for r in rows}) > 1
        table = Table(title=f"judge {outcome.labels[0]}: medians with (undefined count); err = judge errors",
                      title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
        table.add_column("clinician", overflow="fold", min_width=16)
        table.add_column("n", justify="right")
        for metric in registry.headline_metrics():  # the declared headline metrics, as the report shows them
            table.add_column(metric.tag or metric.label, justify="right")
        table.add_column("err", justify="right")
        for row in rows:
            name = row["clinician"] + (f" · {row['condition']} · {row['patient_mode']}" if several else "")
            cells = registry.headline_cells(headline_metric_values(row))
            table.add_row(name, row["n"], *(cell.plain() for _, cell in cells), row["judge_errors"])
        out.print(table)
    out.print(f"metrics: {paths.metrics_dir}/ ({', '.join(sorted(tables))})")
    if outcome.interrupted:
        out.print("[yellow]interrupted[/]: finished judgments are saved; run the same command again to resume.")
        raise typer.Exit(130)
    if result is not None and result.aborted:
        from intake_eval.core.errors import IntakeEvalError

        label, reason = next(iter(sorted(result.aborted.items())))
        raise IntakeEvalError(f"judge {label} stopped: {reason}")
    not_started = sum(result.not_started.values()) if result is not None else 0
    if not_started:
        gate = outcome.spend_gate
        out.print(budget_stop_line(gate.left(not_started) if gate is not None else None, not_started, "judgments"))
    if result is not None and (any(result.judge_errors.values()) or any(result.provider_errors.values())):
        out.print("[red]some conversations could not be judged[/] (status in the records, counted in metrics/clinicians.csv); "
                  "run the same command again to retry them.")
        raise typer.Exit(1)
    if not_started:
        raise typer.Exit(1)
