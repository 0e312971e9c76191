"""The judge stage: every ok conversation labelled by every judge, resuming where it stopped.

Each judge is its own manifest stage ``judge:<label>`` (label = alias, or ``<alias>+conversation`` in
conversation mode), registered through the stage runner so its resolved model and prompts are
guarded. The first judge a run folder ever registers is its primary judge (the report's numbers);
later ones cross-check. Metrics are written by the caller (they sit above this stage).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from intake_eval.catalog.snapshot import run_catalog
from intake_eval.catalog.schema import Catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Conversation, Judgment, Profile, Usage
from intake_eval.core.shard import SHARD_KEY, Shard, recorded_shard
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    JsonlWriter,
    RunPaths,
    compact,
    done_keys,
    iter_json_lines,
    iter_records,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.judge.batch import BatchSettings, batch_judges, check_batchable
from intake_eval.judge.judging import (
    JUDGE_PROMPTS,
    judge_config,
    judge_conversation,
    judge_label,
)
from intake_eval.judge.kind import judge_stage_name
from intake_eval.judge.prompt_texts import judge_prompt_texts
from intake_eval.llm.base import ChatModel
from intake_eval.llm.registry import ModelsFiles
from intake_eval.runner.stage import StageRunner


@dataclass
class JudgeSetup:
    label: str  # the judge's folder and record label
    alias: str
    model: ChatModel
    mode: str = "per-turn"


@dataclass
class JudgeStageResult:
    judged: dict[str, int] = field(default_factory=dict)  # label -> newly judged ok
    not_started: dict[str, int] = field(default_factory=dict)  # label -> judgments the budget left unstarted
    judge_errors: dict[str, int] = field(default_factory=dict)
    provider_errors: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # already judged ok on disk
    usage: dict[str, Usage] = field(default_factory=dict)
    aborted: dict[str, str] = field(default_factory=dict)  # label -> fatal provider reason


class SpendGate(Protocol):
    """A budget that holds one judgment's expected cost before it starts (the run folder's budget)."""

    def admit(self) -> object | None: ...  # a hold, or None while nothing more fits
    def settle(self, hold: object, dollars: float) -> None: ...
    def charging(self, hold: object) -> AbstractContextManager[None]: ...  # billed attempts go to the hold


async def _admitted(spend_gate: SpendGate, in_flight: set[asyncio.Task]) -> object | None:
    """A hold for one more judgment; while none fits, wait for one in flight to settle and ask again."""
    hold = spend_gate.admit()
    while hold is None and in_flight:
        await asyncio.wait(set(in_flight), return_when=asyncio.FIRST_COMPLETED)
        hold = spend_gate.admit()
    return hold


def _attempts_so_far(path: Path, key: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for data in iter_json_lines(path):
        counts[str(data.get(key))] = counts.get(str(data.get(key)), 0) + 1
    return counts


async def judge_stage(paths: "RunPaths", judges: Sequence[JudgeSetup], *, concurrency: int = 8,
                      limit: int | None = None, catalog: "Catalog | None" = None,
                      on_planned: Callable[[int], None] | None = None,
                      on_done: Callable[[Judgment], None] | None = None,
                      stopped: Callable[[str], str | None] | None = None,
                      spend_gate: SpendGate | None = None, shard: Shard | None = None) -> JudgeStageResult:
    """Judge every ok conversation of the run folder with every judge, resuming where it stopped.

    ``limit`` keeps only the first N ok conversations (sorted by id) so repeated runs stay the same
    subset. Conversations stream from disk; at most ``concurrency`` are in memory at a time.
    ``stopped(alias)`` names why a judge's endpoint takes no more requests (the pool's breaker):
    that judge starts nothing more. Without it, the judge's first fatal error stops it. With
    ``spend_gate``, a judgment starts only once its expected cost is held; the rest are counted in
    ``not_started``. With ``shard``, only the conversations of that shard's profiles.
    """

    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    chosen: list[tuple[str, str]] = sorted(
        (conversation_id, str(path)) for path in paths.conversation_files()
        for conversation_id in _ok_ids(path, shard)
    )
    if limit is not None:
        chosen = chosen[:limit]
    wanted_by_file: dict[str, set[str]] = {}
    for conversation_id, path in chosen:
        wanted_by_file.setdefault(path, set()).add(conversation_id)

    result = JudgeStageResult()
    todo: dict[tuple[str, str], set[str]] = {}  # (label, conversation file) -> ids still to judge
    attempts: dict[str, dict[str, int]] = {}
    for setup in judges:
        for key in ("judged", "judge_errors", "provider_errors", "skipped"):
            getattr(result, key)[setup.label] = 0
        result.usage[setup.label] = Usage()
        judge_dir = paths.judge_dir(setup.label)
        done: set[str] = set()
        for judgment_path in sorted(judge_dir.glob("*.jsonl")) if judge_dir.exists() else []:
            done |= done_keys(judgment_path, "conversation_id")
            attempts.setdefault(setup.label, {}).update(_attempts_so_far(judgment_path, "conversation_id"))
        for path, wanted in wanted_by_file.items():
            todo[(setup.label, path)] = wanted - done
            result.skipped[setup.label] += len(wanted & done)
    if on_planned is not None:
        on_planned(sum(len(ids) for ids in todo.values()))

    writers: dict[Any, JsonlWriter] = {}
    gate = asyncio.Semaphore(max(1, concurrency))
    tasks: set[asyncio.Task] = set()

    def halted(setup: JudgeSetup) -> bool:
        reason = stopped(setup.alias) if stopped is not None else None
        if reason:
            result.aborted.setdefault(setup.label, reason)
        return setup.label in result.aborted

    async def one(setup: JudgeSetup, conversation: Conversation, profile: Profile, hold: object | None) -> None:
        cost = 0.0
        try:
            if halted(setup):
                return
            with spend_gate.charging(hold) if hold is not None and spend_gate is not None else nullcontext():
                judgment = await judge_conversation(
                    conversation, profile, setup.model, setup.mode, judge=setup.label, catalog=catalog,
                    attempt=attempts.get(setup.label, {}).get(conversation.conversation_id, 0),
                )
            out = paths.judgments(setup.label, conversation.clinician)
            if out not in writers:
                writers[out] = JsonlWriter(out)
            writers[out].write(judgment)
            cost = judgment.usage.cost_usd
            result.usage[setup.label] = result.usage[setup.label].add(judgment.usage)
            if judgment.ok:
                result.judged[setup.label] += 1
            elif judgment.status == "judge_error":
                result.judge_errors[setup.label] += 1
            else:
                result.provider_errors[setup.label] += 1
                halted(setup)  # the endpoint may have stopped while this conversation was judged
                if stopped is None and judgment.status.endswith("fatal"):  # a bad key or model id: all would fail
                    result.aborted.setdefault(setup.label, judgment.errors[0] if judgment.errors else judgment.status)
            if on_done is not None:
                on_done(judgment)
        finally:
            if hold is not None and spend_gate is not None:
                spend_gate.settle(hold, cost)
            gate.release()

    try:
        for path in sorted(wanted_by_file):
            pending = {label: todo[(label, path)] for label in (s.label for s in judges)}
            if not any(pending.values()):
                continue
            for conversation in iter_records(Path(path), Conversation):
                if not conversation.ok:
                    continue  # an uncompacted file may hold a failed attempt before its ok retry
                for setup in judges:
                    if conversation.conversation_id not in pending[setup.label]:
                        continue
                    pending[setup.label].discard(conversation.conversation_id)
                    profile = profiles.get(conversation.profile_id)
                    if profile is None:
                        raise IntakeEvalError(
                            f"{path}: conversation {conversation.conversation_id} names profile "
                            f"{conversation.profile_id}, which is not in {paths.profiles}"
                        )
                    hold = None if spend_gate is None else await _admitted(spend_gate, tasks)
                    if spend_gate is not None and hold is None:
                        result.not_started[setup.label] = result.not_started.get(setup.label, 0) + 1
                        continue
                    await gate.acquire()
                    task = asyncio.create_task(one(setup, conversation, profile, hold))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        if tasks:
            await gather_or_cancel(list(tasks))
    finally:
        for task in list(tasks):
            task.cancel()
        for writer in writers.values():
            writer.close()
        for out in writers:
            compact(out, "conversation_id")
    return result


# ---------------------------------------------------------------- the stage, as the CLI and the study run it

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


def judgment_counts(paths: RunPaths, label: str, conversation_ids: set[str]) -> dict[str, int]:
    """How the judgments of ``label`` stand for the given ok conversations (across every invocation)."""
    status: dict[str, str] = {}
    for path in sorted(paths.judge_dir(label).glob("*.jsonl")) if paths.judge_dir(label).is_dir() else []:
        for data in iter_json_lines(path):
            status[str(data.get("conversation_id"))] = str(data.get("status", "ok"))
    wanted = [status.get(cid) for cid in conversation_ids]
    return {"done": sum(1 for s in wanted if s == "ok"),
            "judge_errors": sum(1 for s in wanted if s == "judge_error"),
            "failed": sum(1 for s in wanted if s not in (None, "ok", "judge_error")),
            "not_judged": sum(1 for s in wanted if s is None)}


def _ok_ids(path: Path, shard: Shard | None) -> set[str]:
    """Ids of the ok conversations in one file; with ``shard``, only those of its profiles."""
    if shard is None:
        return done_keys(path, "conversation_id")
    latest: dict[str, bool] = {}
    for data in iter_json_lines(path):
        if "conversation_id" in data:
            latest[str(data["conversation_id"])] = (data.get("status", "ok") == "ok"
                                                    and shard.holds(str(data.get("profile_id"))))
    return {cid for cid, wanted in latest.items() if wanted}


def ok_conversation_ids(paths: RunPaths, limit: int | None = None, shard: Shard | None = None) -> set[str]:
    ids = sorted(cid for path in paths.conversation_files() for cid in _ok_ids(path, shard))
    return set(ids[:limit] if limit is not None else ids)


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


def execute_judge(paths: RunPaths, aliases: list[str], *, mode: str = "per-turn", concurrency: int = 8,
                  limit: int | None = None, models_file: ModelsFiles = None, use_cache: bool = True,
                  force: bool = False, console: Any = None, display: Any = None,
                  batch: BatchSettings | None = None,
                  spend_gate: Callable[[StageRunner, dict[str, str]], SpendGate | None] | None = None,
                  shard: Shard | None = None, kinds: StageKinds) -> JudgeOutcome:
    """The judge stage as the CLI runs it: models and keys, lock, guards, judging with progress.
    ``spend_gate(runner, {label: alias})`` makes the folder budget each judgment is admitted by (the
    budget lives in a layer this one does not import)."""
    if not paths.profiles.exists():
        raise IntakeEvalError(f"{paths.profiles}: no profiles here yet; run `intake-eval generate --run-dir {paths.root}` first")
    if not paths.conversation_files():
        raise IntakeEvalError(f"{paths.conversations_dir}: no conversations here yet; run `intake-eval run --run-dir {paths.root}` first")
    catalog = run_catalog(paths.root)
    with StageRunner(paths, kinds=kinds, models_file=models_file, use_cache=use_cache, console=console, catalog=catalog,
                     models=aliases) as runner:
        if batch is not None:
            check_batchable(runner.resolve(aliases))
        assert runner.manifest is not None, "the `with` block opened the manifest"
        shard = folder_shard(paths, runner.manifest.data, shard)
        setups = begin_judge_stages(runner, aliases, mode, force=force, shard=shard)
        gate = spend_gate(runner, {s.label: s.alias for s in setups}) if spend_gate is not None else None
        planned = getattr(display, "planned", None)
        done = getattr(display, "done", None)

        async def work() -> JudgeStageResult:
            judges = setups if batch is None else await batch_judges(runner, setups, limit=limit, catalog=catalog,
                                                                     settings=batch)
            return await judge_stage(paths, judges, concurrency=concurrency, limit=limit, catalog=catalog,
                                     on_planned=planned, on_done=done, stopped=runner.pool.stopped,
                                     spend_gate=gate, shard=shard)

        result, interrupted = runner.run(work, display)
        counts = finish_judge_stages(runner, setups, interrupted=interrupted, limit=limit,
                                     aborted=result.aborted if result is not None else None, shard=shard)
    return JudgeOutcome([s.label for s in setups], result, counts, interrupted, gate)
