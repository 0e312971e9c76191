"""The run and judge stages of a study, overlapped: each conversation is judged as soon as it ends.

The run stage hands every conversation it writes to the judge stage's live judging
(``JudgeStage.live``), so the judging costs little wall time beyond the conversations; the judge
stage's sweep then judges whatever an earlier, interrupted invocation left unjudged, and both stages
finish through the stage runner (counts and usage read from the records on disk). Configured forks
are run stages with a fork plan, after the sweep; a second sweep judges them. One folder budget
holds the run and its judging: judgments the budget left unstarted make the run's budget stop say
what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from intake_eval.core.records import Judgment
from intake_eval.core.shard import Shard
from intake_eval.forks.plan import parse_fork_at
from intake_eval.forks.stage import ForkStage
from intake_eval.interview.backfill import provider_error_formulations
from intake_eval.interview.budget import study_judging_gate
from intake_eval.interview.plan import RunTotals
from intake_eval.interview.settings import RunSettings
from intake_eval.interview.stage import RunPlan, RunResult, RunStage
from intake_eval.judge.stage import JudgePlan, JudgeStage
from intake_eval.runner.budget import JudgingGate, judging_gate
from intake_eval.runner.protocol import StageInterrupted, execute_stage
from intake_eval.runner.stage import StageRunner
from intake_eval.study.config import StudyConfig


class _Progress:
    """Two bars on stderr: conversations and judgments, advancing together."""

    def __init__(self, console: Any):
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
        self.run = self.progress.add_task("run", total=1, note="")
        self.judge = self.progress.add_task("judge", total=1, note="")
        self.judge_errors = 0

    def planned(self, conversations: int, judgments: int, judged: int) -> None:
        self.progress.update(self.run, total=max(conversations, 1))
        self.progress.update(self.judge, total=max(judgments, 1), completed=judged)

    def update_run(self, totals: Any) -> None:
        dollars = f"${totals.dollars:.2f}" + ("" if totals.cost_known else "+")
        self.progress.update(self.run, completed=totals.skipped + totals.ok + totals.failed,
                             total=max(totals.planned, 1),
                             note=f"failed {totals.failed} · in flight {totals.in_flight} · {dollars}")

    def judged(self, judgment: Judgment) -> None:
        self.judge_errors += 0 if judgment.ok else 1
        self.progress.update(self.judge, advance=1, note=f"judge errors {self.judge_errors}")

    def __enter__(self) -> "_Progress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def run_and_judge_stages(config: StudyConfig, runner: StageRunner, *, force: bool,
                         laps: Callable[[str], None] | None = None, shard: Shard | None = None) -> dict[str, Any]:
    """Plan, run and finish the run stage and every judge stage (of one shard's profiles when ``shard`` is
    given), overlapped; then the configured forks. Returns their counts."""
    lap = laps or (lambda _phase: None)
    progress = _Progress(runner.console)
    settings = config.run_settings(shard)
    judge = JudgeStage(config.judge_settings(shard), force=force, on_judged=progress.judged)
    run = RunStage(settings, force=force, judges=judge.labels(), judge_mode=config.judge_mode,
                   progress=progress.update_run)
    run_plan = run.plan(runner)
    judge_plan = judge.plan(runner)
    judge_plan.gate = _gate(run_plan)
    run_plan.on_finished = judge.live(runner, judge_plan, workers=judge.settings.concurrency, budget=run_plan.budget)
    conversations = len(run_plan.items)
    progress.planned(conversations, conversations * len(judge_plan.setups), judge.judged_so_far(runner, judge_plan))
    with progress:
        if run.run(runner, run_plan):
            run.finish(runner, run_plan, interrupted=True)
            judge.finish(runner, judge_plan, interrupted=True)
            raise KeyboardInterrupt
        lap("run+judge")
        interrupted = judge.run(runner, judge_plan)  # what an earlier invocation left unjudged
    result = _finish_run(runner, run, run_plan, judge_plan, interrupted=interrupted)
    run_left = result.totals.budget_left  # the conversations a budget stop left, before any judgments
    _add_judgments_left(result.totals, run_left, judge_plan)
    forks: dict[str, dict[str, int]] = {}
    if not interrupted and config.forks:
        lap("judge sweep")
        forks, interrupted = _forks(config, runner, settings, judge, judge_plan)
        _add_judgments_left(result.totals, run_left, judge_plan)
        lap("forks")
    judged = judge.finish(runner, judge_plan, interrupted=interrupted).counts
    if interrupted:
        raise KeyboardInterrupt
    if not config.forks:
        lap("judge sweep")
    return _counts(runner, settings, result, judged, forks)


def _gate(plan: RunPlan) -> JudgingGate | None:
    """The judge sweep's gate: the run's folder budget, which already holds its judging."""
    return study_judging_gate(plan.budget) if plan.budget is not None else None


def _finish_run(runner: StageRunner, run: RunStage, run_plan: RunPlan, judge_plan: JudgePlan, *,
                interrupted: bool) -> RunResult:
    """Finish the run stage; judgments the folder budget left unstarted are part of its budget stop."""
    totals = run_plan.totals
    if judge_plan.not_started:
        totals.budget_reached = True
    return run.finish(runner, run_plan, interrupted=interrupted)


def _add_judgments_left(totals: RunTotals, run_left: dict[str, Any] | None, judge_plan: JudgePlan) -> None:
    """The run's budget stop (conversations left) with the judgments the latest sweep left unstarted
    (each sweep judges every conversation still unjudged, so the latest count replaces earlier ones)."""
    gate = judge_plan.gate
    if not judge_plan.not_started or not run_left or not isinstance(gate, JudgingGate):
        return
    totals.budget_reached = True
    totals.budget_left = _judgments_left({**run_left, "spent": round(gate.budget.spent, 6)},
                                         judge_plan.not_started, gate)


def _counts(runner: StageRunner, settings: RunSettings, result: RunResult, judged: dict[str, dict[str, int]],
            forks: dict[str, dict[str, int]]) -> dict[str, Any]:
    totals = result.totals
    counts: dict[str, Any] = {"run": result.counts, "judge": judged, **({"forks": forks} if forks else {})}
    if settings.formulation:
        invalid = sum(count for outcomes in (totals.formulations, totals.new_formulations)
                      for status, count in outcomes.items() if status == "invalid")
        counts["formulations"] = {"provider_error": provider_error_formulations(runner.paths, settings.clinicians),
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


def _forks(config: StudyConfig, runner: StageRunner, settings: RunSettings, judge: JudgeStage,
           judge_plan: JudgePlan) -> tuple[dict[str, dict[str, int]], bool]:
    """Every configured fork (after the intakes are judged: a closure fork needs the labels), then one
    judge sweep so the forks are judged like any intake, within the folder budget (its spend read anew:
    the forks spent under their own stage's budget). Returns the forks' counts and whether Ctrl-C
    stopped them."""
    counts = {}
    for fork in config.forks:
        try:
            result = execute_stage(runner, ForkStage(settings, at=parse_fork_at(fork.at, config.turns),
                                                     nudge=fork.nudge, force=judge.force))
        except StageInterrupted as stop:
            result = stop.outcome
        counts[result.stage] = {"planned": result.planned, "ok": result.ok, "failed": result.failed,
                                "not_forked": sum(result.skipped.values())}
        if result.interrupted:
            judge_plan.result = None  # no sweep ran after the forks: no judge stopped in it
            return counts, True
    judge_plan.gate = judging_gate(config.budget, runner, judge_plan.labels, judge_mode=config.judge_mode,
                                   turns=config.turns)
    return counts, judge.run(runner, judge_plan)
