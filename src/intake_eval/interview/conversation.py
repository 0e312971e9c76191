"""One intake: the patient speaks first, then N clinician turns, each answered by the patient.

Every conversation ends with a termination reason: completed | clinician_ended (an empty,
non-truncated clinician turn) | model_error | empty_after_length. A model failure after the
pool's retries is recorded with ``status`` = the reason and the turns completed so far, never as
an empty turn; the runner retries such conversations on the next run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from intake_eval.core.records import Conversation, ConversationTurn, Profile
from intake_eval.core.store import file_safe
from intake_eval.interview.formulation import request_formulation
from intake_eval.interview.participants import (
    PatientSetup,
    PatientState,
    advance_patient,
    clinician_messages,
    clinician_turn,
    patient_opening,
    patient_reply,
)
from intake_eval.llm.base import ChatModel, ChatResult, ModelCallError, UsageMeter

DEFAULT_TURNS = 12

CallHook = Callable[[str, ChatResult], None]  # (role, result): live token/dollar accounting


def make_conversation_id(profile_id: str, clinician: str, condition: str, patient_mode: str, trial: int) -> str:
    return f"{profile_id}.{file_safe(clinician)}.{condition}.{patient_mode}.t{trial}"


def make_fork_id(parent_id: str, at: str, nudge: str) -> str:
    """A fork's id: its parent's, the fork point and the nudge (``….t0.fork-closure-review``)."""
    return f"{parent_id}.fork-{at}-{nudge}"


@dataclass(frozen=True)
class ForkStart:
    """Where a counterfactual fork leaves its parent: turns before ``turn`` are kept verbatim, the
    clinician hears ``nudge_text`` just before ``turn``, and the intake goes on to the turn budget."""

    parent: Conversation
    turn: int
    at: str  # closure | first-planning | t<N>: how the turn was chosen
    nudge: str  # the nudge's name (prompts/nudge_<name>.j2)
    nudge_text: str


@dataclass(frozen=True)
class PlannedConversation:
    profile: Profile
    clinician: str  # alias as given on the command line
    condition: str = "minimal"
    patient_mode: str = "prompted"
    trial: int = 0
    max_turns: int = DEFAULT_TURNS
    # The opening is shared by every conversation of a (profile, trial); exactly one of them (the
    # first in plan order) carries its usage, whichever actually made the call, so records are
    # the same however a run was interrupted and resumed.
    records_opening_usage: bool = True
    # After the last turn, ask the clinician for its case formulation (not a turn).
    formulation: bool = False
    fork: ForkStart | None = None

    @property
    def conversation_id(self) -> str:
        own = make_conversation_id(self.profile.profile_id, self.clinician, self.condition, self.patient_mode, self.trial)
        return make_fork_id(own, self.fork.at, self.fork.nudge) if self.fork is not None else own


@dataclass(frozen=True)
class Participants:
    clinician: ChatModel
    patient: ChatModel
    tracker: ChatModel | None = None  # tracked mode; None → the patient model (or the classifier if offline)
    patient_alias: str = ""


def _name(model: ChatModel) -> str:
    return model.spec.alias or model.spec.model


async def _opening(setup: PatientSetup, openings: dict | None, key: tuple) -> tuple[str, ChatResult, bool]:
    """All clinicians of a profile/trial hear the same opening (a paired design). Returns
    (text, result, made_the_call)."""
    if openings is None:
        text, result, _ = await patient_opening(setup)
        return text, result, True
    task = openings.get(key)
    owner = task is None
    if owner:
        task = asyncio.ensure_future(patient_opening(setup))
        openings[key] = task
    try:
        text, result, _ = await asyncio.shield(task)
    except ModelCallError:
        openings.pop(key, None)  # let a later conversation try again
        raise
    return text, result, owner


async def run_conversation(item: PlannedConversation, participants: Participants, *,
                           openings: dict | None = None, on_call: CallHook | None = None) -> Conversation:
    """Run one intake to its end and return the record (ok or with its failure reason)."""
    meters = {"clinician": UsageMeter(), "patient": UsageMeter(), "tracker": UsageMeter(), "formulation": UsageMeter()}

    def count(role: str, result: ChatResult, *, record: bool = True, spent: bool = True) -> None:
        if record:
            meters[role].add(result)
        if spent and on_call is not None:
            on_call(role, result)

    setup = PatientSetup(
        profile=item.profile,
        mode=item.patient_mode,
        model=participants.patient,
        tracker=participants.tracker,
        sample_index=item.trial,
        on_answer=count,
    )
    conversation_id = item.conversation_id
    opening = ""
    turns: list[ConversationTurn] = []
    termination, error, role = "completed", None, "patient"
    fork = item.fork
    try:
        if fork is None:
            opening, result, made_call = await _opening(setup, openings, (item.profile.profile_id, item.patient_mode, item.trial))
            count("patient", result, record=item.records_opening_usage, spent=made_call)
            state, first = PatientState(opening=opening), 1
        else:  # the parent's opening and turns before the fork, verbatim: nothing is asked again
            opening, first = fork.parent.opening, fork.turn
            state = PatientState(opening=opening)
            for kept in fork.parent.turns[: fork.turn - 1]:
                turns.append(kept)
                state = advance_patient(state, kept)
        for number in range(first, item.max_turns + 1):
            role = "clinician"
            nudge = fork.nudge_text if fork is not None and number == fork.turn else None
            said = await clinician_turn(
                participants.clinician, condition=item.condition, opening=opening, turns=state.turns,
                turn=number, max_turns=item.max_turns, conversation_id=conversation_id, trial=item.trial,
                nudge=nudge,
            )
            count("clinician", said)
            text = (said.text or "").strip()
            if not text:
                if said.finish_reason == "length":
                    raise ModelCallError("clinician hit its token cap before any visible text", kind="empty_after_length")
                termination = "clinician_ended"  # nothing more to say: the clinician closed the session
                break
            role = "patient"
            reply = await patient_reply(setup, state, number, text)  # its calls are counted through on_answer
            turn = ConversationTurn(
                turn=number, clinician=text, patient=reply.text,
                clinician_reasoning=said.reasoning or None, tracker=reply.tracker, nudge=nudge,
            )
            turns.append(turn)
            state = advance_patient(state, turn)
    except ModelCallError as exc:
        termination = "empty_after_length" if exc.kind == "empty_after_length" else "model_error"
        who = participants.clinician if role == "clinician" else participants.patient
        error = f"{role} {_name(who)} at turn {len(turns) + (1 if opening else 0)}: {exc.format_message()}"
    # post-intake case formulation (interview/formulation.py); a failure is recorded, never fatal
    formulation = None
    if item.formulation and termination in ("completed", "clinician_ended"):
        formulation = await request_formulation(
            participants.clinician, clinician_messages(item.condition, opening, turns),
            conversation_id=conversation_id, turn=len(turns), max_turns=item.max_turns, trial=item.trial,
            on_result=lambda result: count("formulation", result),
        )
    return Conversation(
        conversation_id=conversation_id,
        profile_id=item.profile.profile_id,
        phenotype=item.profile.phenotype,
        clinician=item.clinician,
        clinician_model=participants.clinician.spec.model,
        patient=participants.patient_alias or _name(participants.patient),
        patient_model=participants.patient.spec.model,
        patient_mode=item.patient_mode,
        condition=item.condition,
        trial=item.trial,
        max_turns=item.max_turns,
        opening=opening,
        turns=turns,
        status="ok" if termination in ("completed", "clinician_ended") else termination,
        termination=termination,
        error=error,
        usage={name: meter.to_usage() for name, meter in meters.items() if meter.calls},
        formulation=formulation,
        fork=None if fork is None else {"parent": fork.parent.conversation_id, "at": fork.at, "turn": fork.turn,
                                        "nudge": fork.nudge},
    )
