"""offline/anchored: a clinician that stays on the presenting concern — the floor baseline.

It finds the presenting concern by matching the patient's opening against the catalog, asks
open and follow-up questions about it (onset, frequency, impact, triggers, coping) without
naming any other domain, pivots to advice around the middle of the intake (turn 6 of 12, ±1
seeded by conversation_id and trial) and wraps up in the last two turns. It never sees the
profile, and its formulation covers the presenting concern only.

It can screen, it just does not: when a supervisor's note reaches it (a could-it-ask fork), it spends
the turns left before its wrap-up on the screener's bundles — propensity, not capacity, is what it lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from intake_eval.catalog.classifier import classify
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.simulated.formulation import formulation_text, presenting_domain
from intake_eval.simulated.phrasing import (
    TurnContext,
    phrases,
    result,
    seeded,
    supervisor_note_turn,
    transcript,
)
from intake_eval.simulated.screener import group_plan, screening_plan

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

PHRASES = "offline_clinician"
WRAP_UP_TURNS = 2


class OfflineAnchored:
    def __init__(self, spec: ModelSpec, catalog: "Catalog"):
        self.spec = spec
        self.catalog = catalog
        self._presenting: dict[str, str | None] = {}  # opening -> presenting domain (fuzzy matching is the slow part)

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = dict(request.context or {})
        opening, pairs = transcript(request.messages)
        if context.get("request") == "formulation":
            return result(formulation_text(opening, pairs, self.catalog, include_disclosed=False), self.spec.model)
        if opening not in self._presenting:
            if len(self._presenting) > 4096:
                self._presenting.clear()
            self._presenting[opening] = presenting_domain(opening, self.catalog)
        noted = supervisor_note_turn(request.messages)
        return result(anchored_turn(self.catalog, context, self._presenting[opening], pairs, noted), self.spec.model)


def pivot_turn(max_turns: int, conversation_id: str = "", trial: int = 0) -> int:
    """First advice turn: mid-intake (6 of 12), shifted by -1, 0 or +1 per (conversation, trial)."""
    shift = seeded("offline-anchored-pivot", conversation_id, trial).choice((-1, 0, 1))
    middle = max_turns // 2
    return max(2, min(middle + shift, max_turns - WRAP_UP_TURNS))


def concern_phrase(catalog: "Catalog", domain: str | None) -> str:
    """The presenting domain's label if it names that domain alone, else a neutral phrase —
    so that no question can probe a hidden domain by accident."""
    neutral = phrases(PHRASES)["neutral_concern"]
    if domain is None:
        return neutral
    label = catalog.domains[domain].label
    found = classify(f"Can you tell me more about your {label}?").domains
    return f"the {label}" if found == [domain] else neutral


def anchored_turn(catalog: "Catalog", context: dict, presenting: str | None, pairs: list[tuple[str, str]],
                  noted_at: int | None = None) -> str:
    bank = phrases(PHRASES)
    now = TurnContext("offline-anchored", context, pairs)
    turn, max_turns, conversation_id, trial = now.turn, now.max_turns, now.conversation_id, now.trial
    variant = now.variant
    wrap_up = bank["anchored_wrap_up"]
    if noted_at is not None and noted_at <= turn <= max_turns - len(wrap_up):
        groups = group_plan(screening_plan(catalog, conversation_id, trial), max_turns - len(wrap_up) - noted_at + 1)
        texts = [text for _, text in groups[turn - noted_at]]
        return bank["joiner"].join([texts[0]] + [text[:1].lower() + text[1:] for text in texts[1:]])
    if turn > max_turns - len(wrap_up):
        return wrap_up[len(wrap_up) - 1 - (max_turns - turn)]
    pivot = pivot_turn(max_turns, conversation_id, trial)
    if turn < pivot:
        questions = bank["anchored_questions"][(turn - 1) % len(bank["anchored_questions"])]
        concern = concern_phrase(catalog, presenting)
        return variant(questions).format(concern=concern)
    options = list(bank["advice"].get(presenting, [])) + list(bank["generic_advice"])
    advice = options[(turn - pivot) % len(options)]
    check = variant(bank["advice_check"]) if trial else bank["advice_check"][(turn - pivot) % len(bank["advice_check"])]
    return f"{advice} {check}".strip()
