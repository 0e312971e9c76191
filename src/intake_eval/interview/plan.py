"""The run plan: which conversations a run holds, what determines them, and the live totals.

``plan_conversations`` orders (profile × trial × patient model × style × clinician × condition)
profile-major so the clinicians of one profile run side by side and share its opening (one per patient
model and style); ``stage_config`` is what the
config guard compares; ``disk_counts`` reads what is finished across every invocation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.patient_styles import DEFAULT_STYLE, style_prompt_names
from intake_eval.core.prompts import prompt_hashes
from intake_eval.core.record_index import RecordIndex
from intake_eval.core.records import Conversation, Profile
from intake_eval.core.shard import SHARD_KEY
from intake_eval.core.store import (
    RunPaths,
    done_keys,
    file_hash,
    iter_json_lines,
)
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.interview.settings import RunSettings
from intake_eval.llm.base import ChatModel, ChatResult

PATIENT_PROMPTS = {
    "prompted": ["patient_prompted", "patient_opening", "_patient_persona", "_patient_style"],
    "tracked": ["patient_responder", "patient_opening", "patient_tracker", "patient_tracker_repair",
                "_patient_persona", "_patient_style"],
}


PROFILES_KEPT = 1024  # profiles kept read at once (≈ 22 KB each)


class ModelSource(Protocol):
    def get(self, name: str) -> ChatModel: ...


def plan_conversations(profiles: Mapping[str, Profile] | list[Profile], settings: RunSettings
                       ) -> list[PlannedConversation]:
    """Profile-major order, so the clinicians of one profile run side by side and share its opening.
    ``profiles``: by id (``profile_index``: read on demand), or a list of them.

    The one place a stage's profiles are chosen: a shard keeps only its own (before ``limit``)."""
    by_id = profiles if isinstance(profiles, Mapping) else {profile.profile_id: profile for profile in profiles}
    chosen = sorted(by_id)
    if settings.shard is not None:
        chosen = [profile_id for profile_id in chosen if settings.shard.holds(profile_id)]
    if settings.limit is not None:
        chosen = chosen[: settings.limit]
    plan = []
    for profile_id in chosen:
        for trial in range(settings.trials):
            for patient in settings.patients:
                for style in settings.patient_styles:
                    first = True  # each patient model speaks its own opening, once per style
                    for clinician in settings.clinicians:
                        for condition in settings.conditions:
                            plan.append(PlannedConversation(
                                profile_id=profile_id, profiles=by_id, clinician=clinician, condition=condition,
                                patient_mode=settings.patient_mode, trial=trial, max_turns=settings.turns,
                                records_opening_usage=first, formulation=settings.formulation,
                                on_truncation=settings.on_truncation, patient_style=style,
                                patient=patient if settings.several_patients else None,
                            ))
                            first = False
    return plan


def prompt_names(settings: RunSettings) -> list[str]:
    formulation = {"formulation", "formulation_repair"} if settings.formulation else set()
    styles = set(style_prompt_names(settings.patient_styles))
    return sorted({f"clinician_{c}" for c in settings.conditions} | set(PATIENT_PROMPTS[settings.patient_mode])
                  | formulation | styles)


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
    budget_left: dict[str, Any] | None = None  # after a budget stop: spent, conversations and dollars to finish
    started: float = field(default_factory=time.monotonic)
    per_clinician: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)  # reason -> count
    formulations: dict[str, int] = field(default_factory=dict)  # re-requested for ok records: status -> count
    new_formulations: dict[str, int] = field(default_factory=dict)  # asked after this invocation's conversations
    stopped: dict[str, str] = field(default_factory=dict)  # alias -> why its endpoint takes no more requests

    @property
    def failed_formulations(self) -> int:
        """Formulations this invocation asked for that did not come back ok."""
        return sum(count for outcomes in (self.formulations, self.new_formulations)
                   for status, count in outcomes.items() if status != "ok")

    @property
    def not_started(self) -> int:
        return self.to_run - self.ok - self.failed - self.in_flight

    def count_call(self, result: ChatResult) -> None:
        self.tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        if not result.cached:
            self.dollars += result.usage.cost_usd
            self.cost_known = self.cost_known and result.usage.cost_known

    def count_record(self, conversation: Conversation) -> None:
        cell = self.per_clinician.setdefault(conversation.clinician, {"ok": 0, "failed": 0})
        if conversation.ok:
            self.ok += 1
            cell["ok"] += 1
        else:
            self.failed += 1
            cell["failed"] += 1
            self.failures[conversation.status] = self.failures.get(conversation.status, 0) + 1
        if conversation.formulation:
            status = str(conversation.formulation.get("status", "invalid"))
            self.new_formulations[status] = self.new_formulations.get(status, 0) + 1


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


def profile_index(paths: RunPaths) -> RecordIndex[Profile]:
    """The run folder's profiles by id, each read when a conversation asks for it (core/record_index):
    memory stays flat in the number of profiles. Errors name a missing or empty profiles.jsonl."""
    if not paths.profiles.exists():
        raise IntakeEvalError(
            f"{paths.profiles}: no profiles here yet; run `intake-eval generate --run-dir {paths.root}` first"
        )
    # The conversations in flight at once span up to a few hundred profiles (K in flight, profile-major):
    # those stay read, so a turn's lookups are a dict hit, not a validation.
    profiles = RecordIndex(paths.profiles, Profile, "profile_id", cached=PROFILES_KEPT)
    if not profiles:
        raise IntakeEvalError(f"{paths.profiles}: holds no valid profiles; run `intake-eval generate` again")
    return profiles


def load_profiles(paths: RunPaths) -> list[Profile]:
    """Every profile, sorted by id (for the few that need them all at once: qc-patient's sample)."""
    profiles = profile_index(paths)
    return [profiles[profile_id] for profile_id in sorted(profiles)]


def stage_config(settings: RunSettings, specs: dict[str, Any], profiles_path: Path) -> dict[str, Any]:
    """What determines the run's records (clinicians excluded: adding one later is a resume).

    ``specs`` maps role → resolved ModelSpec for the patient and tracker.
    """

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
    if settings.formulation:  # absent when off, so earlier runs keep their config hash
        config["formulation"] = True
    if settings.on_truncation != "keep":  # likewise: keep is what every earlier run did
        config["on_truncation"] = settings.on_truncation
    if settings.patient_styles != [DEFAULT_STYLE]:  # absent for forthcoming patients only: earlier runs resume
        config["patient_styles"] = sorted(settings.patient_styles)
    if settings.shard is not None:  # absent unsharded; a folder never resumes as another shard
        config[SHARD_KEY] = settings.shard.as_config()
    if settings.several_patients:  # absent with one, so earlier runs keep their config hash
        config["patients"] = {alias: specs["patients"][alias].model for alias in settings.patients}
    if settings.several_patients and settings.patient_mode == "tracked" and settings.tracker is None:
        config["tracker"] = "each conversation's patient model"
    elif settings.tracker_alias is not None:
        config["tracker"] = settings.tracker_alias
        config["tracker_model"] = specs["tracker"].model
    return config


def disk_counts(paths: RunPaths, plan: list[PlannedConversation]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Status of the planned conversations as they are on disk now (across every invocation), in all and per
    clinician."""
    return disk_counts_by(paths, plan, lambda item: item.clinician)


def disk_counts_by(paths: RunPaths, plan: list[PlannedConversation],
                   key: Callable[[PlannedConversation], str]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """``disk_counts`` with the breakdown by ``key`` of each planned conversation (its clinician, its patient model)."""

    status: dict[str, str] = {}
    for alias in sorted({item.clinician for item in plan}):
        for data in iter_json_lines(paths.conversations(alias)):
            status[str(data.get("conversation_id"))] = str(data.get("status", "ok"))
    counts = {"planned": len(plan), "ok": 0, "failed": 0, "not_started": 0}
    by_key: dict[str, dict[str, int]] = {}
    for item in plan:
        state = status.get(item.conversation_id)
        outcome = "not_started" if state is None else "ok" if state == "ok" else "failed"
        counts[outcome] += 1
        cell = by_key.setdefault(key(item), {"ok": 0, "failed": 0, "not_started": 0})
        cell[outcome] += 1
    return counts, by_key
