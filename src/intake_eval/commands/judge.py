"""`intake-eval judge`: per-turn labels for every conversation, then metrics/*.csv."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, ForceOption, ModelsOption, NoCacheOption, RunDirOption

JUDGE_MODES = ("per-turn", "conversation")


def judge(
    judge: Annotated[list[str], typer.Option(
        "--judge", help="Judge model: an alias, a raw provider id, or offline/judge. Repeat for cross-checks: "
        "the first is the primary judge (the study: gemini, then claude-sonnet-4.6).", show_default=False)],
    mode: Annotated[str, typer.Option(
        "--mode", help="per-turn: one call per turn, seeing the conversation up to that turn (the study's design). "
        "conversation: one call labels every turn (cheaper; recorded as judge '<alias>+conversation' so both can "
        "be compared).")] = "per-turn",
    concurrency: Annotated[int, typer.Option(
        "--concurrency", help="Conversations judged at once (per-turn mode sends all of a conversation's turns "
        "together; each model's rate limits still apply).")] = 8,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Only the first N ok conversations (by id): a cheap pilot.", show_default=False)] = None,
    no_cache: NoCacheOption = False,
    force: ForceOption = False,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
) -> None:
    """Label every turn of every finished conversation with each judge, then write metrics/*.csv.

    For each clinician turn (and the patient's opening, turn 0) and each hidden domain of the profile, the judge decides asked_about (strict: the question addresses a specific symptom of the domain; open invitations never count) and disclosed, plus the turn's question_type and whether the patient kept to the disclosure rule.

    Answers are validated; an invalid answer gets one repair request, and a turn that still fails is recorded as a judge error (excluded from the rates and counted), never read as "no". Judgments go to RUN_DIR/judgments/<judge>/<clinician>.jsonl. Rerun the same command to resume: conversations already judged ok are skipped, errors are retried. The generator model may not judge.

    Example (offline, no keys): intake-eval judge --judge offline/judge
    """
    from intake_eval.commands.common import console
    from intake_eval.errors import IntakeEvalError
    from intake_eval.store import RunPaths

    if mode not in JUDGE_MODES:
        raise IntakeEvalError(f"--mode {mode}: choose per-turn or conversation")
    for flag, value in (("--concurrency", concurrency), ("--limit", limit)):
        if value is not None and value < 1:
            raise IntakeEvalError(f"{flag} must be at least 1 (got {value})")
    if len(set(judge)) != len(judge):
        raise IntakeEvalError("--judge: the same judge is given twice")
    out = console()
    paths = RunPaths(Path(run_dir))
    outcome = execute_judge(paths, list(judge), mode=mode, concurrency=concurrency, limit=limit,
                            models_file=models, use_cache=not no_cache, force=force, console=out)
    _summarize(out, paths, outcome)


class JudgeOutcome:
    def __init__(self, labels: list[str], result: Any, tables: dict[str, Path], interrupted: bool):
        self.labels, self.result, self.tables, self.interrupted = labels, result, tables, interrupted


def execute_judge(paths: Any, aliases: list[str], *, mode: str = "per-turn", concurrency: int = 8,
                  limit: int | None = None, models_file: Path | None = None, use_cache: bool = True,
                  force: bool = False, console: Any = None) -> JudgeOutcome:
    """The judge stage as the CLI runs it: models and keys, lock, manifest, judging with progress,
    then metrics/*.csv."""
    import asyncio

    from intake_eval.catalog import load_catalog
    from intake_eval.errors import IntakeEvalError
    from intake_eval.judging import JUDGE_PROMPTS, JudgeSetup, judge_config, judge_label, judge_stage
    from intake_eval.leakage import assert_no_generator_leak
    from intake_eval.manifest import Manifest
    from intake_eval.metrics_tables import write_metrics
    from intake_eval.models.pool import ModelPool
    from intake_eval.models.registry import load_model_specs, preflight, resolve_spec
    from intake_eval.prompts import prompt_hashes
    from intake_eval.store import RunLock
    from intake_eval.trials import write_trial_metrics

    specs = load_model_specs(models_file)
    judge_specs = {alias: resolve_spec(alias, specs) for alias in aliases}
    preflight(list(judge_specs.values()))
    if not paths.profiles.exists():
        raise IntakeEvalError(f"{paths.profiles}: no profiles here yet; run `intake-eval generate --run-dir {paths.root}` first")
    if not paths.conversation_files():
        raise IntakeEvalError(f"{paths.conversations_dir}: no conversations here yet; run `intake-eval run --run-dir {paths.root}` first")
    catalog = load_catalog()
    labels = [judge_label(alias, mode) for alias in aliases]
    with RunLock(paths):
        manifest = Manifest(paths)
        assert_no_generator_leak(manifest, "judge", aliases, specs=judge_specs)
        for alias, label in zip(aliases, labels):
            manifest.begin_stage(f"judge:{label}", judge_config(alias, judge_specs[alias].model, mode), force=force,
                                 outputs=[paths.judge_dir(label)])
        known = {entry.get("alias"): entry for entry in manifest.data.get("models", {}).get("judge", [])}
        for alias, label in zip(aliases, labels):
            known[alias] = {"alias": alias, "label": label, "mode": mode, **judge_specs[alias].public_dict()}
        manifest.record_models("judge", [known[key] for key in sorted(known)])
        manifest.data.setdefault("judges", {})["primary"] = manifest.data.get("judges", {}).get("primary") or labels[0]
        manifest.record_prompts(prompt_hashes(list(JUDGE_PROMPTS)))
        manifest.save()
        interrupted = False
        with ModelPool(specs, cache_path=paths.cache_db, use_cache=use_cache, catalog=catalog) as pool:
            setups = [JudgeSetup(label=label, alias=alias, model=pool.get(alias), mode=mode)
                      for alias, label in zip(aliases, labels)]
            display = _Display(console)
            try:
                with display:
                    result = asyncio.run(judge_stage(paths, setups, concurrency=concurrency, limit=limit,
                                                     catalog=catalog, on_planned=display.planned, on_done=display.done))
            except KeyboardInterrupt:
                interrupted = True
                result = None
            retries = pool.retry_stats()  # every failed attempt, by alias and reason
        for label, alias in zip(labels, aliases):
            counts = ({key: getattr(result, key)[label] for key in ("judged", "skipped", "judge_errors", "provider_errors")}
                      if result is not None else None)
            aborted = result.aborted.get(label) if result is not None else None
            failed = result is None or counts["judge_errors"] or counts["provider_errors"]
            status = ("interrupted" if interrupted else "incomplete" if failed
                      else "partial" if limit is not None else "done")  # --limit judged a subset only
            manifest.finish_stage(f"judge:{label}", status=status,
                                  counts=counts, usage={label: result.usage[label]} if result is not None else None,
                                  extra={"aborted": aborted, "limit": limit, "retries": retries.get(alias, {})})
        tables = write_metrics(paths)
        trials_csv = write_trial_metrics(paths)  # metrics/trials.csv when the run repeats trials
        if trials_csv is not None:
            tables["trials"] = trials_csv
    return JudgeOutcome(labels, result, tables, interrupted)


class _Display:
    """A rich progress bar on stderr (silent without a console)."""

    def __init__(self, console: Any):
        self.console = console
        self.progress = None
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
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("[bold]judge[/]"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=self.console)
            self.task = self.progress.add_task("judge", total=None, note="")
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


def _summarize(out: Any, paths: Any, outcome: JudgeOutcome) -> None:
    import csv

    from rich import box
    from rich.table import Table

    result = outcome.result
    if result is not None:
        for label in outcome.labels:
            usage = result.usage[label]
            dollars = f"${usage.cost_usd:.2f}" + ("" if usage.cost_known else " (some prices unknown)")
            out.print(f"judge {label}: {result.judged[label]} judged ok, {result.skipped[label]} already done, "
                      f"{result.judge_errors[label]} judge errors, {result.provider_errors[label]} provider errors "
                      f"· {usage.prompt_tokens + usage.completion_tokens:,} tokens · {dollars}")
    with open(outcome.tables["clinicians"], encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["judge"] == outcome.labels[0]]
    if rows:
        several = len({(r["condition"], r["patient_mode"]) for r in rows}) > 1
        table = Table(title=f"judge {outcome.labels[0]}: medians with (undefined count); err = judge errors",
                      title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
        table.add_column("clinician", overflow="fold", min_width=16)
        for column in ("n", "coverage (95% CI)", "bleed", "1st TP", "closure", "leaks", "err"):
            table.add_column(column, justify="right")
        for row in rows:
            name = row["clinician"] + (f" · {row['condition']} · {row['patient_mode']}" if several else "")
            coverage = (f"{float(row['mean_active_coverage']):.2f} ({float(row['mean_active_coverage_ci_low']):.2f}–"
                        f"{float(row['mean_active_coverage_ci_high']):.2f})" if row["mean_active_coverage"] else "—")
            table.add_row(name, row["n"], coverage,
                          f"{float(row['mean_bleed_rate']):.2f}" if row["mean_bleed_rate"] else "—",
                          f"{row['median_first_treatment_planning_turn'] or '—'} ({row['first_treatment_planning_undefined']})",
                          f"{row['median_premature_closure_turn'] or '—'} ({row['premature_closure_undefined']})",
                          row["patient_leak_count"], row["judge_errors"])
        out.print(table)
    out.print(f"metrics: {paths.metrics_dir}/ ({', '.join(sorted(outcome.tables))})")
    if outcome.interrupted:
        out.print("[yellow]interrupted[/]: finished judgments are saved; run the same command again to resume.")
        raise typer.Exit(130)
    if result is not None and result.aborted:
        from intake_eval.errors import IntakeEvalError

        label, reason = next(iter(sorted(result.aborted.items())))
        raise IntakeEvalError(f"judge {label} stopped: {reason}")
    if result is not None and (any(result.judge_errors.values()) or any(result.provider_errors.values())):
        out.print("[red]some conversations could not be judged[/] (status in the records, counted in metrics/clinicians.csv); "
                  "run the same command again to retry them.")
        raise typer.Exit(1)
