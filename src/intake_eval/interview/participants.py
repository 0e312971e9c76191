"""The two participants of an intake: the simulated patient and the clinician under test.

Stateless style: each step takes the conversation so far and returns the model's answer plus
the new state; nothing here holds mutable state between calls.

Patient modes:
- ``prompted`` (the study's design): one system prompt with the full domain inventory and the
  disclosure rule; whether a hidden domain is disclosed depends on the patient model obeying it.
- ``tracked`` (state-aware patient): a tracker step names the hidden domains the clinician's
  turn asks about specifically; the responder prompt holds only the presenting concern plus
  the domains unlocked so far, so a locked domain's text never reaches the responder.
  With an offline tracker the decision is the offline classifier's; otherwise it is an LLM call
  (interview/tracker.py) whose JSON answer is validated and repaired once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from intake_eval.catalog.classifier import classify
from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES
from intake_eval.core.prompts import render_prompt
from intake_eval.core.records import (
    ConversationTurn,
    Profile,
    TrackerDecision,
)
from intake_eval.interview.tracker import ask_tracker
from intake_eval.llm.answer import complete_visible
from intake_eval.llm.base import (
    ChatModel,
    ChatRequest,
    ChatResult,
    Message,
    ModelCallError,
)
from intake_eval.llm.prompt_cache import history_cache_points
from intake_eval.llm.request_kind import RequestKind

OFFLINE_TRACKER = "offline/classifier"


@dataclass(frozen=True)
class PatientState:
    """What the patient has said so far and (tracked mode) which hidden domains are unlocked."""

    opening: str = ""
    turns: tuple[ConversationTurn, ...] = ()
    unlocked: tuple[str, ...] = ()


@dataclass(frozen=True)
class PatientSetup:
    """Everything fixed for one patient: the profile, mode and the models that play it."""

    profile: Profile
    mode: str  # prompted | tracked
    model: ChatModel
    tracker: ChatModel | None = None  # tracked mode only; an offline spec means the offline classifier
    sample_index: int = 0
    style: str = DEFAULT_STYLE  # how the patient speaks (core/patient_styles.py)
    # Sees every answered call of a reply (role, result) as it arrives, so a failure later in the
    # same reply (an invalid tracker answer, an empty patient text) loses none of the usage paid.
    on_answer: Callable[[str, ChatResult], None] | None = field(default=None, compare=False, repr=False)
    # Rendered system prompts by unlocked set: a conversation re-renders only when something unlocks.
    prompt_cache: dict = field(default_factory=dict, compare=False, repr=False)

    def answered(self, role: str, result: ChatResult) -> None:
        if self.on_answer is not None:
            self.on_answer(role, result)

    def system_prompt(self, unlocked: tuple[str, ...]) -> str:
        key = unlocked if self.mode == "tracked" else ()
        if key not in self.prompt_cache:
            self.prompt_cache[key] = patient_system_prompt(self.profile, self.mode, key, style=self.style)
        return self.prompt_cache[key]


@dataclass
class PatientReply:
    text: str
    result: ChatResult
    tracker: TrackerDecision | None = None
    tracker_results: list[ChatResult] = field(default_factory=list)


def history_dicts(state: PatientState) -> list[dict[str, Any]]:
    return [{"turn": t.turn, "clinician": t.clinician, "patient": t.patient} for t in state.turns]


# ---------------------------------------------------------------- patient prompts

def patient_system_prompt(profile: Profile, mode: str, unlocked: tuple[str, ...] = (),
                          render: Callable[..., str] = render_prompt, *, style: str = DEFAULT_STYLE) -> str:
    """``render`` (template name, variables → text): the installed templates, or a run folder's snapshot.
    A style other than the default appends its fragment (``prompts/_patient_style_<style>.j2``) after the
    whole prompt, so the default's prompt is exactly what it was before styles existed."""
    if mode == "prompted":
        base = render("patient_prompted", profile=profile)
    else:
        allowed = [draw for draw in profile.hidden if draw.domain in set(unlocked)]
        base = render("patient_responder", profile=profile, unlocked=allowed)
    fragment = STYLES[style].fragment
    return base if fragment is None else f"{base}\n\n{render(fragment, profile=profile)}"


def patient_messages(system: str, state: PatientState, clinician_utterance: str | None) -> list[Message]:
    """The patient's view: the clinician speaks as 'user', the patient answers as 'assistant'."""
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": opening_instruction()},
    ]
    if state.opening:
        messages.append({"role": "assistant", "content": state.opening})
    for turn in state.turns:
        messages.append({"role": "user", "content": turn.clinician})
        messages.append({"role": "assistant", "content": turn.patient})
    if clinician_utterance is not None:
        messages.append({"role": "user", "content": clinician_utterance})
    return messages


def _patient_context(setup: PatientSetup, state: PatientState, unlocked: tuple[str, ...], turn: int,
                     utterance: str | None) -> dict[str, Any]:
    return {
        "role": "patient",
        "profile": setup.profile,
        "mode": setup.mode,
        # prompted: the full inventory is in the prompt; the patient applies the disclosure rule itself
        "unlocked": list(unlocked) if setup.mode == "tracked" else setup.profile.hidden_domains,
        "turn": turn,
        "clinician_utterance": utterance,
        "history": history_dicts(state),
        "style": setup.style,
    }


def _patient_name(setup: PatientSetup) -> str:
    return f"patient {setup.model.spec.alias or setup.model.spec.model}"


async def patient_opening(setup: PatientSetup) -> tuple[str, ChatResult, PatientState]:
    """The patient speaks first, about the presenting concern only."""
    state = PatientState()
    system = setup.system_prompt(())
    messages = patient_messages(system, state, None)
    request = ChatRequest(
        messages=messages,
        sample_index=setup.sample_index,
        purpose=RequestKind.PATIENT,
        cache_points=history_cache_points(messages, 1),
        context=_patient_context(setup, state, (), 0, None),
    )
    result = await complete_visible(setup.model, request, _patient_name(setup))
    text = result.text.strip()
    return text, result, replace(state, opening=text)


async def patient_reply(setup: PatientSetup, state: PatientState, turn: int, utterance: str) -> PatientReply:
    """Answer one clinician turn. Tracked mode runs the tracker first and unlocks domains."""
    decision = None
    tracker_results: list[ChatResult] = []
    unlocked = state.unlocked
    if setup.mode == "tracked":
        decision, tracker_results = await track_turn(setup, state, utterance)
        unlocked = tuple(decision.unlocked_after)
    system = setup.system_prompt(unlocked)
    messages = patient_messages(system, state, utterance)
    request = ChatRequest(
        messages=messages,
        sample_index=setup.sample_index,
        purpose=RequestKind.PATIENT,
        cache_points=history_cache_points(messages, 1),
        context=_patient_context(setup, state, unlocked, turn, utterance),
    )
    result = await complete_visible(setup.model, request, _patient_name(setup),
                                    on_result=lambda answer: setup.answered("patient", answer))
    text = result.text.strip()
    return PatientReply(text=text, result=result, tracker=decision, tracker_results=tracker_results)


def advance_patient(state: PatientState, turn: ConversationTurn) -> PatientState:
    unlocked = tuple(turn.tracker.unlocked_after) if turn.tracker else state.unlocked
    return replace(state, turns=state.turns + (turn,), unlocked=unlocked)


# ---------------------------------------------------------------- tracker

def _decision(question_type: str, asked: list[str], state: PatientState, profile: Profile, source: str,
              repaired: bool = False) -> TrackerDecision:
    hidden = profile.hidden_domains
    asked_hidden = [domain for domain in hidden if domain in set(asked)]
    newly = [domain for domain in asked_hidden if domain not in state.unlocked]
    unlocked_after = [domain for domain in hidden if domain in set(state.unlocked) | set(asked_hidden)]
    return TrackerDecision(
        question_type=question_type,
        asked_domains=asked_hidden,
        newly_unlocked=newly,
        unlocked_after=unlocked_after,
        source=source,
        repaired=repaired,
    )


async def track_turn(setup: PatientSetup, state: PatientState, utterance: str) -> tuple[TrackerDecision, list[ChatResult]]:
    tracker = setup.tracker or setup.model
    if tracker.spec.is_offline:
        found = classify(utterance, disclosed=state.unlocked)
        return _decision(found.question_type, list(found.domains), state, setup.profile, OFFLINE_TRACKER), []
    previous = state.turns[-1].patient if state.turns else state.opening
    try:
        verdict = await ask_tracker(tracker, setup.profile.hidden, previous_patient=previous, utterance=utterance,
                                    sample_index=setup.sample_index,
                                    on_result=lambda result: setup.answered("tracker", result))
    except ModelCallError as exc:
        exc.role = "tracker"  # the conversation names the tracker, not the patient, as the role that failed
        raise
    source = tracker.spec.alias or tracker.spec.model
    decision = _decision(verdict.question_type, verdict.asked, state, setup.profile, source, repaired=verdict.repaired)
    return decision, verdict.results


# ---------------------------------------------------------------- clinician

@lru_cache(maxsize=32)
def clinician_system_prompt(condition: str) -> str:
    return render_prompt(f"clinician_{condition}")


@lru_cache(maxsize=1)
def opening_instruction() -> str:
    return render_prompt("patient_opening")


def clinician_messages(condition: str, opening: str, turns: tuple[ConversationTurn, ...] | list[ConversationTurn],
                       nudge: str | None = None) -> list[Message]:
    """The clinician's view: the patient speaks as 'user', the clinician's visible text is 'assistant'.

    A fork's supervisor note is its own 'user' message just before the turn it was given for (``nudge``:
    the one for the turn about to be asked), so every earlier request is the parent's, byte for byte."""
    messages: list[Message] = [
        {"role": "system", "content": clinician_system_prompt(condition)},
        {"role": "user", "content": opening},
    ]
    for turn in turns:
        if turn.nudge:
            messages.append({"role": "user", "content": turn.nudge})
        messages.append({"role": "assistant", "content": turn.clinician})
        messages.append({"role": "user", "content": turn.patient})
    if nudge:
        messages.append({"role": "user", "content": nudge})
    return messages


async def clinician_turn(model: ChatModel, *, condition: str, opening: str, turns: tuple[ConversationTurn, ...],
                         turn: int, max_turns: int, conversation_id: str, trial: int,
                         nudge: str | None = None, on_result: Callable[[ChatResult], None] | None = None,
                         pairing: str | None = None) -> ChatResult:
    """One clinician utterance. ``pairing``: the id the conversations of one profile share across patient
    styles (context only, never sent: offline clinicians seed their habits from it). The result's text is visible speech; reasoning stays apart. An answer
    without visible text raises ModelCallError (refused | empty_answer, llm/answer.py); ``on_result``
    sees every answered call, those included."""
    messages = clinician_messages(condition, opening, turns, nudge)
    request = ChatRequest(
        messages=messages,
        sample_index=trial,
        purpose=RequestKind.CLINICIAN,
        # the previous call ended one exchange earlier (and before this turn's supervisor note, if any)
        cache_points=history_cache_points(messages, 0, previous_end=len(messages) - (4 if nudge else 3)),
        context={
            "role": "clinician",
            "conversation_id": conversation_id,
            "turn": turn,
            "max_turns": max_turns,
            "trial": trial,
            "request": "turn",
            "pairing": pairing or conversation_id,
        },
    )
    return await complete_visible(model, request, f"clinician {model.spec.alias or model.spec.model}", on_result)
