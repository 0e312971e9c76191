"""The judge stage: every ok conversation labelled by every judge, resuming where it stopped.

Each judge is its own manifest stage ``judge:<label>`` (label = alias, or ``<alias>+conversation`` in
conversation mode), registered through the stage runner so its resolved model and prompts are
guarded. The first judge a run folder ever registers is its primary judge (the report's numbers);
later ones cross-check. Metrics are written by the caller (they sit above this stage).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from intake_eval.catalog.schema import Catalog
from intake_eval.catalog.snapshot import run_catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.record_index import RecordIndex
from intake_eval.core.records import Judgment, Profile
from intake_eval.core.shard import SHARD_KEY, Shard, recorded_shard
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    RunPaths,
    compact,
)
from intake_eval.judge.batch import BatchSettings, batch_judges, check_batchable
from intake_eval.judge.batch_files import BatchFiles, counts_line, judges_from_file, write_requests
from intake_eval.judge.judging import (
    JUDGE_PROMPTS,
    judge_config,
    judge_label,
)
from intake_eval.judge.kind import judge_stage_name
from intake_eval.judge.prompt_texts import judge_prompt_texts
from intake_eval.judge.live import JudgingHolds, LiveJudging
from intake_eval.judge.settings import JudgeSettings
from intake_eval.judge.setup import JudgeSetup
from intake_eval.judge.sweep import (
    JudgeStageResult,
    SpendGate,
    judge_stage,
    judgment_counts,
    ok_conversation_ids,
)
from intake_eval.llm.registry import ModelsFiles
from intake_eval.runner.budget import judging_gate
from intake_eval.runner.protocol import StageInterrupted, run_in_folder
from intake_eval.runner.stage import StageRunner


# ---------------------------------------------------------------- the stage, as the CLI and the study run it

async def _from_batch_files(runner: StageRunner, setups: Sequence[JudgeSetup], *, limit: int | None,
                            catalog: Catalog | None, files: BatchFiles) -> list[JudgeSetup]:
    """``--batch-out``: write the requests and judge nothing; ``--batch-in``: judge what the file answers."""
    say = files.on_progress or (lambda _line: None)
    if files.out is not None:
        written = await write_requests(runner, setups, limit=limit, catalog=catalog, out=files.out)
        for label, lines in written.items():
            say(f"judge {label}: {lines} requests written to {files.out} (OpenAI batch input format)")
        return [replace(setup, only=frozenset()) for setup in setups]
    assert files.into is not None, "BatchFiles names a file to write or to read"
    judges, counts = await judges_from_file(runner, setups, limit=limit, catalog=catalog, path=files.into)
    for label, tally in counts.items():
        say(counts_line(label, tally, files.into))
    return judges


def begin_judge_stages(runner: StageRunner, aliases: Sequence[str], mode: str, *, force: bool,
                       shard: Shard | None = None) -> list[JudgeSetup]:
    """Resolve and register one stage per judge. The run folder's primary judge is the first one it
    ever registered: a later invocation (CLI or study) cross-checks but never changes it. A shard's
    spec is part of each judge's stage config."""
    specs = runner.resolve(aliases)
    setups = []
    for alias in aliases:
        label = judge_label(alias, mode)
        rendered = judge_prompt_texts(runner.paths.profiles, runner.catalog, offline=specs[alias].is_offline)
        config = judge_config(alias, specs[alias].model, mode)
        if shard is not None:
            config[SHARD_KEY] = shard.as_config()
        runner.begin(judge_stage_name(label), config, force=force,
                     outputs=[runner.paths.judge_dir(label)], models={"judge": {alias: specs[alias]}},
                     prompts=JUDGE_PROMPTS, rendered=rendered)
        setups.append(JudgeSetup(label=label, alias=alias, model=runner.pool.get(alias), mode=mode))
    assert runner.manifest is not None, "runner.begin() opened the manifest"
    runner.manifest.record_primary_judge(setups[0].label)
    runner.manifest.save()
    return setups


def folder_shard(paths: RunPaths, manifest_data: dict[str, Any], shard: Shard | None) -> Shard | None:
    """The shard judging works on: the one asked for, else the folder's own (judging a shard's folder
    judges that shard, and its judge stages record it). Another shard than the folder's is refused."""
    recorded = recorded_shard(manifest_data)
    if shard is not None and recorded is not None and shard != recorded:
        raise IntakeEvalError(f"--shard {shard}: {paths.root} is shard {recorded} (its stage configs record it); "
                              f"judge it with --shard {recorded} or without --shard, or use another --run-dir")
    return shard if shard is not None else recorded


def finish_judge_stages(runner: StageRunner, setups: Sequence[JudgeSetup], *, interrupted: bool,
                        limit: int | None = None, aborted: dict[str, str] | None = None,
                        shard: Shard | None = None) -> dict[str, dict[str, int]]:
    """Compact every judgment file and close each judge's stage with counts read from disk."""
    for path in runner.paths.judgment_files():
        compact(path, "conversation_id")
    wanted = ok_conversation_ids(runner.paths, limit, shard)
    counts = {}
    for setup in setups:
        counts[setup.label] = done = judgment_counts(runner.paths, setup.label, wanted)
        complete = done["done"] == len(wanted)
        status = ("interrupted" if interrupted and not complete else "done" if complete and limit is None
                  else "partial" if complete else "incomplete")
        reason = (aborted or {}).get(setup.label)
        runner.finish(f"judge:{setup.label}", status=status, counts=done,
                      extra={"aborted": reason, "limit": limit} if reason or limit else None)
    return counts


@dataclass
class JudgeOutcome:
    labels: list[str]
    result: "JudgeStageResult | None"
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    interrupted: bool = False
    spend_gate: SpendGate | None = None  # the folder budget judging stayed within, if any


GateFactory = Callable[[StageRunner, dict[str, str]], SpendGate | None]


@dataclass
class JudgePlan:
    """The judges registered for one invocation, the shard they judge and the budget each judgment is admitted by."""

    setups: list[JudgeSetup]
    shard: Shard | None
    gate: SpendGate | None = None
    result: JudgeStageResult | None = None  # the latest sweep's

    @property
    def labels(self) -> dict[str, str]:
        return {setup.label: setup.alias for setup in self.setups}

    @property
    def not_started(self) -> int:
        """Judgments the folder budget left unstarted in the latest sweep (0 without a budget)."""
        if self.gate is None or self.result is None:
            return 0
        return sum(self.result.not_started.values())


class JudgeStage:
    """The judge stage (``judge:<label>`` per judge in the manifest): every ok conversation labelled.

    Each judgment is admitted by a folder budget: the settings' ``budget`` dollars (runner/budget.py), or the gate
    ``spend_gate(runner, {label: alias})`` makes (a study shares its run's budget this way). With
    ``batch_files``, the requests go to a file for a cluster engine, or its answers come from one.
    ``run`` is one sweep over what is still unjudged; a study runs it again after its forks. ``live``
    judges conversations as the run stage writes them."""

    def __init__(self, settings: JudgeSettings, *, force: bool = False, batch: BatchSettings | None = None,
                 spend_gate: GateFactory | None = None,
                 batch_files: BatchFiles | None = None, display: Any = None,
                 on_judged: Callable[[Judgment], None] | None = None):
        self.settings = settings
        self.force = force
        self.batch = batch
        self.spend_gate = spend_gate
        self.batch_files = batch_files
        self.display = display
        self.on_judged = on_judged

    def models(self) -> list[str | None]:
        return list(self.settings.judges)

    def labels(self) -> dict[str, str]:
        """label → alias of every judge, as the stage will register them."""
        return {judge_label(alias, self.settings.mode): alias for alias in self.settings.judges}

    def plan(self, runner: StageRunner) -> JudgePlan:
        if self.batch is not None:
            check_batchable(runner.resolve(self.settings.judges))
        assert runner.manifest is not None, "the `with` block opened the manifest"
        shard = folder_shard(runner.paths, runner.manifest.data, self.settings.shard)
        setups = begin_judge_stages(runner, self.settings.judges, self.settings.mode, force=self.force, shard=shard)
        plan = JudgePlan(setups=setups, shard=shard)
        if self.spend_gate is not None:
            plan.gate = self.spend_gate(runner, plan.labels)
        elif self.settings.budget is not None:
            plan.gate = judging_gate(self.settings.budget, runner, plan.labels, judge_mode=self.settings.mode)
        return plan

    def run(self, runner: StageRunner, plan: JudgePlan) -> bool:
        settings, display = self.settings, self.display
        on_done = self.on_judged or getattr(display, "done", None)

        async def work() -> JudgeStageResult:
            judges = plan.setups if self.batch is None else await batch_judges(
                runner, plan.setups, limit=settings.limit, catalog=runner.catalog, settings=self.batch)
            if self.batch_files is not None:
                judges = await _from_batch_files(runner, plan.setups, limit=settings.limit, catalog=runner.catalog,
                                                 files=self.batch_files)
            return await judge_stage(runner.paths, judges, concurrency=settings.concurrency, limit=settings.limit,
                                     catalog=runner.catalog, on_planned=getattr(display, "planned", None),
                                     on_done=on_done, stopped=runner.pool.stopped, spend_gate=plan.gate,
                                     shard=plan.shard)

        plan.result, interrupted = runner.run(work, display)
        return interrupted

    def judged_so_far(self, runner: StageRunner, plan: JudgePlan) -> int:
        """Judgments already ok on disk for the folder's ok conversations, over every judge."""
        wanted = ok_conversation_ids(runner.paths, shard=plan.shard)
        return sum(judgment_counts(runner.paths, label, wanted)["done"] for label in plan.labels)

    def live(self, runner: StageRunner, plan: JudgePlan, *, workers: int,
             budget: JudgingHolds | None = None) -> LiveJudging:
        """A handler that judges the run stage's conversations as they are written."""
        profiles = RecordIndex(runner.paths.profiles, Profile, "profile_id")  # read on demand
        return LiveJudging(runner.paths, plan.setups, profiles, workers=workers, catalog=runner.catalog,
                           stopped=runner.pool.stopped, budget=budget, on_judged=self.on_judged)

    def finish(self, runner: StageRunner, plan: JudgePlan, *, interrupted: bool) -> JudgeOutcome:
        result = plan.result
        counts = finish_judge_stages(runner, plan.setups, interrupted=interrupted, limit=self.settings.limit,
                                     aborted=result.aborted if result is not None else None, shard=plan.shard)
        return JudgeOutcome(list(plan.labels), result, counts, interrupted, plan.gate)


def execute_judge(paths: RunPaths, aliases: list[str], *, mode: str = "per-turn", concurrency: int = 8,
                  limit: int | None = None, models_file: ModelsFiles = None, use_cache: bool = True,
                  force: bool = False, console: Any = None, display: Any = None,
                  batch: BatchSettings | None = None, budget: float | None = None,
                  shard: Shard | None = None, batch_files: BatchFiles | None = None,
                  kinds: StageKinds) -> JudgeOutcome:
    """The judge stage as the CLI runs it: its own runner, the stage planned, run and finished.
    ``budget``: dollars for the whole run folder; each judgment is admitted by its folder budget
    (runner/budget.py)."""
    settings = JudgeSettings.from_flags(judges=aliases, mode=mode, concurrency=concurrency, limit=limit,
                                        budget=budget, shard=shard)
    return judge_in_folder(paths, JudgeStage(settings, force=force, batch=batch, batch_files=batch_files,
                                             display=display),
                           models_file=models_file, use_cache=use_cache, console=console, kinds=kinds)


def judge_in_folder(paths: RunPaths, stage: JudgeStage, *, models_file: ModelsFiles = None, use_cache: bool = True,
                    console: Any = None, kinds: StageKinds) -> JudgeOutcome:
    """A judge stage in its own runner; an interrupted one returns its outcome (``interrupted`` set)."""
    if not paths.profiles.exists():
        raise IntakeEvalError(f"{paths.profiles}: no profiles here yet; run `intake-eval generate --run-dir {paths.root}` first")
    if not paths.conversation_files():
        raise IntakeEvalError(f"{paths.conversations_dir}: no conversations here yet; run `intake-eval run --run-dir {paths.root}` first")
    try:
        return run_in_folder(paths, stage, kinds=kinds, models_file=models_file, use_cache=use_cache,
                             console=console, catalog=run_catalog(paths.root))
    except StageInterrupted as stop:
        return stop.outcome
