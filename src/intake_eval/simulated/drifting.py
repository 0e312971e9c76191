"""offline/drifting: a clinician between the ceiling (screener) and the floor (anchored).

Its habits are drawn once per conversation, seeded by (conversation_id, trial), so they differ
from profile to profile: how thorough it is (the share of the screener's bundles it means to ask,
in a shuffled order) and the turn at which it pivots to advice. Turn 1 asks about the presenting
concern; each later turn asks its next bundle, except that after a reply that disclosed something
it may drift into a follow-up on what the patient just said (a seeded coin per turn), which uses
up a turn. From the pivot on it gives advice, and the last turn wraps up. Whatever it covers
follows from these rules, the seed and the patient's replies: it never sees the profile, only the
transcript and context turn/max_turns/conversation_id/trial. Its formulation is the screener's
(what was disclosed counts).

Like the anchored clinician it can screen, it just does not always: when a supervisor's note reaches
it (a could-it-ask fork), it spends the turns left before its closing on the screening bundles its
own earlier questions did not ask.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.simulated.anchored import concern_phrase
from intake_eval.simulated.formulation import formulation_text, presenting_domain
from intake_eval.simulated.phrasing import (
    TurnContext,
    phrases,
    pick,
    result,
    seeded,
    supervisor_note_turn,
    transcript,
)
from intake_eval.simulated.screener import (
    disclosed_something,
    group_plan,
    screening_plan,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

PHRASES = "offline_clinician"
WHO = "offline-drifting"
THOROUGHNESS = (0.35, 1.0)  # the share of screening bundles it means to ask, drawn per conversation
DRIFT_CHANCE = 0.35  # after a disclosure, the chance it follows up instead of moving on
FIRST_PIVOT = 4  # the earliest advice turn: at least two questions after the opening one


@dataclass(frozen=True)
class Habits:
    bundles: list[tuple[list[str], str]]  # (domains, question) it means to ask, in order
    pivot: int  # first advice turn


def habits(catalog: Catalog, conversation_id: str, trial: int, max_turns: int) -> Habits:
    """What this clinician will try in this conversation: a seeded subset of the screening bundles
    and a seeded pivot turn (between FIRST_PIVOT and the turn before the wrap-up)."""
    rng = seeded(WHO, conversation_id, trial)
    thoroughness = rng.uniform(*THOROUGHNESS)
    plan = screening_plan(catalog, conversation_id, trial)
    rng.shuffle(plan)
    chosen = [item for item in plan if rng.random() < thoroughness] or plan[:1]
    last_question_turn = max(2, max_turns - 1)
    pivot = rng.randint(min(FIRST_PIVOT, last_question_turn), last_question_turn)
    return Habits(chosen, pivot)


def _drifts(conversation_id: str, trial: int, turn: int, previous_reply: str) -> bool:
    """Whether turn ``turn`` follows up on the previous reply instead of asking the next bundle."""
    if not disclosed_something(previous_reply):
        return False
    return random.Random(f"{WHO}-drift:{conversation_id}:{trial}:{turn}").random() < DRIFT_CHANCE


class OfflineDrifting:
    def __init__(self, spec: ModelSpec, catalog: Catalog):
        self.spec = spec
        self.catalog = catalog

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = dict(request.context or {})
        opening, pairs = transcript(request.messages)
        if context.get("request") == "formulation":
            return result(formulation_text(opening, pairs, self.catalog, include_disclosed=True), self.spec.model)
        noted = supervisor_note_turn(request.messages)
        return result(drifting_turn(self.catalog, context, opening, pairs, noted), self.spec.model)


def unasked_bundles(catalog: Catalog, conversation_id: str, trial: int,
                    said: list[str]) -> list[tuple[list[str], str]]:
    """The screening bundles none of the clinician's own utterances ``said`` asked (any wording)."""
    variants = {frozenset(bundle["domains"]): bundle["questions"] for bundle in phrases(PHRASES)["bundles"]}
    remaining = []
    for domains, question in screening_plan(catalog, conversation_id, trial):
        wordings = variants.get(frozenset(domains), [question])
        if not any(wording in text for wording in wordings for text in said):
            remaining.append((domains, question))
    return remaining


def noted_turn(catalog: Catalog, now: TurnContext, pairs: list[tuple[str, str]], noted_at: int) -> str:
    """A turn after a supervisor's note: the bundles not yet asked, spread over the turns before the closing."""
    bank = phrases(PHRASES)
    before = [clinician for clinician, _ in pairs[:noted_at - 1]]
    groups = group_plan(unasked_bundles(catalog, now.conversation_id, now.trial, before), now.max_turns - noted_at)
    index = now.turn - noted_at
    if index >= len(groups):
        return pick(now.rng, bank["drifting_follow_ups"])
    texts = [text for _, text in groups[index]]
    return bank["joiner"].join([texts[0]] + [text[:1].lower() + text[1:] for text in texts[1:]])


def drifting_turn(catalog: Catalog, context: dict, opening: str, pairs: list[tuple[str, str]],
                  noted_at: int | None = None) -> str:
    bank = phrases(PHRASES)
    now = TurnContext(WHO, context, pairs)
    turn, max_turns, conversation_id, trial = now.turn, now.max_turns, now.conversation_id, now.trial
    if turn >= max_turns:
        return now.variant(bank["drifting_closing"])
    if noted_at is not None and noted_at <= turn:
        return noted_turn(catalog, now, pairs, noted_at)
    plan = habits(catalog, conversation_id, trial, max_turns)
    if turn >= plan.pivot:
        options = bank["generic_advice"]
        start = seeded(WHO, "advice", conversation_id, trial).randrange(len(options))
        advice = options[(start + turn - plan.pivot) % len(options)]
        return f"{advice} {bank['advice_check'][(turn - plan.pivot) % len(bank['advice_check'])]}".strip()
    if turn == 1:
        concern = concern_phrase(catalog, presenting_domain(opening, catalog))
        return now.variant(bank["drifting_opening"]).format(concern=concern)
    # Replay the earlier turns' choices from the transcript: which bundles are already asked.
    asked = 0
    for earlier in range(2, turn):
        reply = pairs[earlier - 2][1] if earlier - 2 < len(pairs) else ""
        if not _drifts(conversation_id, trial, earlier, reply) and asked < len(plan.bundles):
            asked += 1
    last_reply = pairs[-1][1] if pairs else ""
    if _drifts(conversation_id, trial, turn, last_reply) or asked >= len(plan.bundles):
        return pick(now.rng, bank["drifting_follow_ups"])
    question = plan.bundles[asked][1]
    if disclosed_something(last_reply):
        return f"{pick(now.rng, bank['acknowledgements'])} {question}"
    return question
