"""offline/screener: a clinician that reviews every catalog domain systematically — the ceiling.

One screening question per turn, each bundling 2–4 related domains (prompts/offline_clinician.yaml)
so that 11 questions cover the catalog; the last turn closes. With fewer turns, consecutive
bundles are merged into one question; with more, the spare turns follow up on what the patient
disclosed. It never sees the profile: only the transcript (request.messages) and
context turn/max_turns/conversation_id/trial. Trial > 0 varies wording and bundle order, seeded
by (conversation_id, trial); coverage is the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.simulated.formulation import formulation_text
from intake_eval.simulated.phrasing import (
    TurnContext,
    phrases,
    pick,
    result,
    seeded,
    transcript,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

PHRASES = "offline_clinician"
_DENIAL_START = ("no", "not really", "nope", "never", "i don't", "i dont", "nothing")


class OfflineScreener:
    def __init__(self, spec: ModelSpec, catalog: "Catalog"):
        self.spec = spec
        self.catalog = catalog

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = dict(request.context or {})
        opening, pairs = transcript(request.messages)
        if context.get("request") == "formulation":
            return result(formulation_text(opening, pairs, self.catalog, include_disclosed=True), self.spec.model)
        return result(screener_turn(self.catalog, context, pairs), self.spec.model)


def screening_plan(catalog: "Catalog", conversation_id: str = "", trial: int = 0) -> list[tuple[list[str], str]]:
    """(domains, question) per bundle, in asking order. Catalog domains no bundle names are
    appended with their catalog probe question, so a changed catalog is still covered."""
    bank = phrases(PHRASES)
    rng = seeded("offline-screener", conversation_id, trial)
    plan = []
    covered: set[str] = set()
    for bundle in bank["bundles"]:
        domains = [d for d in bundle["domains"] if d in catalog.domains]
        if not domains:
            continue
        question = bundle["questions"][0] if trial == 0 else pick(rng, bundle["questions"])
        plan.append((domains, question))
        covered.update(domains)
    for domain in catalog.domains.values():
        if domain.id not in covered and domain.probe_questions:
            plan.append(([domain.id], domain.probe_questions[0]))
    if trial > 0:  # vary the order after the first bundle; coverage is unchanged
        rest = plan[1:]
        rng.shuffle(rest)
        plan = plan[:1] + rest
    return plan


def group_plan(plan: list[tuple[list[str], str]], slots: int) -> list[list[tuple[list[str], str]]]:
    """Spread the bundles over ``slots`` question turns as evenly as possible, in order."""
    if slots <= 0:
        return []
    if slots >= len(plan):
        return [[item] for item in plan]
    size, extra = divmod(len(plan), slots)
    groups, start = [], 0
    for index in range(slots):
        end = start + size + (1 if index < extra else 0)
        groups.append(plan[start:end])
        start = end
    return groups


def disclosed_something(reply: str) -> bool:
    lowered = reply.strip().lower()
    return bool(lowered) and not lowered.startswith(_DENIAL_START)


def screener_turn(catalog: "Catalog", context: dict, pairs: list[tuple[str, str]]) -> str:
    bank = phrases(PHRASES)
    now = TurnContext("offline-screener", context, pairs)
    turn, max_turns, conversation_id, trial, rng = now.turn, now.max_turns, now.conversation_id, now.trial, now.rng
    variant = now.variant
    if turn >= max_turns:
        return variant(bank["screener_closing"])
    groups = group_plan(screening_plan(catalog, conversation_id, trial), max_turns - 1)
    if turn - 1 < len(groups):
        texts = [text for _, text in groups[turn - 1]]
        question = bank["joiner"].join([texts[0]] + [text[:1].lower() + text[1:] for text in texts[1:]])
    else:
        question = bank["follow_ups"][(turn - 1 - len(groups)) % len(bank["follow_ups"])]
    if turn == 1:
        return f"{variant(bank['screener_intro'])} {question}"
    last_reply = pairs[-1][1] if pairs else ""
    if disclosed_something(last_reply):
        return f"{pick(rng, bank['acknowledgements'])} {question}"
    return question
