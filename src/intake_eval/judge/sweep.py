"""One judging sweep: every ok conversation of a run folder labelled by every judge, resuming where it stopped.

Conversations stream from disk (at most ``concurrency`` in memory); what is already judged ok is
skipped; each judgment is appended as it is made and the files are compacted at the end. With a
spend gate, a judgment starts only once its expected cost is held. The judge stage
(``judge.stage``) registers and finishes the judges around one or more sweeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from intake_eval.catalog.schema import Catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.record_index import RecordIndex
from intake_eval.core.records import Conversation, Judgment, Profile, Usage
from intake_eval.core.shard import Shard
from intake_eval.core.store import (
    JsonlWriter,
    RunPaths,
    compact,
    done_keys,
    iter_json_lines,
    iter_records,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.judge.judging import judge_conversation
from intake_eval.judge.setup import JudgeSetup


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

    profiles = RecordIndex(paths.profiles, Profile, "profile_id")  # read on demand: memory flat in profiles
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
            todo[(setup.label, path)] = (wanted - done) & setup.only if setup.only is not None else wanted - done
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
