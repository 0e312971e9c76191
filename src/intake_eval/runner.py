"""The run stage: plan every (profile × clinician × condition × trial) conversation, run them
concurrently, write each as it finishes, resume after any crash.

- Resume: ids already ``ok`` on disk are skipped; failed ones are run again (the later record
  supersedes the earlier one); files are compacted at the end, so a resumed file equals an
  uninterrupted one. With formulations on, ok records without one (missing, or a provider error)
  get it requested first (``formulation_resume``).
- Concurrency: ``concurrency`` workers pull from one queue; each model's own limiter (in the
  pool) bounds its request rate underneath.
- Budget: no new conversation starts once this invocation's spending reaches the budget;
  conversations in flight finish and are kept.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from intake_eval.conversation import Participants, PlannedConversation, run_conversation
from intake_eval.formulation_resume import (
    allow_formulation_upgrade,
    request_missing_formulations,
)
from intake_eval.models.base import ChatModel, ChatResult
from intake_eval.records import Conversation, Profile, Usage
from intake_eval.run_display import NoDisplay, RunDisplay
from intake_eval.store import JsonlWriter, RunPaths, compact, done_keys

PATIENT_PROMPTS = {
    "prompted": ["patient_prompted", "patient_opening", "_patient_persona", "_patient_style"],
    "tracked": ["patient_responder", "patient_opening", "patient_tracker", "patient_tracker_repair",
                "_patient_persona", "_patient_style"],
}


class ModelSource(Protocol):
    def get(self, name: str) -> ChatModel: ...


@dataclass
class RunSettings:
    clinicians: list[str]
    patient: str
    patient_mode: str = "prompted"
    tracker: str | None = None
    turns: int = 12
    conditions: list[str] = field(default_factory=lambda: ["minimal"])
    trials: int = 1
    concurrency: int = 16
    limit: int | None = None
    budget: float | None = None
    formulation: bool = False  # issue 8: post-intake case formulation after the last turn


def plan_conversations(profiles: list[Profile], settings: RunSettings) -> list[PlannedConversation]:
    """Profile-major order, so the clinicians of one profile run side by side and share its opening."""
    chosen = sorted(profiles, key=lambda p: p.profile_id)
    if settings.limit is not None:
        chosen = chosen[: settings.limit]
    plan = []
    for profile in chosen:
        for trial in range(settings.trials):
            first = True
            for clinician in settings.clinicians:
                for condition in settings.conditions:
                    plan.append(PlannedConversation(
                        profile=profile, clinician=clinician, condition=condition,
                        patient_mode=settings.patient_mode, trial=trial, max_turns=settings.turns,
                        records_opening_usage=first, formulation=settings.formulation,
                    ))
                    first = False
    return plan


def prompt_names(settings: RunSettings) -> list[str]:
    formulation = {"formulation", "formulation_repair"} if settings.formulation else set()  # issue 8
    return sorted({f"clinician_{c}" for c in settings.conditions} | set(PATIENT_PROMPTS[settings.patient_mode]) | formulation)


@dataclass
class RunTotals:
    """Live counters for progress, budget and the final summary (asyncio only)."""

    planned: int = 0
    skipped: int = 0  # already ok on disk
    to_run: int = 0
    ok: int = 0
    failed: int = 0
    in_flight: int = 0
    tokens: int = 0
    dollars: float = 0.0
    cost_known: bool = True
    budget_reached: bool = False
    started: float = field(default_factory=time.monotonic)
    per_clinician: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)  # reason -> count
    formulations: dict[str, int] = field(default_factory=dict)  # re-requested for ok records: status -> count
    usage: dict[str, Usage] = field(default_factory=dict)  # model alias -> usage (from records)

    @property
    def not_started(self) -> int:
        return self.to_run - self.ok - self.failed - self.in_flight

    def count_call(self, result: ChatResult) -> None:
        self.tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        if not result.cached:
            self.dollars += result.usage.cost_usd
            self.cost_known = self.cost_known and result.usage.cost_known

    def count_record(self, conversation: Conversation, patient: str, tracker: str | None) -> None:
        cell = self.per_clinician.setdefault(conversation.clinician, {"ok": 0, "failed": 0})
        if conversation.ok:
            self.ok += 1
            cell["ok"] += 1
        else:
            self.failed += 1
            cell["failed"] += 1
            self.failures[conversation.status] = self.failures.get(conversation.status, 0) + 1
        owners = {"clinician": conversation.clinician, "formulation": conversation.clinician, "patient": patient,
                  "tracker": tracker or patient}
        for role, usage in conversation.usage.items():
            alias = owners.get(role, role)
            self.usage[alias] = self.usage.get(alias, Usage()).add(usage)


def pending(plan: list[PlannedConversation], paths: RunPaths) -> tuple[list[PlannedConversation], int]:
    """The conversations still to run (not ok on disk), and how many were skipped."""
    done: dict[str, set[str]] = {}
    todo = []
    for item in plan:
        if item.clinician not in done:
            done[item.clinician] = done_keys(paths.conversations(item.clinician), "conversation_id")
        if item.conversation_id not in done[item.clinician]:
            todo.append(item)
    return todo, len(plan) - len(todo)


OnDone = Callable[[Conversation], Any]


async def run_conversations(plan: list[PlannedConversation], pool: ModelSource, *, paths: RunPaths,
                            patient: str, tracker: str | None = None, concurrency: int = 16,
                            budget: float | None = None, on_done: OnDone | None = None,
                            totals: RunTotals | None = None,
                            on_update: Callable[[RunTotals], None] | None = None) -> RunTotals:
    """Run every planned conversation not already ok on disk; write each record as it finishes.

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
                                       totals=totals, refresh=refresh)  # issue 8: see formulation_resume
    if not todo:
        return totals
    patient_model = pool.get(patient)
    tracker_model = pool.get(tracker) if tracker else None
    writers: dict[str, JsonlWriter] = {}
    openings: dict = {}
    queue = deque(todo)

    def on_call(_role: str, result: ChatResult) -> None:
        totals.count_call(result)
        refresh(totals)

    async def worker() -> None:
        while queue:
            if budget is not None and totals.dollars >= budget:
                totals.budget_reached = True
                return
            item = queue.popleft()
            participants = Participants(
                clinician=pool.get(item.clinician), patient=patient_model, tracker=tracker_model, patient_alias=patient
            )
            totals.in_flight += 1
            refresh(totals)
            try:
                conversation = await run_conversation(item, participants, openings=openings, on_call=on_call)
            finally:
                totals.in_flight -= 1
            writer = writers.get(item.clinician)
            if writer is None:
                writer = writers[item.clinician] = JsonlWriter(paths.conversations(item.clinician))
            writer.write(conversation)
            totals.count_record(conversation, patient, tracker)
            refresh(totals)
            if on_done is not None:
                outcome = on_done(conversation)
                if inspect.isawaitable(outcome):
                    await outcome
            # Offline participants never suspend: yield so other workers, judges and Ctrl-C get a turn.
            await asyncio.sleep(0)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(todo))))))
    finally:
        for writer in writers.values():
            writer.close()
    return totals


def compact_conversations(paths: RunPaths, clinicians: list[str]) -> dict[str, int]:
    """Latest record per id, sorted: a resumed file becomes byte-identical to an uninterrupted one."""
    return {alias: compact(paths.conversations(alias), "conversation_id") for alias in clinicians}


def load_profiles(paths: RunPaths) -> list[Profile]:
    from intake_eval.errors import IntakeEvalError
    from intake_eval.store import latest_by_key

    if not paths.profiles.exists():
        raise IntakeEvalError(
            f"{paths.profiles}: no profiles here yet; run `intake-eval generate --run-dir {paths.root}` first"
        )
    profiles = latest_by_key(paths.profiles, Profile, "profile_id")
    if not profiles:
        raise IntakeEvalError(f"{paths.profiles}: holds no valid profiles; run `intake-eval generate` again")
    return sorted(profiles.values(), key=lambda p: p.profile_id)


def stage_config(settings: RunSettings, specs: dict[str, Any], profiles_path: Path) -> dict[str, Any]:
    """What determines the run's records (clinicians excluded: adding one later is a resume).

    ``specs`` maps role → resolved ModelSpec for the patient and tracker.
    """
    from intake_eval.prompts import prompt_hashes
    from intake_eval.store import file_hash

    config: dict[str, Any] = {
        "patient": settings.patient,
        "patient_model": specs["patient"].model,
        "patient_mode": settings.patient_mode,
        "turns": settings.turns,
        "conditions": sorted(settings.conditions),
        "trials": settings.trials,
        "prompts": prompt_hashes(prompt_names(settings)),
        "profiles_sha256": file_hash(profiles_path),
    }
    if settings.formulation:  # issue 8; absent when off, so earlier runs keep their config hash
        config["formulation"] = True
    if settings.patient_mode == "tracked":
        config["tracker"] = settings.tracker or settings.patient
        config["tracker_model"] = specs["tracker"].model
    return config


# ---------------------------------------------------------------- the stage, as the CLI runs it

def begin_run_stage(manifest: Any, paths: RunPaths, settings: RunSettings, role_specs: dict[str, Any],
                    clinician_specs: dict[str, Any], *, force: bool) -> None:
    """Register the run stage (refusing a changed config) and record models and prompts.

    With --force a changed run starts over, and judgments, metrics and the report go to
    superseded/ with the conversations: they describe conversations that no longer exist.
    """
    from intake_eval.prompts import prompt_hashes

    allow_formulation_upgrade(manifest, settings, role_specs, paths.profiles, force=force)
    manifest.begin_stage("run", stage_config(settings, role_specs, paths.profiles), force=force,
                         outputs=[paths.conversations_dir, paths.judgments_dir, paths.metrics_dir, paths.report_dir])
    _record_clinician_models(manifest, clinician_specs)
    for role, spec in role_specs.items():
        alias = (settings.tracker or settings.patient) if role == "tracker" else settings.patient
        manifest.record_models(role, [{"alias": alias, **spec.public_dict()}])
    manifest.record_prompts(prompt_hashes(prompt_names(settings)))
    manifest.save()


def _record_clinician_models(manifest: Any, specs: dict[str, Any]) -> None:
    known = {entry.get("alias"): entry for entry in manifest.data.get("models", {}).get("clinician", [])}
    for alias, spec in specs.items():
        known[alias] = {"alias": alias, **spec.public_dict()}
    manifest.record_models("clinician", [known[alias] for alias in sorted(known)])


def disk_counts(paths: RunPaths, plan: list[PlannedConversation]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Status of the planned conversations as they are on disk now (across every invocation)."""
    from intake_eval.store import iter_json_lines

    status: dict[str, str] = {}
    for alias in sorted({item.clinician for item in plan}):
        for data in iter_json_lines(paths.conversations(alias)):
            status[str(data.get("conversation_id"))] = str(data.get("status", "ok"))
    counts = {"planned": len(plan), "ok": 0, "failed": 0, "not_started": 0}
    per_clinician: dict[str, dict[str, int]] = {}
    for item in plan:
        state = status.get(item.conversation_id)
        key = "not_started" if state is None else "ok" if state == "ok" else "failed"
        counts[key] += 1
        cell = per_clinician.setdefault(item.clinician, {"ok": 0, "failed": 0, "not_started": 0})
        cell[key] += 1
    return counts, per_clinician


@dataclass
class RunResult:
    totals: RunTotals
    counts: dict[str, int]
    per_clinician: dict[str, dict[str, int]]
    interrupted: bool = False


def execute_run(paths: RunPaths, settings: RunSettings, *, models_file: Path | None = None,
                use_cache: bool = True, force: bool = False, console: Any = None) -> RunResult:
    """The whole run stage: validate models and keys, lock, manifest, run with progress, compact."""
    from intake_eval.leakage import assert_no_generator_leak
    from intake_eval.manifest import Manifest
    from intake_eval.models.pool import ModelPool
    from intake_eval.models.registry import load_model_specs, preflight, resolve_spec
    from intake_eval.store import RunLock

    specs = load_model_specs(models_file)
    clinician_specs = {alias: resolve_spec(alias, specs) for alias in settings.clinicians}
    role_specs = {"patient": resolve_spec(settings.patient, specs)}
    if settings.patient_mode == "tracked":
        role_specs["tracker"] = resolve_spec(settings.tracker, specs) if settings.tracker else role_specs["patient"]
    preflight([*clinician_specs.values(), *role_specs.values()])
    profiles = load_profiles(paths)
    plan = plan_conversations(profiles, settings)
    tracker = settings.tracker if settings.patient_mode == "tracked" else None
    with RunLock(paths):
        manifest = Manifest(paths)
        assert_no_generator_leak(manifest, "clinician", settings.clinicians, specs=clinician_specs)
        assert_no_generator_leak(manifest, "patient", [settings.patient], specs={settings.patient: role_specs["patient"]})
        if tracker:
            assert_no_generator_leak(manifest, "tracker", [tracker], specs={tracker: role_specs["tracker"]})
        begin_run_stage(manifest, paths, settings, role_specs, clinician_specs, force=force)
        totals = RunTotals()
        interrupted = False
        display = RunDisplay(console, len(plan)) if console is not None else None
        # The pool loads the catalog itself when an offline participant needs it.
        with ModelPool(specs, cache_path=paths.cache_db, use_cache=use_cache) as pool:
            try:
                with display or NoDisplay():
                    asyncio.run(run_conversations(
                        plan, pool, paths=paths, patient=settings.patient, tracker=tracker,
                        concurrency=settings.concurrency, budget=settings.budget, totals=totals,
                        on_update=display.update if display else None,
                    ))
            except KeyboardInterrupt:
                interrupted = True  # records already written are whole lines; compact and report
        compact_conversations(paths, settings.clinicians)
        counts, per_clinician = disk_counts(paths, plan)
        stage = manifest.stage("run")
        complete = counts["ok"] == counts["planned"]
        manifest.finish_stage(
            "run",
            status="done" if complete else "interrupted" if interrupted else "incomplete",
            counts=counts,
            usage=totals.usage,
            extra={
                "per_clinician": per_clinician,
                "spent_usd_total": round(stage.get("spent_usd_total", 0.0) + totals.dollars, 6),
                "last_invocation": {"ran": totals.ok + totals.failed, "skipped": totals.skipped,
                                    "failed": totals.failed, "failures": totals.failures,
                                    "spent_usd": round(totals.dollars, 6), "budget_reached": totals.budget_reached,
                                    "formulations": totals.formulations,
                                    "limit": settings.limit, "seconds": round(time.monotonic() - totals.started, 1),
                                    # HTTP attempts, retries and give-ups per alias, by reason (429, 5xx, timeout, …)
                                    "retries": pool.retry_stats()},
            },
        )
    return RunResult(totals=totals, counts=counts, per_clinician=per_clinician, interrupted=interrupted)
