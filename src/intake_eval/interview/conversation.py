"""One intake: the patient speaks first, then N clinician turns, each answered by the patient.

Every conversation ends with a termination reason: completed | model_error | empty_after_length |
refused | empty_answer | truncated. An answer without visible text is never the clinician ending the
interview: it is a failed turn (llm/answer.py: a refusal or content filter at once, an empty answer
after one fresh sample), recorded with ``status`` = the reason, the role that failed, the provider's
refusal words and the turns completed so far; the runner retries failed conversations on the next
run (a refused or empty answer then comes from the response cache: the same answer, unpaid).

Every answer's ``finish_reason`` is kept per turn and role; an answer cut at the token cap is kept
and flagged (``truncated``), or, with ``on_truncation="fail"``, fails the conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from intake_eval.core.limits import DEFAULT_TURNS
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.records import Conversation, ConversationTurn, PatientMode, Profile
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
from intake_eval.llm.affinity import conversation_scope
from intake_eval.llm.answer import truncated, truncated_error
from intake_eval.llm.base import ChatModel, ChatResult, ModelCallError, UsageMeter


CallHook = Callable[[str, ChatResult], None]  # (role, result): live token/dollar accounting
# Failures that are their own conversation status; any other model failure is "model_error".
FAILURE_TERMINATIONS = frozenset({"empty_after_length", "refused", "empty_answer", "truncated"})


def make_conversation_id(profile_id: str, clinician: str, condition: str, patient_mode: str, trial: int, *,
                         patient: str | None = None, style: str | None = None) -> str:
    """``{profile}.{clinician}.{condition}.{mode}[.p-{patient}][.s-{style}].t{trial}``.

    ``patient`` is given only when the run has several patient models and ``style`` only when it is not
    the forthcoming one, so every id of a one-patient, forthcoming run (and its records and resumes) is
    what it always was."""
    segments = [profile_id, file_safe(clinician), condition, patient_mode]
    if patient is not None:
        segments.append(f"p-{file_safe(patient)}")
    if style is not None and style != "forthcoming":
        segments.append(f"s-{style}")
    return ".".join([*segments, f"t{trial}"])


def pairing_id(conversation_id: str) -> str:
    """The id without its patient-style segment: what conversations of one profile, clinician, condition
    and trial share across styles (the offline clinicians seed their habits from it, so a style
    comparison is paired on everything but the patient's behaviour)."""
    return ".".join(part for part in conversation_id.split(".") if not part.startswith("s-"))


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
    # The profile by id, read from ``profiles`` when the conversation runs: a plan of 10⁵ conversations
    # holds ids, not every profile as a model object (``interview/plan.profile_index``).
    profile_id: str
    profiles: Mapping[str, Profile] = field(compare=False, repr=False)
    clinician: str = ""  # alias as given on the command line
    condition: str = "minimal"
    patient_mode: PatientMode = "prompted"
    trial: int = 0
    max_turns: int = DEFAULT_TURNS
    # The opening is shared by every conversation of a (profile, trial); exactly one of them (the
    # first in plan order) carries its usage, whichever actually made the call, so records are
    # the same however a run was interrupted and resumed.
    records_opening_usage: bool = True
    # After the last turn, ask the clinician for its case formulation (not a turn).
    formulation: bool = False
    fork: ForkStart | None = None
    on_truncation: str = "keep"  # keep (and flag the turn) | fail (the conversation): answer.TRUNCATION_POLICIES
    patient_style: str = DEFAULT_STYLE  # how the patient speaks (core/patient_styles.py)
    # The patient model's alias when the run has several (it enters the id and picks the model);
    # None: the run's one patient model.
    patient: str | None = None

    @classmethod
    def of(cls, profile: Profile, **planned: Any) -> PlannedConversation:
        """One conversation of a profile held by the item itself (a single item, a test)."""
        return cls(profile_id=profile.profile_id, profiles={profile.profile_id: profile}, **planned)

    @property
    def profile(self) -> Profile:
        return self.profiles[self.profile_id]

    @property
    def conversation_id(self) -> str:
        own = make_conversation_id(self.profile_id, self.clinician, self.condition, self.patient_mode, self.trial,
                                   patient=self.patient, style=self.patient_style)
        return make_fork_id(own, self.fork.at, self.fork.nudge) if self.fork is not None else own


@dataclass(frozen=True)
class Participants:
    clinician: ChatModel
    patient: ChatModel
    tracker: ChatModel | None = None  # tracked mode; None → the patient model (or the classifier if offline)
    patient_alias: str = ""


def opening_key(item: PlannedConversation) -> tuple[str, str, int, str | None, str]:
    """The conversations that hear one opening: a profile, patient mode, trial, patient model and style."""
    return (item.profile_id, item.patient_mode, item.trial, item.patient, item.patient_style)


def _name(model: ChatModel) -> str:
    return model.spec.alias or model.spec.model


async def _opening(setup: PatientSetup,
                   openings: dict[tuple, asyncio.Future[tuple[str, ChatResult, PatientState]]] | None,
                   key: tuple) -> tuple[str, ChatResult, bool]:
    """All clinicians of a profile/trial hear the same opening (a paired design). Returns
    (text, result, made_the_call)."""
    if openings is None:
        text, result, _ = await patient_opening(setup)
        return text, result, True
    task = openings.get(key)
    owner = task is None
    if task is None:
        task = asyncio.ensure_future(patient_opening(setup))
        openings[key] = task
    try:
        text, result, _ = await asyncio.shield(task)
    except ModelCallError:
        openings.pop(key, None)  # let a later conversation try again
        raise
    return text, result, owner


def _termination(failure: ModelCallError) -> str:
    if failure.kind == "content_policy":  # the provider's safety system rejected the request: a refusal too
        return "refused"
    return failure.kind if failure.kind in FAILURE_TERMINATIONS else "model_error"


def _refusal(failure: ModelCallError) -> str | None:
    """The provider's words when it declined: its refusal, or the content-policy error it answered."""
    return failure.refusal or (failure.format_message() if failure.kind == "content_policy" else None)


async def run_conversation(item: PlannedConversation, participants: Participants, *,
                           openings: dict | None = None, on_call: CallHook | None = None) -> Conversation:
    """Run one intake to its end and return the record (ok or with its failure reason). Every call it
    makes belongs to the conversation: one replica of each alias, the conversation's routing key."""
    with conversation_scope(item.conversation_id):
        return await _run_to_end(item, participants, openings=openings, on_call=on_call)


async def _run_to_end(item: PlannedConversation, participants: Participants, *,
                      openings: dict | None, on_call: CallHook | None) -> Conversation:
    meters = {"clinician": UsageMeter(), "patient": UsageMeter(), "tracker": UsageMeter(), "formulation": UsageMeter()}

    cut: dict[str, int] = {}
    turn_finish: dict[str, str] = {}  # the current turn's answers: role -> finish_reason

    def count(role: str, result: ChatResult, *, record: bool = True, spent: bool = True) -> None:
        if record:
            meters[role].add(result)
        if spent and on_call is not None:
            on_call(role, result)
        if result.finish_reason:
            turn_finish[role] = result.finish_reason

    def check_cut(role: str, model: ChatModel, result: ChatResult) -> None:
        """Flag an answer cut at the cap, or fail the conversation under on_truncation=fail."""
        if not truncated(result):
            return
        cut[role] = cut.get(role, 0) + 1
        if item.on_truncation == "fail":
            raise truncated_error(f"{role} {_name(model)}", result, model.spec.max_tokens)

    setup = PatientSetup(
        profile=item.profile,
        mode=item.patient_mode,
        model=participants.patient,
        tracker=participants.tracker,
        sample_index=item.trial,
        on_answer=count,
        style=item.patient_style,
    )
    conversation_id = item.conversation_id
    opening = ""
    opening_finish: str | None = None
    turns: list[ConversationTurn] = []
    termination, error, role = "completed", None, "patient"
    failure: ModelCallError | None = None
    fork = item.fork
    try:
        if fork is None:
            opening, result, made_call = await _opening(setup, openings, opening_key(item))
            count("patient", result, record=item.records_opening_usage, spent=made_call)
            opening_finish = result.finish_reason
            check_cut("patient", participants.patient, result)
            state, first = PatientState(opening=opening), 1
        else:  # the parent's opening and turns before the fork, verbatim: nothing is asked again
            opening, first = fork.parent.opening, fork.turn
            opening_finish = fork.parent.opening_finish_reason
            state = PatientState(opening=opening)
            for kept in fork.parent.turns[: fork.turn - 1]:
                turns.append(kept)
                state = advance_patient(state, kept)
                for cut_role in kept.truncated:
                    cut[cut_role] = cut.get(cut_role, 0) + 1
        for number in range(first, item.max_turns + 1):
            role = "clinician"
            turn_finish.clear()
            nudge = fork.nudge_text if fork is not None and number == fork.turn else None
            said = await clinician_turn(
                participants.clinician, condition=item.condition, opening=opening, turns=state.turns,
                turn=number, max_turns=item.max_turns, conversation_id=conversation_id, trial=item.trial,
                nudge=nudge, pairing=pairing_id(conversation_id), on_result=lambda result: count("clinician", result),
            )
            check_cut("clinician", participants.clinician, said)
            role = "patient"
            reply = await patient_reply(setup, state, number, said.text.strip())  # calls counted through on_answer
            check_cut("patient", participants.patient, reply.result)
            tracker_cut = [result for result in reply.tracker_results if truncated(result)]
            if tracker_cut:  # its answer is validated (and repaired) as JSON: flagged, never a failure
                cut["tracker"] = cut.get("tracker", 0) + len(tracker_cut)
            turn = ConversationTurn(
                turn=number, clinician=said.text.strip(), patient=reply.text,
                clinician_reasoning=said.reasoning or None, tracker=reply.tracker, nudge=nudge,
                finish_reason=dict(sorted(turn_finish.items())),
                truncated=[name for name, cut_here in (("clinician", truncated(said)), ("patient", truncated(reply.result)),
                                                        ("tracker", bool(tracker_cut))) if cut_here],
            )
            turns.append(turn)
            state = advance_patient(state, turn)
    except ModelCallError as exc:
        failure = exc
        termination = _termination(exc)
        role = exc.role or role
        who = {"clinician": participants.clinician, "tracker": participants.tracker}.get(role) or participants.patient
        error = f"{role} {_name(who)} at turn {len(turns) + (1 if opening else 0)}: {exc.format_message()}"
    # post-intake case formulation (interview/formulation.py); a failure is recorded, never fatal
    formulation = None
    if item.formulation and termination == "completed":
        formulation = await request_formulation(
            participants.clinician, clinician_messages(item.condition, opening, turns),
            conversation_id=conversation_id, turn=len(turns), max_turns=item.max_turns, trial=item.trial,
            on_result=lambda result: count("formulation", result),
        )
        if formulation.get("truncated"):
            cut["formulation"] = cut.get("formulation", 0) + 1
    return Conversation(
        conversation_id=conversation_id,
        profile_id=item.profile.profile_id,
        phenotype=item.profile.phenotype,
        clinician=item.clinician,
        clinician_model=participants.clinician.spec.model,
        patient=participants.patient_alias or _name(participants.patient),
        patient_model=participants.patient.spec.model,
        patient_mode=item.patient_mode,
        patient_style=item.patient_style,
        condition=item.condition,
        trial=item.trial,
        max_turns=item.max_turns,
        opening=opening,
        turns=turns,
        status="ok" if termination == "completed" else termination,
        termination=termination,
        error=error,
        failed_role=role if failure is not None else None,
        refusal=_refusal(failure) if failure is not None else None,
        opening_finish_reason=opening_finish,
        truncated=dict(sorted(cut.items())),
        usage={name: meter.to_usage() for name, meter in meters.items() if meter.calls},
        formulation=formulation,
        fork=None if fork is None else {"parent": fork.parent.conversation_id, "at": fork.at, "turn": fork.turn,
                                        "nudge": fork.nudge},
    )
