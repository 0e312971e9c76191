"""Formulations for conversations already on disk (resume).

``run --formulation`` (and ``study`` with ``formulation: true``) asks again for the formulation of
every planned conversation that is ok on disk but has none to show:
- its formulation failed with a provider error (``provider_error: <kind>``: the provider never gave
  a usable answer, e.g. a 401 or 5xx until the retries ran out), or
- it was recorded before formulations were switched on for this run folder (see
  ``allow_formulation_upgrade``: turning formulations on is an addition, not a changed run).

The request is exactly the one ``conversation.run_conversation`` makes after the last turn: the
clinician's own view of the recorded transcript (``participants.clinician_messages``) plus the
formulation instruction (``interview.formulation.request_formulation``). The conversation is appended again
with the new formulation (the store keeps the latest record per id, the stage compacts), its turns and
their usage untouched. An ``invalid`` formulation (the model answered but was still not valid after
one repair) is a recorded outcome of the model and is never asked again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from intake_eval.core.errors import ConfigChangedError
from intake_eval.core.records import Conversation, Usage
from intake_eval.core.store import JsonlWriter, RunPaths, iter_records
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.interview.budget import Budget
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.interview.formulation import request_formulation
from intake_eval.interview.kind import RUN_STAGE
from intake_eval.interview.participants import clinician_messages
from intake_eval.interview.plan import stage_config
from intake_eval.llm.base import ChatModel, ChatResult, UsageMeter

CallHook = Callable[[str, ChatResult], None]


def needs_formulation(conversation: Conversation) -> bool:
    """An ok conversation without a formulation, or whose formulation request failed at the provider."""
    if not conversation.ok:
        return False
    record = conversation.formulation
    return not record or str(record.get("status", "")).startswith("provider_error")


def formulations_to_request(plan: list[PlannedConversation], paths: RunPaths) -> list[tuple[PlannedConversation, Conversation]]:
    """(planned item, its record on disk) for every planned conversation that wants a formulation
    (``PlannedConversation.formulation``) and needs one, in plan order."""
    wanted = {item.conversation_id: item for item in plan if item.formulation}
    if not wanted:
        return []
    latest: dict[str, Conversation] = {}
    for alias in sorted({item.clinician for item in wanted.values()}):
        for conversation in iter_records(paths.conversations(alias), Conversation):
            if conversation.conversation_id in wanted:
                latest[conversation.conversation_id] = conversation
    return [(item, latest[cid]) for cid, item in wanted.items()
            if cid in latest and needs_formulation(latest[cid])]


async def complete_formulation(item: PlannedConversation, conversation: Conversation, clinician: ChatModel, *,
                               on_call: CallHook | None = None) -> tuple[Conversation, Usage]:
    """The conversation with a newly requested formulation, and the usage of this request.

    The record's ``usage["formulation"]`` adds the new calls to any an earlier attempt made."""

    meter = UsageMeter()

    def count(result: ChatResult) -> None:
        meter.add(result)
        if on_call is not None:
            on_call("formulation", result)

    record = await request_formulation(
        clinician, clinician_messages(item.condition, conversation.opening, conversation.turns),
        conversation_id=conversation.conversation_id, turn=len(conversation.turns), max_turns=item.max_turns,
        trial=item.trial, on_result=count,
    )
    spent = meter.to_usage()
    usage = dict(conversation.usage)
    if meter.calls:
        usage["formulation"] = usage["formulation"].add(spent) if "formulation" in usage else spent
    return conversation.model_copy(update={"formulation": record, "usage": usage}), spent


async def request_missing_formulations(plan: list[PlannedConversation], pool: Any, *, paths: RunPaths,
                                       concurrency: int, budget: Budget | None, totals: Any,
                                       refresh: Callable[[Any], None]) -> int:
    """Request the formulation of every conversation ``formulations_to_request`` finds; append each
    updated record as it arrives, each within the run folder's ``budget``. ``totals`` is the runner's
    ``RunTotals`` (calls, dollars, ``formulations``: status → count of the formulations requested here). Returns how many."""
    todo = deque(formulations_to_request(plan, paths))
    if not todo:
        return 0
    writers: dict[str, JsonlWriter] = {}
    done = 0

    def on_call(_role: str, result: ChatResult) -> None:
        totals.count_call(result)
        refresh(totals)

    async def worker() -> None:
        nonlocal done
        while todo:
            hold = budget.hold(budget.formulation_estimate(todo[0][0])) if budget is not None else None
            if budget is not None and hold is None:
                totals.budget_reached = True
                return
            item, conversation = todo.popleft()
            spent = None
            try:
                with budget.charging(hold) if budget is not None else nullcontext():
                    updated, spent = await complete_formulation(item, conversation, pool.get(item.clinician),
                                                                on_call=on_call)
            finally:
                if budget is not None and hold is not None:
                    budget.release(hold, spent.cost_usd if spent is not None else hold.estimate)
            if item.clinician not in writers:
                writers[item.clinician] = JsonlWriter(paths.conversations(item.clinician))
            writers[item.clinician].write(updated)
            status = str((updated.formulation or {}).get("status", "missing"))
            totals.formulations[status] = totals.formulations.get(status, 0) + 1
            done += 1
            refresh(totals)
            await asyncio.sleep(0)  # offline clinicians never suspend: let Ctrl-C and other workers in

    try:
        await gather_or_cancel(worker() for _ in range(max(1, min(concurrency, len(todo)))))
    finally:
        for writer in writers.values():
            writer.close()
    return done


def allow_formulation_upgrade(manifest: Any, settings: Any, role_specs: dict[str, Any], profiles_path: Path, *,
                              force: bool) -> None:
    """Turning formulations on for a run folder made without them is an addition, not a changed run.

    The conversations stay as they are and each gets its formulation (``request_missing_formulations``),
    so the stored run-stage config is replaced by the one with ``formulation: true`` (recorded as
    ``formulation_added`` in the stage) when it differs in nothing else. Turning them off again is
    refused with a plain explanation (unless ``force``, which starts the stage over)."""

    old = manifest.stage_config(RUN_STAGE)
    if not old or force:
        return
    if settings.formulation == bool(old.get("formulation")):
        return
    guarded = {key: value for key, value in old.items() if key != "models"}  # the runner guards models itself
    flipped = settings.model_copy(update={"formulation": not settings.formulation})
    if guarded != stage_config(flipped, role_specs, profiles_path):
        return  # other settings changed too: begin refuses, naming every difference
    if settings.formulation:
        new = {**stage_config(settings, role_specs, profiles_path), **({"models": old["models"]} if "models" in old else {})}
        manifest.amend_stage_config(RUN_STAGE, new, mark="formulation_added")
        return
    raise ConfigChangedError(
        f"{manifest.paths.root}: this run's conversations were made with post-intake formulations; pass "
        "--formulation (in a study config: formulation: true) to continue it, or --force to start the run "
        "stage over without them (old files move to superseded/)"
    )


def provider_error_formulations(paths: RunPaths, clinicians: list[str]) -> int:
    """How many ok conversations on disk hold a formulation that failed at the provider."""
    count = 0
    for alias in clinicians:
        latest = {c.conversation_id: c for c in iter_records(paths.conversations(alias), Conversation)}
        count += sum(1 for c in latest.values() if c.formulation and needs_formulation(c))
    return count
