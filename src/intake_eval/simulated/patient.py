"""offline/patient: a state-tracked simulated patient, deterministic and instant.

Each reply classifies the clinician's utterance (intake_eval.catalog.classifier) and then:
- a domain the question asks about: the presenting concern or an already disclosed domain is
  elaborated; a hidden domain is disclosed (its rendered phenomenology, quoted, so a text-based
  judge sees the disclosure) only if it may be spoken about now — in "prompted" mode when this
  utterance asks about it, in "tracked" mode when the tracker put it in context["unlocked"];
  a domain the profile does not have is denied, never invented;
- an open invitation elaborates on the presenting concern or on domains already disclosed;
- a follow-up (onset, frequency, impact, triggers) answers about the domain last talked about;
- advice gets an acknowledgement; rapport and logistics get a short reply.
State (what has been said) is recovered from context["history"], so the model holds none.
Wording varies with a generator seeded by (profile_id, turn). How many sentences each answer takes
and its phrases follow the behaviour style in context["style"] (simulated/patient_voice.py); the
rules above, what is disclosed and when, are the same for every style.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from intake_eval.catalog.classifier import classify
from intake_eval.core.records import DomainDraw, Profile
from intake_eval.llm.base import ChatRequest, ChatResult, ModelCallError, ModelSpec
from intake_eval.simulated.patient_voice import Voice, voice
from intake_eval.simulated.phrasing import phrases, pick, result, seeded, sentences

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

PHRASES = "offline_patient"

_FOLLOW_UP = {
    "onset": re.compile(r"\b(when did|how long|since when|start|begin|began|first noticed)\b"),
    "frequency": re.compile(r"\b(how often|how frequently|how many times|every day|most days|how much of the time)\b"),
    "impact": re.compile(r"\b(affect|impact|interfere|get in the way|daily life|work|relationships?)\w*"),
    "trigger": re.compile(r"\b(trigger|sets? (it|them|this|that) off|worse|better|brings? (it|them|this|that) on)\w*"),
    "coping": re.compile(r"\b(tried|helps?|helped|cope|coping|manage|managing)\b"),
}
_CLOSING = re.compile(r"\b(thank you for (coming|sharing|talking|today)|see you|take care|next (session|time|week)|"
                      r"(almost|nearly) out of time|wrap (up|things up)|goodbye|bye)\b", re.I)
_LOGISTICS = re.compile(r"\b(okay if|ok if|alright if|does .* work|schedule|appointment|follow.?up|questions for me)\b", re.I)


def draw_segments(draw: DomainDraw) -> list[str]:
    """What the patient can say about one domain: its rendered phenomenology sentences, or (if
    never rendered) the catalog's symptom texts in first person."""
    rendered = sentences(draw.phenomenology)
    if rendered:
        return rendered
    frames = phrases(PHRASES)["symptom_frames"]
    return [frames[i % len(frames)].format(symptom=symptom) for i, symptom in enumerate(draw.symptoms)]


_DISTINCTIVE: dict[str, tuple[Profile, dict[str, list[str]]]] = {}  # profile_id -> (profile, segments)


def distinctive_segments(profile: Profile) -> dict[str, list[str]]:
    """Per domain, the sentences and symptom texts that belong to it alone. Generic sentences
    ("It happens most weeks.") can occur in several domains and prove nothing. Cached per
    profile object (a conversation asks for it every turn)."""
    cached = _DISTINCTIVE.get(profile.profile_id)
    if cached is not None and cached[0] is profile:
        return cached[1]
    if len(_DISTINCTIVE) > 1024:
        _DISTINCTIVE.clear()
    _DISTINCTIVE[profile.profile_id] = (profile, _distinctive(profile))
    return _DISTINCTIVE[profile.profile_id][1]


def _distinctive(profile: Profile) -> dict[str, list[str]]:
    owners: dict[str, set[str]] = {}
    for draw in [profile.presenting, *profile.hidden]:
        for text in [*draw_segments(draw), *draw.symptoms]:
            owners.setdefault(text, set()).add(draw.domain)
    return {
        draw.domain: [t for t in [*draw_segments(draw), *draw.symptoms] if owners[t] == {draw.domain}]
        for draw in [profile.presenting, *profile.hidden]
    }


def spoken_domains(profile: Profile, texts: list[str]) -> set[str]:
    """Domains whose content appears in what the patient already said."""
    said = " ".join(texts)
    return {domain for domain, own in distinctive_segments(profile).items() if any(text in said for text in own)}


class OfflinePatient:
    def __init__(self, spec: ModelSpec, catalog: "Catalog | None" = None):
        self.spec = spec
        self.catalog = catalog

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = request.context or {}
        if context.get("role") != "patient" or "profile" not in context:
            raise ModelCallError(
                f"{self.spec.alias or self.spec.model} plays the patient only (it needs the patient context)",
                kind="fatal",
            )
        return result(reply(context, request.messages), self.spec.model)


def reply(context: Mapping[str, Any], messages: list | tuple = ()) -> str:
    """The patient's text for one request context (see docs/ARCHITECTURE.md). ``messages`` is
    the patient's chat view; its 'assistant' messages (the patient's own words, the opening
    included) complete what context["history"] says was already said."""
    profile: Profile = context["profile"]
    turn = int(context.get("turn") or 0)
    utterance = context.get("clinician_utterance")
    rng = seeded("offline-patient", profile.profile_id, turn)
    speaking = voice(context.get("style"))
    if turn == 0 or not utterance:
        return opening(profile, rng, speaking)
    history = list(context.get("history") or [])
    said = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
    said += [item.get("patient", "") for item in history]
    state = _State(profile, history, said)
    if context.get("mode") == "tracked":
        return _answer(state, utterance, set(context.get("unlocked") or ()), rng, speaking)
    return _answer(state, utterance, None, rng, speaking)


def opening(profile: Profile, rng, speaking: Voice | None = None) -> str:
    speaking = speaking or voice(None)
    bank = speaking.bank()
    demo = profile.demographics
    parts = [pick(rng, bank["greetings"])]
    intro = bank["intro_with_name"] if demo.name else bank["intro_without_name"]
    parts.append(pick(rng, intro).format(name=demo.name, age=demo.age))
    if demo.occupation:
        article = "an" if demo.occupation[:1].lower() in "aeiou" else "a"
        parts.append(pick(rng, bank["occupation"]).format(article=article, occupation=demo.occupation))
    if demo.relationship:
        parts.append(pick(rng, bank["relationship"]).format(relationship=demo.relationship))
    if demo.postpartum:
        parts.append(pick(rng, bank["postpartum"]))
    parts.extend(draw_segments(profile.presenting)[:speaking.opening_segments])
    if speaking.tangential:
        parts.append(pick(rng, bank["tangents"]))
    return " ".join(parts)


class _State:
    """What the patient has said so far, recovered from the history."""

    def __init__(self, profile: Profile, history: list[dict], said: list[str]):
        self.profile = profile
        self.draws = {draw.domain: draw for draw in [profile.presenting, *profile.hidden]}
        self.said_text = " ".join(said)
        self.spoken = spoken_domains(profile, said) | {profile.presenting.domain}
        self.history = history

    def unsaid(self, domain: str) -> list[str]:
        return [s for s in draw_segments(self.draws[domain]) if s not in self.said_text]

    def focus(self) -> str:
        """The domain the conversation was last about: the last one the patient spoke of."""
        for item in reversed(self.history):
            found = spoken_domains(self.profile, [item.get("patient", "")])
            hidden_first = [d for d in found if d != self.profile.presenting.domain]
            if hidden_first:
                return sorted(hidden_first)[0]
            if found:
                return self.profile.presenting.domain
        return self.profile.presenting.domain


def _talk_about(state: _State, domain: str, count: int, rng) -> list[str]:
    """Next unsaid sentences about a domain; once everything is said, restate a symptom."""
    fresh = state.unsaid(domain)
    if fresh:
        return fresh[:count]
    draw = state.draws[domain]
    if draw.symptoms:
        return [pick(rng, phrases(PHRASES)["repeat_frames"]).format(symptom=pick(rng, draw.symptoms))]
    return [pick(rng, phrases(PHRASES)["nothing_more"])]


def _disclose(state: _State, domain: str, rng, speaking: Voice) -> list[str]:
    """A hidden domain's first disclosure in this voice: its rendered sentences, or (guarded, terse) one
    sentence carrying one of its symptoms — the domain's own words either way, so a judge sees it."""
    draw = state.draws[domain]
    if not speaking.symptom_disclosure or not draw.symptoms:
        return _talk_about(state, domain, speaking.disclosure_segments, rng)
    unsaid = [symptom for symptom in draw.symptoms if symptom not in state.said_text] or draw.symptoms
    return [pick(rng, speaking.bank()["symptom_frames"]).format(symptom=unsaid[0])]


def _answer(state: _State, utterance: str, unlocked: set[str] | None, rng, speaking: Voice | None = None) -> str:
    speaking = speaking or voice(None)
    bank = speaking.bank()
    profile = state.profile
    found = classify(utterance, disclosed=sorted(state.spoken))
    hidden = set(profile.hidden_domains)
    asked = set(found.domains)
    if unlocked is not None:
        # Tracked mode: the tracker's unlock decision is binding, even where it saw a probe the
        # offline classifier did not (an LLM tracker); an unlocked domain not yet spoken of was
        # unlocked by this turn.
        asked |= (unlocked & hidden) - state.spoken
    parts: list[str] = []
    if asked:
        denied, locked = [], []
        disclosed = False
        for domain in _ordered(sorted(asked), profile.presenting.domain):
            if domain == profile.presenting.domain or (domain in hidden and domain in state.spoken):
                parts.extend(_talk_about(state, domain, speaking.elaboration_segments, rng))
            elif domain in hidden and (unlocked is None or domain in unlocked):
                if not parts:
                    parts.append(pick(rng, bank["disclosure_leads"]))
                parts.extend(_disclose(state, domain, rng, speaking))
                disclosed = True
            elif domain in hidden:
                locked.append(domain)  # tracked mode: the responder was not given this domain
            else:
                denied.append(domain)
        if locked and not parts:
            parts.append(pick(rng, bank["locked"]))
        if denied:
            parts.append(pick(rng, bank["partial_denials"] if parts else bank["denials"]))
        if disclosed and speaking.hedges_recall:
            parts.append(pick(rng, bank["recall_hedges"]))
        if speaking.tangential and len(parts) > 1:
            parts.append(pick(rng, bank["tangents"]))
        return " ".join(parts)
    kind = found.question_type
    if kind == "treatment_planning":
        return pick(rng, bank["advice_acknowledgements"])
    if kind == "clarifying":
        return _follow_up(state, utterance, rng, speaking)
    if kind == "open":
        if speaking.deflects_open:
            return pick(rng, bank["open_deflections"])
        if speaking.tangential:
            return f"{_elaborate(state, rng, speaking)} {pick(rng, bank['tangents'])}"
        return _elaborate(state, rng, speaking)
    if _CLOSING.search(utterance):
        return pick(rng, bank["closing_replies"])
    if _LOGISTICS.search(utterance):
        return pick(rng, bank["logistics_replies"])
    return pick(rng, bank["empathy_replies"])


def _ordered(domains: list[str], presenting: str) -> list[str]:
    return sorted(domains, key=lambda domain: (domain != presenting, domain))


def _elaborate(state: _State, rng, speaking: Voice) -> str:
    """An open invitation: more about the presenting concern, then about disclosed domains."""
    profile = state.profile
    for domain in [profile.presenting.domain] + sorted(state.spoken - {profile.presenting.domain}):
        fresh = state.unsaid(domain)
        if fresh:
            return " ".join(fresh[:speaking.elaboration_segments])
    bank = phrases(PHRASES)
    unused = [c for c in profile.life_context if c not in state.said_text]
    if unused:
        return pick(rng, bank["life_context"]).format(context=unused[0])
    return " ".join(_talk_about(state, profile.presenting.domain, 1, rng))


def _follow_up(state: _State, utterance: str, rng, speaking: Voice) -> str:
    """Onset, frequency, impact, triggers or coping of the domain last talked about."""
    bank = speaking.bank()
    domain = state.focus()
    lowered = utterance.lower()
    if _FOLLOW_UP["onset"].search(lowered):
        onset = pick(seeded("offline-patient-onset", state.profile.profile_id, domain), bank["onsets"])
        return pick(rng, bank["onset_answers"]).format(onset=onset)
    if _FOLLOW_UP["frequency"].search(lowered):
        return pick(rng, bank["frequency_answers"][state.draws[domain].severity])
    if _FOLLOW_UP["impact"].search(lowered):
        return pick(rng, bank["impact_answers"])
    if _FOLLOW_UP["trigger"].search(lowered):
        return pick(rng, bank["trigger_answers"])
    if _FOLLOW_UP["coping"].search(lowered):
        return pick(rng, bank["coping_answers"])
    return " ".join(_talk_about(state, domain, speaking.elaboration_segments, rng))
