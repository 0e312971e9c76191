"""The run stage: plan every (profile × patient model × clinician × condition × trial) conversation, run them
concurrently, write each as it finishes, resume after any crash.

- Resume: ids already ``ok`` on disk are skipped; failed ones are run again (the later record
  supersedes the earlier one); files are compacted at the end, so a resumed file equals an
  uninterrupted one. With formulations on, ok records without one (missing, or a provider error)
  get it requested first (``backfill``).
- Concurrency: ``concurrency`` workers pull from one queue; each model's own limiter (in the
  pool) bounds its request rate underneath.
- Budget (``budget``): the run folder's, spend summed from its records; each conversation reserves
  its estimated cost before it starts and starts only if that fits; conversations in flight finish
  and are kept.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.record_index import RecordIndex
from intake_eval.core.records import Conversation, Profile
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    JsonlWriter,
    RunPaths,
    compact,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.interview.backfill import (
    allow_formulation_upgrade,
    request_missing_formulations,
)
from intake_eval.interview.budget import Budget, folder_budget
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.interview.display import RunDisplay
from intake_eval.interview.kind import RUN_STAGE as RUN_STAGE
from intake_eval.interview.plan import (
    ModelSource,
    RunTotals,
    disk_counts,
    disk_counts_by,
    profile_index,
    pending,
    plan_conversations,
    prompt_names,
    stage_config,
)
from intake_eval.interview.prompt_texts import run_prompt_texts
from intake_eval.interview.settings import RunSettings
from intake_eval.llm.base import ChatResult, ModelSpec
from intake_eval.llm.registry import ModelsFiles
from intake_eval.runner.budget import Reservation
from intake_eval.runner.protocol import FinishedHandler, StageInterrupted, run_in_folder
from intake_eval.runner.stage import StageRunner

OnDone = Callable[[Conversation], Any]


async def run_conversations(plan: list[PlannedConversation], pool: ModelSource, *, paths: RunPaths,
                            patient: str, tracker: str | None = None, concurrency: int = 16,
                            budget: Budget | None = None, on_done: OnDone | None = None,
                            totals: RunTotals | None = None,
                            on_update: Callable[[RunTotals], None] | None = None,
                            stopped: Callable[[str], str | None] | None = None) -> RunTotals:
    """Run every planned conversation not already ok on disk; write each record as it finishes.

    ``patient`` speaks in every conversation that names no patient model of its own (``item.patient``);
    ``tracker`` (tracked mode, given explicitly) decides unlocks for all of them, None: each conversation's
    patient model (participants.PatientSetup).

    ``stopped(alias)`` names why a model's endpoint takes no more requests (the pool's breaker,
    after repeated identical deterministic failures): conversations that need it are not started.

    ``on_done(conversation)`` (sync or async) is called after each record is on disk, so a caller
    can start judging while the run continues. The files are not compacted here (see
    ``compact_conversations``), because a caller may run several batches into the same files.
    """
    totals = totals if totals is not None else RunTotals()
    todo, skipped = pending(plan, paths)
    totals.planned += len(plan)
    totals.skipped += skipped
    totals.to_run += len(todo)
    refresh = on_update or (lambda _totals: None)
    refresh(totals)
    await request_missing_formulations(plan, pool, paths=paths, concurrency=concurrency, budget=budget,
                                       totals=totals, refresh=refresh)  # see backfill
    if not todo:
        return totals
    patient_models = {alias: pool.get(alias) for alias in sorted({item.patient or patient for item in todo})}
    tracker_model = pool.get(tracker) if tracker else None
    writers: dict[str, JsonlWriter] = {}
    openings: dict = {}
    queue = deque(todo)

    async def worker() -> None:
        while queue:
            item = queue[0]
            speaker = item.patient or patient
            blocked = next(((alias, reason) for alias in (item.clinician, speaker, tracker)
                            if alias and stopped is not None and (reason := stopped(alias))), None)
            if blocked is not None:
                queue.popleft()
                totals.stopped.setdefault(*blocked)
                continue  # not started: the next run retries it once the endpoint is fixed
            hold = budget.reserve(item) if budget is not None else None
            if budget is not None and hold is None:
                if not budget.open:
                    totals.budget_reached = True
                    return
                await budget.wait_for_release()  # finished work replaces its estimate by its cost
                continue
            queue.popleft()
            participants = Participants(
                clinician=pool.get(item.clinician), patient=patient_models[speaker], tracker=tracker_model,
                patient_alias=speaker,
            )

            def on_call(_role: str, result: ChatResult, hold: Reservation | None = hold) -> None:
                totals.count_call(result)
                if hold is not None and budget is not None and budget.billed is None:
                    hold.live += result.usage.cost_usd  # with a call ledger, billed attempts are charged instead
                refresh(totals)

            totals.in_flight += 1
            refresh(totals)
            conversation = None
            try:
                with budget.charging(hold) if budget is not None else nullcontext():
                    conversation = await run_conversation(item, participants, openings=openings, on_call=on_call)
            finally:
                totals.in_flight -= 1
                if budget is not None and hold is not None:
                    budget.settle(hold, item, conversation)
            writer = writers.get(item.clinician)
            if writer is None:
                writer = writers[item.clinician] = JsonlWriter(paths.conversations(item.clinician))
            writer.write(conversation)
            totals.count_record(conversation)
            refresh(totals)
            if on_done is not None:
                outcome = on_done(conversation)
                if inspect.isawaitable(outcome):
                    await outcome
            # Offline participants never suspend: yield so other workers, judges and Ctrl-C get a turn.
            await asyncio.sleep(0)

    try:
        await gather_or_cancel(worker() for _ in range(max(1, min(concurrency, len(todo)))))
    finally:
        for writer in writers.values():
            writer.close()
    return totals


def budget_left(paths: RunPaths, plan: list[PlannedConversation], budget: Budget) -> dict[str, float | int]:
    """What a budget stop left: the conversations not ok on disk and the estimated dollars to run them."""
    todo, _done = pending(plan, paths)
    return {"limit": budget.limit, "spent": round(budget.spent, 6), "conversations": len(todo),
            "dollars_to_finish": round(budget.remaining_cost(todo), 6)}


def compact_conversations(paths: RunPaths, clinicians: list[str]) -> dict[str, int]:
    """Latest record per id, sorted: a resumed file becomes byte-identical to an uninterrupted one."""
    return {alias: compact(paths.conversations(alias), "conversation_id") for alias in clinicians}


# ---------------------------------------------------------------- the stage, as the CLI runs it



def run_stage_outputs(paths: RunPaths) -> list[Path]:
    """What a forced run moves to superseded/: judgments, metrics and the report describe the old conversations."""
    return [paths.conversations_dir, paths.judgments_dir, paths.metrics_dir, paths.report_dir]


def begin_run_stage(runner: StageRunner, settings: RunSettings, *, force: bool) -> RecordIndex[Profile]:
    """Resolve the run's models and register the stage with the runner (config guard, leakage guard,
    provenance). Clinicians are additive: adding one later is a resume, changing one is refused.
    Returns the profiles by id (read on demand), for the plan."""
    clinicians = runner.resolve(settings.clinicians)
    patients = runner.resolve(settings.patients)
    role_specs: dict[str, Any] = {"patient": patients[settings.patient], "patients": patients}
    roles: dict[str, dict[str, ModelSpec]] = {"clinician": clinicians, "patient": dict(patients)}
    trackers = sorted({tracker for patient in settings.patients if (tracker := settings.tracker_for(patient))})
    if trackers:  # tracked mode: every model that decides unlocks, each under the leakage guard
        roles["tracker"] = runner.resolve(trackers)
        role_specs["tracker"] = roles["tracker"][settings.tracker_for(settings.patient) or settings.patient]
    profiles = profile_index(runner.paths)  # a missing profiles.jsonl is named before the stage is registered
    allow_formulation_upgrade(runner.manifest, settings, role_specs, runner.paths.profiles, force=force)
    runner.begin(RUN_STAGE, stage_config(settings, role_specs, runner.paths.profiles), force=force,
                 outputs=run_stage_outputs(runner.paths), models=roles, additive=["clinician"],
                 prompts=prompt_names(settings), rendered=run_prompt_texts(settings, [profiles[min(profiles)]]))
    return profiles


@dataclass
class RunResult:
    totals: RunTotals
    counts: dict[str, int]
    per_clinician: dict[str, dict[str, int]]
    interrupted: bool = False


def _per_patient(paths: RunPaths, plan: list[PlannedConversation]) -> dict[str, Any]:
    """With several patient models, the planned conversations' status per patient model (absent with one)."""
    if all(item.patient is None for item in plan):
        return {}
    return {"per_patient": disk_counts_by(paths, plan, lambda item: item.patient or "")[1]}
@dataclass
class RunPlan:
    """The conversations one invocation of a run stage works on, its live totals and its folder budget."""

    items: list[PlannedConversation]
    totals: RunTotals = field(default_factory=RunTotals)
    budget: Budget | None = None
    on_finished: FinishedHandler[Conversation] | None = None  # takes each conversation as it is written


class ConversationStage:
    """What every stage that runs conversations shares (the run stage, and forks: a run stage with a
    fork plan): the models, the folder budget, and running the planned conversations, resumed by id.
    A subclass makes the plan and finishes the stage.

    ``judges`` (label → alias, judging in ``judge_mode``) are the judges that label each conversation
    as it finishes (a study): the folder budget holds their cost too, and the plan's ``on_finished``
    (the judge stage's live judging) takes every conversation as it is written. ``progress``
    replaces the stage's own progress bar (the study shows one for the run and one for the judges)."""

    show_empty = True  # a progress bar even when nothing is planned

    def __init__(self, settings: RunSettings, *, force: bool = False, judges: Mapping[str, str] | None = None,
                 judge_mode: str = "per-turn", progress: Callable[[RunTotals], None] | None = None):
        self.settings = settings
        self.force = force
        self.judges = dict(judges or {})
        self.judge_mode = judge_mode
        self.progress = progress

    def models(self) -> list[str | None]:
        return self.settings.aliases()

    def folder_budget(self, runner: StageRunner) -> Budget | None:
        settings = self.settings
        return folder_budget(settings.budget, runner, settings.clinicians, patient=settings.patient,
                             tracker=settings.tracker_alias, judges=self.judges or None, turns=settings.turns,
                             judge_mode=self.judge_mode)

    def run(self, runner: StageRunner, plan: RunPlan) -> bool:
        display = None
        refresh = self.progress
        if refresh is None and runner.console is not None and (plan.items or self.show_empty):
            display = RunDisplay(runner.console, len(plan.items))
            refresh = display.update
        _, interrupted = runner.run(lambda: self._conversations(runner, plan, refresh), display)
        return interrupted

    async def _conversations(self, runner: StageRunner, plan: RunPlan,
                             refresh: Callable[[RunTotals], None] | None) -> None:
        settings, handler = self.settings, plan.on_finished

        async def conversations() -> None:
            try:
                await run_conversations(plan.items, runner.pool, paths=runner.paths, patient=settings.patient,
                                        # tracked mode: the named tracker, else each conversation's patient model
                                        tracker=settings.tracker if settings.tracker_alias else None,
                                        concurrency=settings.concurrency,
                                        budget=plan.budget, totals=plan.totals, on_update=refresh,
                                        on_done=handler.take if handler is not None else None,
                                        stopped=runner.pool.stopped)
            finally:
                if handler is not None:
                    handler.close()

        # a handler's worker that fails (an unwritable judgments/ folder) stops the conversations too, and
        # is raised once
        await gather_or_cancel([conversations(), *([handler.serve()] if handler is not None else [])])


class RunStage(ConversationStage):
    """The run stage (``run`` in the manifest): every (profile × clinician × condition × trial) conversation."""

    name = RUN_STAGE

    def plan(self, runner: StageRunner) -> RunPlan:
        profiles = begin_run_stage(runner, self.settings, force=self.force)
        return RunPlan(items=plan_conversations(profiles, self.settings),
                       budget=self.folder_budget(runner))

    def finish(self, runner: StageRunner, plan: RunPlan, *, interrupted: bool) -> RunResult:
        return finish_run_stage(runner, plan.items, plan.totals, interrupted=interrupted,
                                limit=self.settings.limit, budget=plan.budget)


def finish_run_stage(runner: StageRunner, plan: list[PlannedConversation], totals: RunTotals, *,
                     interrupted: bool, limit: int | None = None, budget: Budget | None = None) -> RunResult:
    """Compact the conversation files and close the stage with counts read from disk."""
    compact_conversations(runner.paths, sorted({item.clinician for item in plan}))
    counts, per_clinician = disk_counts(runner.paths, plan)
    if budget is not None:
        totals.budget_left = budget_left(runner.paths, plan, budget)
    if runner.pool.ledger is not None:  # what this invocation was billed, retried and garbled attempts included
        totals.dollars = runner.pool.ledger.billed_usd
    complete = counts["ok"] == counts["planned"]
    runner.finish(RUN_STAGE, status="done" if complete else "interrupted" if interrupted else "incomplete",
                  counts=counts, extra={
                      "per_clinician": per_clinician,
                      **_per_patient(runner.paths, plan),
                      "last_invocation": {"ran": totals.ok + totals.failed, "skipped": totals.skipped,
                                          "failed": totals.failed, "failures": totals.failures,
                                          "paid_usd": round(totals.dollars, 6), "budget_reached": totals.budget_reached,
                                          "formulations": totals.formulations,
                                          "new_formulations": totals.new_formulations,
                                          "stopped": totals.stopped or None, "limit": limit,
                                          "seconds": round(time.monotonic() - totals.started, 1)}})
    return RunResult(totals=totals, counts=counts, per_clinician=per_clinician, interrupted=interrupted)


def execute_run(paths: RunPaths, settings: RunSettings, *, models_file: ModelsFiles = None,
                use_cache: bool = True, force: bool = False, console: Any = None, kinds: StageKinds) -> RunResult:
    """The run stage as the CLI runs it: its own runner, the stage planned, run and finished."""
    try:
        return run_in_folder(paths, RunStage(settings, force=force), kinds=kinds, models_file=models_file,
                             use_cache=use_cache, console=console)
    except StageInterrupted as stop:
        return stop.outcome
