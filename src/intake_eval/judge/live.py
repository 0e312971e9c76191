"""Judging conversations as they finish: the judge stage's handler for the run stage's records.

A study runs the run and judge stages overlapped: the run stage hands every conversation it writes
to ``LiveJudging.take``; each ok one is judged by every judge right away by ``workers`` judge workers
(one judge call set per conversation and judge, as ``judging.judge_conversation`` makes them), so
judging costs little wall time beyond the conversations. With a folder budget, each judgment is
charged to the hold the budget made for that conversation's judging, released whatever happens.
Judgments are appended to the judge's files; the judge stage's ``finish`` compacts them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from intake_eval.catalog.schema import Catalog
from intake_eval.core.records import Conversation, Judgment, Profile
from intake_eval.core.store import JsonlWriter, RunPaths
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.judge.judging import judge_conversation
from intake_eval.judge.setup import JudgeSetup


class JudgingHolds(Protocol):
    """A folder budget that held each conversation's judging cost when the conversation started."""

    def judging_hold(self, conversation_id: str) -> Any: ...
    def charging(self, hold: Any) -> AbstractContextManager[None]: ...
    def judged(self, conversation_id: str, dollars: float) -> None: ...


class LiveJudging:
    """A ``FinishedHandler`` for conversations: ``take`` queues them, ``serve`` runs the judge workers."""

    def __init__(self, paths: RunPaths, setups: Sequence[JudgeSetup], profiles: Mapping[str, Profile], *,
                 workers: int, catalog: Catalog | None, stopped: Callable[[str], str | None],
                 budget: JudgingHolds | None = None, on_judged: Callable[[Judgment], None] | None = None):
        self.paths = paths
        self.setups = list(setups)
        self.profiles = profiles
        self.workers = max(1, workers)
        self.catalog = catalog
        self.stopped = stopped
        self.budget = budget
        self.on_judged = on_judged
        self._queue: asyncio.Queue[tuple[JudgeSetup, Conversation] | None] = asyncio.Queue()

    def take(self, record: Conversation) -> None:
        if record.ok:
            for setup in self.setups:
                self._queue.put_nowait((setup, record))

    def close(self) -> None:
        for _ in range(self.workers):  # after what is queued: each worker ends at its sentinel
            self._queue.put_nowait(None)

    async def serve(self) -> None:
        writers: dict[Path, JsonlWriter] = {}
        try:
            await gather_or_cancel(self._worker(writers) for _ in range(self.workers))
        finally:
            for writer in writers.values():
                writer.close()

    async def _worker(self, writers: dict[Path, JsonlWriter]) -> None:
        budget = self.budget
        while True:
            item = await self._queue.get()
            cost = 0.0
            try:
                if item is None:
                    return
                setup, conversation = item
                if self.stopped(setup.alias):
                    continue  # its endpoint takes no more requests; the judge stage's sweep reports why
                hold = budget.judging_hold(conversation.conversation_id) if budget is not None else None
                with budget.charging(hold) if budget is not None else nullcontext():
                    judgment = await judge_conversation(conversation, self.profiles[conversation.profile_id],
                                                        setup.model, setup.mode, judge=setup.label,
                                                        catalog=self.catalog)
                out = self.paths.judgments(setup.label, conversation.clinician)
                if out not in writers:
                    writers[out] = JsonlWriter(out)
                writers[out].write(judgment)
                cost = judgment.usage.cost_usd
                if self.on_judged is not None:
                    self.on_judged(judgment)
            finally:
                if budget is not None and item is not None:
                    budget.judged(item[1].conversation_id, cost)  # releases its hold whatever happened
