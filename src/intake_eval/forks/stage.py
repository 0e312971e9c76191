"""The fork stage: a run stage with a fork plan, ``fork:<at>:<nudge>`` in the manifest.

Forks are conversations in the clinicians' own files (ids ``<parent>.fork-<at>-<nudge>``, a ``fork``
field naming the parent), so the judge stage judges them like any intake and resume works by id.
They are analysed as their own arm (``Conversation.arm_condition``), never mixed with the intakes.
``--force`` on a changed fork stage removes that fork's records and their judgments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from intake_eval.core.records import Conversation
from intake_eval.core.shard import SHARD_KEY, unsharded
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths, drop_records, iter_records, stable_hash
from intake_eval.forks.kind import fork_stage_name as fork_stage_name
from intake_eval.forks.plan import ForkPlan, needs_judge, nudge_text, plan_forks
from intake_eval.interview.plan import (
    RunTotals,
    profile_index,
    plan_conversations,
    prompt_names,
)
from intake_eval.interview.settings import RunSettings
from intake_eval.interview.stage import (
    RUN_STAGE,
    RunPlan,
    ConversationStage,
    budget_left,
    compact_conversations,
)
from intake_eval.runner.prompt_snapshot import RenderedPrompt
from intake_eval.runner.protocol import StageInterrupted, run_in_folder
from intake_eval.runner.stage import StageRunner


@dataclass
class ForkResult:
    stage: str
    planned: int = 0
    ok: int = 0
    failed: int = 0
    skipped: Counter = field(default_factory=Counter)
    totals: RunTotals | None = None
    interrupted: bool = False


def _remove_forks(paths: RunPaths, at: str, nudge: str) -> None:
    """A forced fork stage starts over: its records and their judgments leave the shared files."""
    def is_this_fork(data: dict[str, Any]) -> bool:
        fork = data.get("fork")
        if not isinstance(fork, dict):
            fork = None
        if fork is None and str(data.get("conversation_id", "")).endswith(f".fork-{at}-{nudge}"):
            return True
        if not fork:
            return False
        return fork.get("at") == at and fork.get("nudge") == nudge

    for path in [*paths.conversation_files(), *paths.judgment_files()]:
        drop_records(path, is_this_fork)


@dataclass
class ForkRunPlan(RunPlan):
    """A run plan whose conversations are forks of finished intakes, and why the others are not forked."""

    skipped: Counter = field(default_factory=Counter)


class ForkStage(ConversationStage):
    """A run stage with a fork plan (``fork:<at>:<nudge>`` in the manifest): every finished intake of the
    run re-run from ``at`` with ``nudge``; resume skips forks already ok."""

    show_empty = False

    def __init__(self, settings: RunSettings, *, at: str, nudge: str, force: bool = False):
        super().__init__(settings, force=force)
        self.at, self.nudge = at, nudge
        self.name = fork_stage_name(at, nudge)

    def plan(self, runner: StageRunner) -> ForkRunPlan:
        paths, settings, at, nudge = runner.paths, self.settings, self.at, self.nudge
        manifest = runner.manifest
        assert manifest is not None, "a fork stage runs inside the StageRunner's `with` block"
        judge = manifest.primary_judge() if needs_judge(at) else None
        roles = {"clinician": runner.resolve(settings.clinicians), "patient": runner.resolve(settings.patients)}
        trackers = sorted({alias for patient in settings.patients if (alias := settings.tracker_for(patient))})
        if trackers:
            roles["tracker"] = runner.resolve(trackers)
        run_stage = manifest.data.get("stages", {}).get(RUN_STAGE) or {}
        # the run's hash without its shard spec (equal to its config hash unsharded), so shards share it
        run_hash = (stable_hash(unsharded(run_stage["config"])) if run_stage.get("config")
                    else run_stage.get("config_hash"))
        if self.force and manifest.stage(self.name).get("config_hash"):
            _remove_forks(paths, at, nudge)
        config = {"at": at, "nudge": nudge, "judge": judge, "run_config_hash": run_hash}
        if settings.shard is not None:
            config[SHARD_KEY] = settings.shard.as_config()
        runner.begin(self.name, config, force=self.force,
                     models=roles, additive=["clinician"], prompts=[*prompt_names(settings), f"nudge_{nudge}"],
                     rendered=[RenderedPrompt("nudge", nudge, nudge_text(nudge), f"nudge_{nudge}",
                                              note="a supervisor's note given to the clinician at the fork point")])
        parents = plan_conversations(profile_index(paths), settings)
        forks: ForkPlan = plan_forks(paths, parents, at=at, nudge=nudge, judge=judge)
        return ForkRunPlan(items=forks.items, budget=self.folder_budget(runner), skipped=forks.skipped)

    def finish(self, runner: StageRunner, plan: ForkRunPlan, *, interrupted: bool) -> ForkResult:
        paths, totals = runner.paths, plan.totals
        clinicians = sorted(self.settings.clinicians)
        compact_conversations(paths, clinicians)
        if plan.budget is not None:
            totals.budget_left = budget_left(paths, plan.items, plan.budget)
        result = ForkResult(stage=self.name, planned=len(plan.items), skipped=plan.skipped, totals=totals,
                            interrupted=interrupted)
        status = fork_status(paths, clinicians, {item.conversation_id for item in plan.items})
        result.ok, result.failed = status["ok"], status["failed"]
        complete = result.ok == result.planned
        runner.finish(self.name, status="done" if complete else "interrupted" if interrupted else "incomplete",
                      counts={"planned": result.planned, "ok": result.ok, "failed": result.failed,
                              "not_forked": sum(plan.skipped.values())},
                      extra={"not_forked_by_reason": dict(sorted(plan.skipped.items()))})
        return result


def fork_status(paths: RunPaths, clinicians: list[str], wanted: set[str]) -> dict[str, int]:
    ok = failed = 0
    latest: dict[str, str] = {}
    for alias in clinicians:
        for conversation in iter_records(paths.conversations(alias), Conversation):
            if conversation.conversation_id in wanted:
                latest[conversation.conversation_id] = conversation.status
    for status in latest.values():
        ok += status == "ok"
        failed += status != "ok"
    return {"ok": ok, "failed": failed}


def execute_forks(paths: RunPaths, settings: RunSettings, *, at: str, nudge: str, models_file: Any = None,
                  use_cache: bool = True, force: bool = False, console: Any = None, kinds: StageKinds) -> ForkResult:
    """The fork stage as `run --fork-at` runs it: its own runner; an interrupted one returns its result."""
    try:
        return run_in_folder(paths, ForkStage(settings, at=at, nudge=nudge, force=force), kinds=kinds,
                             models_file=models_file, use_cache=use_cache, console=console)
    except StageInterrupted as stop:
        return stop.outcome
