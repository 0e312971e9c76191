"""The run and judge stages of a study, overlapped: each conversation is judged as soon as it ends.

The runner's ``on_done`` puts every finished ok conversation on an asyncio queue that judge workers
consume (one judge call set per conversation and judge, as ``judging.judge_conversation`` makes
them), so the judging costs little wall time beyond the conversations. Afterwards
``judge.stage.judge_stage`` sweeps up whatever an earlier, interrupted invocation left unjudged, the
files are compacted, and the run and judge stages are finished through the stage runner (counts and
usage read from the records on disk).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from intake_eval.core.shard import Shard
from intake_eval.core.store import JsonlWriter, RunPaths
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.forks.plan import parse_fork_at
from intake_eval.forks.stage import run_fork_stage
from intake_eval.interview.backfill import provider_error_formulations
from intake_eval.interview.budget import Budget, folder_budget, study_judging_gate
from intake_eval.interview.plan import (
    RunSettings,
    RunTotals,
    load_profiles,
    plan_conversations,
)
from intake_eval.interview.stage import (
    begin_run_stage,
    compact_conversations,
    finish_run_stage,
    run_conversations,
)
from intake_eval.judge.judging import judge_conversation
from intake_eval.judge.stage import (
    begin_judge_stages,
    finish_judge_stages,
    judge_stage,
    judgment_counts,
    ok_conversation_ids,
)
from intake_eval.runner.budget import JudgingGate, judging_gate
from intake_eval.runner.stage import StageRunner
from intake_eval.study.config import StudyConfig


def _run_settings(config: StudyConfig, shard: Shard | None) -> RunSettings:
    return RunSettings(
        clinicians=list(config.clinicians), patient=config.patient_models()[0], patients=config.patient_models(),
        patient_mode=config.patient.mode,
        tracker=config.patient.tracker, turns=config.turns, conditions=list(config.conditions),
        trials=config.trials, concurrency=config.concurrency, budget=config.budget,
        formulation=config.formulation, on_truncation=config.on_truncation, shard=shard,
        patient_styles=list(config.patient_styles),
    )


class _Progress:
    """Two bars on stderr: conversations and judgments, advancing together."""

    def __init__(self, console: Any, conversations: int, judgments: int):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(TextColumn("[bold]{task.description:<10}[/]"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                                 refresh_per_second=4, disable=console is None)
        self.run = self.progress.add_task("run", total=max(conversations, 1), note="")
        self.judge = self.progress.add_task("judge", total=max(judgments, 1), note="")
        self.judge_errors = 0

    def update_run(self, totals: Any) -> None:
        dollars = f"${totals.dollars:.2f}" + ("" if totals.cost_known else "+")
        self.progress.update(self.run, completed=totals.skipped + totals.ok + totals.failed,
                             total=max(totals.planned, 1),
                             note=f"failed {totals.failed} · in flight {totals.in_flight} · {dollars}")

    def judged(self, ok: bool) -> None:
        self.judge_errors += 0 if ok else 1
        self.progress.update(self.judge, advance=1, note=f"judge errors {self.judge_errors}")

    def __enter__(self) -> "_Progress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


async def _run_and_judge(plan: list, settings: Any, setups: list, pool: Any, paths: RunPaths, catalog: Any,
                         profiles: dict, progress: _Progress, totals: RunTotals, judge_workers: int,
                         budget: Budget | None = None) -> Any:
    """Conversations run; each one that finishes ok is judged by every judge right away (its cost
    counts against the budget as it is written)."""

    queue: asyncio.Queue = asyncio.Queue()
    writers: dict[Path, JsonlWriter] = {}

    def on_done(conversation: Any) -> None:
        if conversation.ok:
            for setup in setups:
                queue.put_nowait((setup, conversation))

    async def worker() -> None:
        while True:
            item = await queue.get()
            cost = 0.0
            try:
                if item is None:
                    return
                setup, conversation = item
                if pool.stopped(setup.alias):
                    continue  # its endpoint takes no more requests; the sweep reports why
                charged = budget.charging(budget.judging_hold(conversation.conversation_id)) if budget else nullcontext()
                with charged:
                    judgment = await judge_conversation(conversation, profiles[conversation.profile_id], setup.model,
                                                        setup.mode, judge=setup.label, catalog=catalog)
                out = paths.judgments(setup.label, conversation.clinician)
                if out not in writers:
                    writers[out] = JsonlWriter(out)
                writers[out].write(judgment)
                cost = judgment.usage.cost_usd
                progress.judged(judgment.ok)
            finally:
                if budget is not None and item is not None:
                    budget.judged(item[1].conversation_id, cost)  # releases its hold whatever happened
                queue.task_done()

    count = max(1, judge_workers)

    async def conversations() -> None:
        try:
            await run_conversations(plan, pool, paths=paths, patient=settings.patient, tracker=settings.tracker,
                                    concurrency=settings.concurrency, budget=budget, on_done=on_done,
                                    totals=totals, on_update=progress.update_run, stopped=pool.stopped)
            await queue.join()
        finally:
            for _ in range(count):
                queue.put_nowait(None)

    try:
        # a judge worker that fails (an unwritable judgments/ folder) stops the conversations too and
        # is raised once, instead of leaving queue.join() waiting for workers that are gone
        await gather_or_cancel([conversations(), *(worker() for _ in range(count))])
    finally:
        for writer in writers.values():
            writer.close()
    return totals


def run_and_judge_stages(config: StudyConfig, runner: StageRunner, *, force: bool,
                         laps: Callable[[str], None] | None = None, shard: Shard | None = None) -> dict[str, Any]:
    """Register, run and finish the run stage and every judge stage (of one shard's profiles when
    ``shard`` is given). Returns their counts."""
    paths, catalog = runner.paths, runner.catalog
    settings = _run_settings(config, shard)
    begin_run_stage(runner, settings, force=force)
    setups = begin_judge_stages(runner, config.judges, config.judge_mode, force=force, shard=shard)
    profiles_list = load_profiles(paths)
    profiles = {p.profile_id: p for p in profiles_list}
    plan = plan_conversations(profiles_list, settings)
    progress = _Progress(runner.console, len(plan), len(plan) * len(setups))
    wanted = ok_conversation_ids(paths, shard=shard)
    progress.progress.update(progress.judge,
                             completed=sum(judgment_counts(paths, s.label, wanted)["done"] for s in setups))
    # A per-turn judge's calls for one conversation go one after another (each reads the previous
    # one's prefix from the provider's cache), so as many conversations are judged at once as
    # there are calls per conversation: the calls in flight stay those of `concurrency` conversations.
    judge_workers = config.concurrency * ((config.turns + 1) if config.judge_mode == "per-turn" else 1)
    budget = folder_budget(settings.budget, runner, settings.clinicians, patient=settings.patient,
                           tracker=settings.tracker or settings.patient if settings.patient_mode == "tracked" else None,
                           judges={setup.label: setup.alias for setup in setups}, turns=config.turns,
                           judge_mode=config.judge_mode)
    with progress:
        totals = RunTotals()
        _, interrupted = runner.run(lambda: _run_and_judge(plan, settings, setups, runner.pool, paths, catalog,
                                                           profiles, progress, totals,
                                                           judge_workers=judge_workers, budget=budget))
        if interrupted:
            finish_run_stage(runner, plan, totals, interrupted=True, budget=budget)
            finish_judge_stages(runner, setups, interrupted=True, shard=shard)
            raise KeyboardInterrupt
        if laps is not None:
            laps("run+judge")
        compact_conversations(paths, settings.clinicians)
        # conversations an earlier invocation left unjudged: judged within the same folder budget
        spend_gate = study_judging_gate(budget) if budget is not None else None
        sweep, interrupted = runner.run(lambda: judge_stage(paths, setups, concurrency=judge_workers,
                                                            catalog=catalog, stopped=runner.pool.stopped,
                                                            on_done=lambda judgment: progress.judged(judgment.ok),
                                                            spend_gate=spend_gate, shard=shard))
    if sweep is not None and sweep.not_started and spend_gate is not None:
        totals.budget_reached = True
    run = finish_run_stage(runner, plan, totals, interrupted=interrupted, budget=budget)
    run_left = totals.budget_left  # the conversations a budget stop left, when there is a budget
    if sweep is not None and sweep.not_started and spend_gate is not None and run_left:
        totals.budget_left = _judgments_left(run_left, sum(sweep.not_started.values()), spend_gate)
    forks: dict[str, dict[str, int]] = {}
    if not interrupted and config.forks:
        if laps is not None:
            laps("judge sweep")
        forks, sweep, interrupted, fork_gate = _forks(config, runner, settings, setups, force=force)
        if laps is not None:
            laps("forks")
        if sweep is not None and sweep.not_started and fork_gate is not None and run_left:
            # this sweep judges every conversation still unjudged, so its count replaces the first sweep's
            totals.budget_reached = True
            totals.budget_left = _judgments_left({**run_left, "spent": round(fork_gate.budget.spent, 6)},
                                                 sum(sweep.not_started.values()), fork_gate)
    judged = finish_judge_stages(runner, setups, interrupted=interrupted,
                                 aborted=sweep.aborted if sweep is not None else None, shard=shard)
    if interrupted:
        raise KeyboardInterrupt
    if laps is not None and not config.forks:
        laps("judge sweep")
    counts: dict[str, Any] = {"run": run.counts, "judge": judged, **({"forks": forks} if forks else {})}
    if settings.formulation:
        invalid = sum(count for outcomes in (totals.formulations, totals.new_formulations)
                      for status, count in outcomes.items() if status == "invalid")
        counts["formulations"] = {"provider_error": provider_error_formulations(paths, settings.clinicians),
                                  "invalid_this_time": invalid}
    if totals.stopped:
        counts["stopped"] = sorted(set(totals.stopped.values()))
    if totals.budget_reached and totals.budget_left:
        counts["budget"] = totals.budget_left
    return counts


def _judgments_left(run_left: dict[str, Any], unjudged: int, gate: JudgingGate) -> dict[str, Any]:
    """The run's budget stop (conversations left) with the judgments a gated sweep left unstarted."""
    return {**run_left, "judgments": unjudged,
            "dollars_to_finish": round(float(run_left["dollars_to_finish"]) + unjudged * gate.per_judgment, 6)}


def _forks(config: StudyConfig, runner: StageRunner, settings: RunSettings, setups: list, *,
           force: bool) -> tuple[dict[str, dict[str, int]], Any, bool, JudgingGate | None]:
    """Every configured fork (after the intakes are judged: a closure fork needs the labels), then one
    judge sweep so the forks are judged like any intake, within the folder budget (its spend read anew:
    the forks spent under their own stage's budget)."""
    counts = {}
    for fork in config.forks:
        result = run_fork_stage(runner, settings, at=parse_fork_at(fork.at, config.turns), nudge=fork.nudge,
                                force=force)
        counts[result.stage] = {"planned": result.planned, "ok": result.ok, "failed": result.failed,
                                "not_forked": sum(result.skipped.values())}
        if result.interrupted:
            return counts, None, True, None
    gate = judging_gate(config.budget, runner, {setup.label: setup.alias for setup in setups},
                        judge_mode=config.judge_mode, turns=config.turns)
    sweep, interrupted = runner.run(lambda: judge_stage(runner.paths, setups, concurrency=config.concurrency,
                                                        catalog=runner.catalog, stopped=runner.pool.stopped,
                                                        spend_gate=gate, shard=settings.shard))
    return counts, sweep, interrupted, gate
