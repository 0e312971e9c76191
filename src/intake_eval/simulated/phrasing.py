"""Shared helpers of the offline participants: their phrase files (prompts/offline_*.yaml),
seeded choices, and reading a transcript from chat messages."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from intake_eval.core.limits import DEFAULT_TURNS
from intake_eval.core.prompts import prompt_file
from intake_eval.core.yamlfile import read_yaml
from intake_eval.llm.base import CallUsage, ChatResult, Message

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def phrases(name: str) -> dict[str, Any]:
    """prompts/<name>.yaml, the phrase bank of one offline participant (the user's prompts folder
    first, like every template)."""
    return _phrase_file(prompt_file(f"{name}.yaml"))


@lru_cache(maxsize=8)
def _phrase_file(path: Path) -> dict[str, Any]:
    return read_yaml(path, missing=f"phrase file {path} does not exist")


def seeded(*parts: object) -> random.Random:
    """A generator seeded by a readable string (never hash(), which is salted per process)."""
    return random.Random(":".join(str(part) for part in parts))


def pick(rng: random.Random, options: list[str]) -> str:
    return options[rng.randrange(len(options))]




class TurnContext:
    """What an offline clinician knows about the current turn, and its seeded wording chooser.

    Trial 0 always takes the first wording; later trials vary it, seeded by (who, conversation,
    trial, turn), so repeated trials differ only where they are meant to.
    """

    def __init__(self, who: str, context: dict, pairs: list[tuple[str, str]]):
        self.turn = int(context.get("turn") or len(pairs) + 1)
        self.max_turns = int(context.get("max_turns") or DEFAULT_TURNS)
        # Seeds come from the id the conversations of one profile share across patient styles, so
        # a style comparison differs only where the patient's words lead the clinician elsewhere.
        self.conversation_id = str(context.get("pairing") or context.get("conversation_id") or "")
        self.trial = int(context.get("trial") or 0)
        self.rng = seeded(who, self.conversation_id, self.trial, self.turn)

    def variant(self, options: list[str]) -> str:
        return options[0] if self.trial == 0 else pick(self.rng, options)


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(text or "") if part.strip()]


def result(text: str, model: str) -> ChatResult:
    return ChatResult(text=text, usage=CallUsage(), latency_s=0.0, finish_reason="stop", model=model)


def transcript(messages: list[Message]) -> tuple[str, list[tuple[str, str]]]:
    """The clinician's view of the chat → (patient opening, [(clinician, patient reply), …]).

    Clinician turns are 'assistant' messages, the patient's are 'user'; a trailing clinician
    question without a reply gets an empty reply. A final instruction (e.g. a formulation
    request) is a 'user' message too, so callers that add one drop it first.
    """
    opening = ""
    pairs: list[tuple[str, str]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content") or ""
        if role == "system":
            continue
        if role == "assistant":
            pairs.append((content, ""))
        elif role == "user":
            if not pairs and not opening:
                opening = content
            elif pairs and not pairs[-1][1]:
                pairs[-1] = (pairs[-1][0], content)
    return opening, pairs


def supervisor_note_turn(messages: list[Message]) -> int | None:
    """The clinician turn a supervisor's note (a fork's nudge) came just before, or None.

    In the clinician's view the patient and the clinician alternate; a second 'user' message in a row
    is not the patient speaking: it is a note to the clinician (a final formulation request is dropped
    by callers before they ask)."""
    asked, previous = 0, None
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            asked += 1
        elif role == "user" and previous == "user":
            return asked + 1
        if role != "system":
            previous = role
    return None
