"""`intake-eval run`: the intake conversations (patient speaks first, then N clinician turns)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.core.limits import DEFAULT_TURNS
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



def run(
    clinician: Annotated[list[str], typer.Option(
        "--clinician", help="Clinician model under test: an alias, a raw provider id, or offline/screener|offline/drifting|offline/anchored. Repeat for several.",
        show_default=False)],
    patient: Annotated[list[str] | None, typer.Option(
        "--patient", help="Model that plays the patient (default gpt-4o, the study's; offline/patient needs no key). "
        "Repeat for several: every profile is interviewed by each patient model, the id gains .p-<patient>, and "
        "the report pools the headline over them (equal weight per patient model) with a per-patient breakdown.",
        show_default=False)] = None,
    patient_mode: Annotated[str, typer.Option(
        "--patient-mode", help="prompted: one prompt with every domain and the disclosure rule (the study's design). "
        "tracked: a tracker unlocks a hidden domain only when asked about it; the responder never sees locked ones.")] = "prompted",
    tracker: Annotated[str | None, typer.Option(
        "--tracker", help="Tracked mode: model that decides which hidden domains a clinician turn asks about "
        "(default: the patient model; an offline/ model means the offline classifier).", show_default=False)] = None,
    patient_style: Annotated[list[str] | None, typer.Option(
        "--patient-style", help="How the patient speaks: forthcoming (the default), guarded, terse, verbose-tangential "
        "or vague-recall (README: Patient behaviour styles). Repeat to cross several with every clinician and "
        "condition on the same profiles.", show_default=False)] = None,
    turns: Annotated[int, typer.Option("--turns", help="Clinician turns per conversation.")] = DEFAULT_TURNS,
    condition: Annotated[list[str] | None, typer.Option(
        "--condition", help="Clinician prompt condition (prompts/clinician_<condition>.j2): minimal (the study's) "
        "or screening. Repeat to run several on the same profiles.", show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Conversations in flight at once.")] = 16,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Only the first N profiles (a cheap pilot).", show_default=False)] = None,
    trials: Annotated[int, typer.Option(
        "--trials", help="Independent conversations per (profile, clinician, condition); each trial samples anew.")] = 1,
    budget: Annotated[float | None, typer.Option(
        "--budget", help="Dollars for the whole run folder: what its records already cost counts. A conversation "
        "starts only if its estimated cost still fits (so running many at once overshoots by at most about one "
        "conversation); a budget stop exits 1 saying what is left to run.",
        show_default=False)] = None,
    formulation: Annotated[bool, typer.Option(
        "--formulation/--no-formulation", help="After the last turn, ask each clinician for a case formulation "
        "(working diagnosis, differential, suicide/self-harm risk) in the same context; not a turn, never shown "
        "to the patient. Scored by `intake-eval judge` into metrics/diagnosis.csv and metrics/safety.csv. "
        "Conversations already on disk without one (made before, or a provider error) get it requested.")] = False,
    on_truncation: Annotated[str, typer.Option(
        "--on-truncation", help="An answer cut at its token cap (finish_reason length) that still has visible text: "
        "keep it and flag the turn (keep: the record says which role's answer was cut, counted in status, "
        "metrics/answers*.csv and the report), or fail the conversation (fail: status truncated, retried on a rerun). "
        "An answer with no visible text is always a failed turn.")] = "keep",
    fork_at: Annotated[str | None, typer.Option(
        "--fork-at", help="Could it ask? After the run, re-run each finished intake from this turn with a "
        "supervisor's nudge: closure (the primary judge's premature-closure turn; judge first), first-planning, or "
        "a turn number. Turns before it are kept verbatim (no new calls); forks are their own records "
        "(<id>.fork-<at>-<nudge>), judged like any intake and reported as the capacity gap.",
        show_default=False)] = None,
    nudge: Annotated[str, typer.Option(
        "--nudge", help="With --fork-at: the note the clinician gets (prompts/nudge_<name>.j2).")] = "review",
    shard: ShardOption = None,
    no_cache: NoCacheOption = False,
    force: ForceOption = False,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
    prompts: PromptsOption = None,
) -> None:
    """Run the intake conversations for every profile × clinician × condition × patient style × trial.

    The patient speaks first, then the clinician takes --turns turns, each answered by the
    patient. Conversations are written to RUN_DIR/conversations/<clinician>.jsonl as they
    finish. Rerun the same command after a crash or Ctrl-C to finish exactly the missing ones
    (failed conversations are retried). Needs profiles.jsonl: run `intake-eval generate` first.

    Example (offline, no keys): intake-eval run --clinician offline/screener
    --clinician offline/anchored --patient offline/patient
    """
    from intake_eval.commands.common import console
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.patient_styles import check_styles
    from intake_eval.core.prompts import available_conditions
    from intake_eval.core.shard import parse_shard
    from intake_eval.core.store import RunPaths
    from intake_eval.interview.settings import RunSettings
    from intake_eval.interview.stage import execute_run
    from intake_eval.stage_kinds import stage_kinds

    conditions = condition or ["minimal"]
    known = available_conditions()
    for name in conditions:
        if name not in known:
            raise IntakeEvalError(f"--condition {name}: no prompts/clinician_{name}.j2; choose one of: {', '.join(known)}")
    if len(set(clinician)) != len(clinician):
        raise IntakeEvalError("--clinician: the same clinician is given twice")
    patients = list(patient or ["gpt-4o"])
    if len(set(patients)) != len(patients):
        raise IntakeEvalError("--patient: the same patient model is given twice")
    settings = RunSettings.from_flags(
        clinicians=list(clinician), patient=patients[0], patients=patients, patient_mode=patient_mode,
        tracker=tracker, turns=turns,
        conditions=list(dict.fromkeys(conditions)), trials=trials, concurrency=concurrency, limit=limit, budget=budget,
        formulation=formulation, on_truncation=on_truncation, shard=parse_shard(shard),
        patient_styles=check_styles(patient_style or []),
    )
    if tracker and patient_mode != "tracked":
        raise IntakeEvalError("--tracker only applies with --patient-mode tracked")
    out = console()
    at: str | None = None
    if fork_at is not None:
        from intake_eval.forks.plan import nudge_text, parse_fork_at

        at = parse_fork_at(fork_at, turns)
        nudge_text(nudge)  # an unknown nudge is named before any work
    paths = RunPaths(Path(run_dir))
    result = execute_run(paths, settings, models_file=models, use_cache=not no_cache, force=force, console=out,
                         kinds=stage_kinds())
    code = 0
    if at is not None and not result.interrupted:
        code = _fork(out, paths, settings, at, nudge, models=models, use_cache=not no_cache, force=force)
    _summarize(out, paths, result, formulation=formulation)
    if code:
        raise typer.Exit(code)


def _fork(out, paths, settings, at: str, nudge: str, *, models, use_cache: bool, force: bool) -> int:
    """Run the fork stage and say what it did; returns the exit code it calls for."""
    from intake_eval.forks.stage import execute_forks
    from intake_eval.stage_kinds import stage_kinds

    forked = execute_forks(paths, settings, at=at, nudge=nudge, models_file=models, use_cache=use_cache, force=force,
                           console=out, kinds=stage_kinds())
    reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(forked.skipped.items()))
    out.print(f"forks {forked.stage}: {forked.ok}/{forked.planned} ok" + (f" · not forked: {reasons}" if reasons else ""))
    if forked.skipped.get("intake not judged yet"):
        out.print("[yellow]some intakes are not judged yet[/]: run `intake-eval judge`, then this command again "
                  "to fork them; then judge again to label the forks.")
    if forked.interrupted:
        return 130
    totals = forked.totals
    assert totals is not None  # the fork stage always counts its calls
    if totals.budget_reached:
        out.print(budget_stop_line(totals.budget_left, forked.planned - forked.ok - forked.failed))
    for reason in sorted(set(totals.stopped.values())):
        from rich.markup import escape

        out.print(f"[red]stopped[/]: {escape(reason)}")
    if forked.failed:
        out.print(f"[red]{forked.failed} forks failed[/]; run the same command again to retry them.")
    return 1 if forked.failed or totals.stopped or totals.budget_reached else 0


def _answers_summary(out, paths) -> None:
    """Answers without visible text and answers cut at the cap, per clinician arm (metrics/answers.py), from
    the record facts the stage kept as it finished (core/record_facts): no conversation is read again."""
    from intake_eval.metrics.answer_facts import kept_answers
    from intake_eval.stage_kinds import stage_kinds

    for row in kept_answers(paths, stage_kinds().folder_facts(paths, keep=False))["clinicians"]:
        unusable = {f"{role} {kind.replace('_', ' ')}": row[f"{role}_{kind}"] for role in ("clinician", "patient", "tracker")
                    for kind in ("refused", "empty_answer") if row[f"{role}_{kind}"]}
        cut = {role: (row[f"{role}_truncated"], row.get(f"{role}_truncated_share")) for role in ("clinician", "patient")
               if row[f"{role}_truncated"]}
        if not unusable and not cut and not row["failed_truncated"]:
            continue
        parts = [f"{count} failed: {what}" for what, count in unusable.items()]
        parts += [f"{count} {role} answers cut at the token cap ({share:.0%})" for role, (count, share) in cut.items()]
        if row["failed_truncated"]:
            parts.append(f"{row['failed_truncated']} failed under --on-truncation fail")
        out.print(f"[yellow]answers[/] {row['clinician']} ({row['condition']}, {row['patient_mode']}): " + "; ".join(parts))


def _summarize(out, paths, result, *, formulation: bool = False) -> None:
    from rich.markup import escape

    from intake_eval.commands.common import print_money

    totals, counts = result.totals, result.counts
    spent = f"${totals.dollars:.2f}" + ("" if totals.cost_known else " (some prices unknown)")
    out.print(
        f"run: {counts['ok']}/{counts['planned']} conversations ok in {paths.conversations_dir} "
        f"(this invocation: {totals.ok + totals.failed} ran, {totals.skipped} already done, billed {spent})"
    )
    for clinician, cell in sorted(result.per_clinician.items()):
        out.print(f"  {clinician}: {cell['ok']} ok, {cell['failed']} failed, {cell['not_started']} not started")
    _answers_summary(out, paths)
    print_money(out, paths)
    if totals.formulations:
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(totals.formulations.items()))
        out.print(f"formulations requested for {sum(totals.formulations.values())} conversations already on disk "
                  f"({statuses})")
    unanswered = 0
    if formulation:
        from intake_eval.interview.backfill import provider_error_formulations

        unanswered = provider_error_formulations(paths, sorted(result.per_clinician))
        if unanswered:
            out.print(f"[red]{unanswered} formulations failed at the provider[/]: their conversations are kept; "
                      "run the same command again to request them again.")
        invalid = sum(count for outcomes in (totals.formulations, totals.new_formulations)
                      for status, count in outcomes.items() if status == "invalid")
        if invalid:
            out.print(f"[red]{invalid} formulations were not valid after one repair[/] (status \"invalid\", the "
                      "model's answer is kept in the record; scored as missing).")
    skipped = paths.unreadable_lines()
    if skipped:
        out.print(skipped_inputs_line(skipped))
    if result.interrupted:
        out.print("[yellow]interrupted[/]: finished conversations are saved; run the same command again to resume.")
        raise typer.Exit(130)
    if not totals.cost_known:
        out.print("[yellow]note[/]: some calls had no known price (set input_cost_per_token/output_cost_per_token "
                  "in the models file); dollars and --budget count only priced calls.")
    if totals.budget_reached:
        out.print(budget_stop_line(totals.budget_left, counts["not_started"]))
    for reason in sorted(set(totals.stopped.values())):
        out.print(f"[red]stopped[/]: {escape(reason)}")
    if totals.stopped:
        out.print(f"{counts['not_started']} conversations not started: fix what the error names, then run the same "
                  "command again.")
    if counts["failed"]:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(totals.failures.items()))
        out.print(f"[red]{counts['failed']} conversations failed[/] ({escape(reasons) or 'see status in the records'}); "
                  "run the same command again to retry them.")
        if any(reason in totals.failures for reason in ("refused", "empty_answer")):
            out.print("refused and empty answers come back from the response cache on a rerun (the same answer, "
                      "unpaid); add --no-cache to ask the provider again.")
    if counts["failed"] or totals.stopped or unanswered or totals.failed_formulations or totals.budget_reached:
        raise typer.Exit(1)


def skipped_inputs_line(skipped: dict[str, int]) -> str:
    """One line: the input files whose unreadable lines were skipped, so the results are short by them."""
    from rich.markup import escape

    files = ", ".join(f"{name}: {n}" for name, n in skipped.items())
    return (f"[yellow]skipped inputs[/]: {sum(skipped.values())} unreadable lines left out ({escape(files)}); the "
            "results are short by those records: rerun the stage that writes each file to redo them.")
