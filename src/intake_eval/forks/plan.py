"""Which intakes fork, and where.

A fork point is ``closure`` (the primary judge's premature-closure turn), ``first-planning`` (its first
treatment-planning turn) or a fixed turn ``t<N>``. An intake forks at turn t when it is ok, is not
itself a fork, and has the turns before t on disk; one that never closed (or never planned) does not
fork — its spontaneous coverage is also its nudged coverage. The turn definitions are the metrics'
own (``metrics.figures``), so a fork point is exactly the turn the report calls closure.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.prompts import render_prompt, template_names
from intake_eval.core.records import Conversation, Judgment
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.interview.conversation import ForkStart, PlannedConversation
from intake_eval.metrics.figures import (
    first_treatment_planning,
    premature_closure,
    turn_labels,
)

NAMED_POINTS = ("closure", "first-planning")
_FIXED = re.compile(r"^(?:t)?(\d{1,3})$")


def parse_fork_at(value: str, max_turns: int) -> str:
    """closure | first-planning | a turn number (``5`` or ``t5``) → the label used in fork ids."""
    value = value.strip().lower()
    if value in NAMED_POINTS:
        return value
    match = _FIXED.match(value)
    if match and 1 <= int(match.group(1)) <= max_turns:
        return f"t{int(match.group(1))}"
    raise IntakeEvalError(f"--fork-at {value}: choose closure, first-planning or a turn number from 1 to {max_turns}")


def available_nudges() -> list[str]:
    return [name.removeprefix("nudge_") for name in template_names("nudge_")]


def nudge_text(name: str) -> str:
    if name not in available_nudges():
        raise IntakeEvalError(f"--nudge {name}: no prompts/nudge_{name}.j2; choose one of: {', '.join(available_nudges())}")
    return render_prompt(f"nudge_{name}")


def needs_judge(at: str) -> bool:
    return at in NAMED_POINTS


def fork_turn(at: str, judgment: Judgment | None) -> int | None:
    """The turn a fork starts at (the nudge comes just before it), or None when this intake does not fork."""
    if at.startswith("t"):
        return int(at[1:])
    if judgment is None or not judgment.ok:
        return None
    labels = [label for label in turn_labels(judgment) if label.turn >= 1]
    return premature_closure(labels) if at == "closure" else first_treatment_planning(labels)


@dataclass
class ForkPlan:
    items: list[PlannedConversation] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # reason → intakes that do not fork


def judgments_by_id(paths: RunPaths, judge: str, clinicians: list[str]) -> dict[str, Judgment]:
    found: dict[str, Judgment] = {}
    for alias in clinicians:
        for judgment in iter_records(paths.judgments(judge, alias), Judgment):
            found[judgment.conversation_id] = judgment
    return found


def plan_forks(paths: RunPaths, parents: list[PlannedConversation], *, at: str, nudge: str,
               judge: str | None) -> ForkPlan:
    """One fork per parent intake that qualifies (see the module docstring)."""
    text = nudge_text(nudge)
    clinicians = sorted({item.clinician for item in parents})
    on_disk: dict[str, Conversation] = {}
    for alias in clinicians:
        for conversation in iter_records(paths.conversations(alias), Conversation):
            on_disk[conversation.conversation_id] = conversation
    judged = judgments_by_id(paths, judge, clinicians) if judge and needs_judge(at) else {}
    plan = ForkPlan()
    for item in parents:
        parent = on_disk.get(item.conversation_id)
        if parent is None or not parent.ok:
            plan.skipped["intake not finished"] += 1
            continue
        if needs_judge(at) and item.conversation_id not in judged:
            plan.skipped["intake not judged yet"] += 1
            continue
        turn = fork_turn(at, judged.get(item.conversation_id))
        if turn is None:
            plan.skipped["never closed" if at == "closure" else "never planned"] += 1
            continue
        if turn - 1 > len(parent.turns) or turn > item.max_turns:
            plan.skipped["intake too short"] += 1
            continue
        start = ForkStart(parent=parent, turn=turn, at=at, nudge=nudge, nudge_text=text)
        plan.items.append(PlannedConversation(
            profile_id=item.profile_id, profiles=item.profiles, clinician=item.clinician, condition=item.condition, patient_mode=item.patient_mode,
            trial=item.trial, max_turns=item.max_turns, records_opening_usage=False, formulation=item.formulation,
            fork=start, patient_style=item.patient_style, patient=item.patient))
    return plan
