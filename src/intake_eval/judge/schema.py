"""What a judge must answer: the JSON schema sent for structured output, a tolerant parser for
answers that arrive wrapped in prose or code fences, and strict validation against the profile.

The schema is built per conversation, so a grammar-constrained model cannot leave anything out:
every object names all its properties as required and allows no others. Per-turn mode (one call
per turn) answers one turn:

    {"reasoning": "...", "question_type": "closed_hypothesis", "patient_faithful": true,
     "domains": {"insomnia": {"reasoning": "...", "asked_about": true, "disclosed": false}, …one per hidden id}}

Conversation mode answers ``{"turns": {"0": turn, "1": turn, …one per turn}}``. Providers whose
schema dialect refuses ``additionalProperties`` (Gemini) get it removed on the way out
(llm/structured.py); the required keys stay. The parser also reads the older shapes a model
answering from the prompt alone may give (domains as a list of ``{"domain": id, …}``, turns as a
list with ``"turn"`` numbers). Reasonings copied from the prompt's example (``"<one sentence>"``,
``"..."``) are invalid. The stored record keeps its own shape (records.TurnJudgment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from intake_eval.core.placeholders import placeholder_problem, written_text
from intake_eval.core.records import (
    QUESTION_TYPES,
    DomainLabel,
    QuestionType,
    TurnJudgment,
)


class JudgeOutputError(ValueError):
    """The judge's answer could not be parsed or does not fit the schema; the message is quoted
    back to the judge in the one repair request."""


class RawDomainLabel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    domain: str
    reasoning: str = ""
    asked_about: bool
    disclosed: bool


class RawTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    turn: int | None = None  # per-turn answers need not repeat it; keyed turns get it from the key
    reasoning: str = ""
    question_type: QuestionType
    patient_faithful: bool
    domains: list[RawDomainLabel] = Field(default_factory=list)


class RawConversation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    turns: list[RawTurn]


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object whose every property is required and nothing else is allowed."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# Reasoning lengths a grammar enforces (a sentence or two); an unconstrained answer may be longer.
TURN_REASONING_CHARS = 300
DOMAIN_REASONING_CHARS = 200


def _turn_schema(hidden: Sequence[str]) -> dict[str, Any]:
    # Reasoning before the labels: a model generating in schema order thinks before it decides.
    label = _closed({"reasoning": written_text(DOMAIN_REASONING_CHARS), "asked_about": {"type": "boolean"},
                     "disclosed": {"type": "boolean"}})
    return _closed({
        "reasoning": written_text(TURN_REASONING_CHARS),
        "question_type": {"type": "string", "enum": list(QUESTION_TYPES)},
        "patient_faithful": {"type": "boolean"},
        "domains": _closed({domain: label for domain in hidden}),
    })


def response_schema(hidden: Sequence[str], mode: str, turns: Sequence[int] = ()) -> dict[str, Any]:
    """The schema for one judge request: one turn (per-turn mode), or every turn in ``turns``."""
    turn = _turn_schema(hidden)
    if mode == "per-turn":
        return turn
    return _closed({"turns": _closed({str(number): turn for number in turns})})


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object in the text: tolerates code fences, leading prose and trailing text."""
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder(strict=False)  # a raw newline inside a string (some grammars emit one) is read
    for candidate in candidates:
        start = candidate.find("{")
        tries = 0
        while start != -1 and tries < 20:
            try:
                value, _end = decoder.raw_decode(candidate[start:])
                if isinstance(value, dict):
                    return value
            except ValueError:
                pass
            start = candidate.find("{", start + 1)
            tries += 1
    raise JudgeOutputError("the answer contains no JSON object")


def _normalise_domains(data: Any) -> Any:
    """{"domains": {"insomnia": {...}}} (the schema's shape) → the list form RawTurn reads."""
    if isinstance(data, dict) and isinstance(data.get("domains"), dict):
        data = dict(data)
        data["domains"] = [
            {"domain": key, **value} if isinstance(value, dict) else {"domain": key, "invalid": value}
            for key, value in data["domains"].items()
        ]
    return data


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors()[:5]:
        location = ".".join(str(part) for part in item.get("loc", ())) or "(top level)"
        problems.append(f"{location}: {item.get('msg', 'invalid')}")
    more = f" (+{error.error_count() - 5} more)" if error.error_count() > 5 else ""
    return "; ".join(problems) + more


def _normalise_turns(data: Any) -> Any:
    """{"turns": {"0": {...}, …}} (the schema's shape) → the list form with turn numbers."""
    turns = data.get("turns") if isinstance(data, dict) else None
    if isinstance(turns, dict):
        listed = []
        for key, value in turns.items():
            if not isinstance(value, dict):
                raise JudgeOutputError(f"turns.{key} must be a turn object")
            try:
                number = int(str(key).strip().removeprefix("turn").strip())
            except ValueError:
                raise JudgeOutputError(f"turns: {key!r} is not a turn number") from None
            listed.append({**value, "turn": number})
        data = {**data, "turns": listed}
    if isinstance(data, dict) and isinstance(data.get("turns"), list):
        data = {**data, "turns": [_normalise_domains(turn) for turn in data["turns"]]}
    return data


def _placeholders(raw: RawTurn) -> list[str]:
    found = [placeholder_problem("reasoning", raw.reasoning)]
    found += [placeholder_problem(f"domains.{label.domain}.reasoning", label.reasoning) for label in raw.domains]
    return [problem for problem in found if problem]


def _to_turn_judgment(raw: RawTurn, expected_turn: int, hidden: Sequence[str]) -> TurnJudgment:
    if raw.turn is not None and raw.turn != expected_turn:
        raise JudgeOutputError(f"turn is {raw.turn} but turn {expected_turn} was asked for")
    seen = [label.domain for label in raw.domains]
    unknown = sorted(set(seen) - set(hidden))
    missing = [domain for domain in hidden if domain not in seen]
    duplicated = sorted({domain for domain in seen if seen.count(domain) > 1})
    problems = []
    if missing:
        problems.append(f"missing domains {missing}")
    if unknown:
        problems.append(f"unknown domains {unknown} (label only {list(hidden)})")
    if duplicated:
        problems.append(f"domains listed twice {duplicated}")
    problems += _placeholders(raw)
    if problems:
        raise JudgeOutputError(f"turn {expected_turn}: " + "; ".join(problems))
    opening = expected_turn == 0
    domains = {
        # The opening answers no question: nothing on it can be asked_about.
        label.domain: DomainLabel(asked_about=label.asked_about and not opening, disclosed=label.disclosed,
                                  reasoning=label.reasoning)
        for label in raw.domains
    }
    return TurnJudgment(
        turn=expected_turn,
        question_type="other" if opening else raw.question_type,
        patient_faithful=raw.patient_faithful,
        domains={domain: domains[domain] for domain in hidden},
        reasoning=raw.reasoning,
    )


def parse_turn(text: str, expected_turn: int, hidden: Sequence[str]) -> TurnJudgment:
    data = _normalise_domains(extract_json(text))
    if "question_type" not in data and isinstance(data.get("turns"), (list, dict)) and len(data["turns"]) == 1:
        data = _normalise_turns(data)["turns"][0]  # a one-turn conversation answer is fine too
    try:
        raw = RawTurn.model_validate(data)
    except ValidationError as exc:
        raise JudgeOutputError(_describe(exc)) from None
    return _to_turn_judgment(raw, expected_turn, hidden)


def parse_conversation(text: str, expected_turns: Sequence[int], hidden: Sequence[str]) -> list[TurnJudgment]:
    data = _normalise_turns(extract_json(text))
    try:
        raw = RawConversation.model_validate(data)
    except ValidationError as exc:
        raise JudgeOutputError(_describe(exc)) from None
    if any(turn.turn is None for turn in raw.turns):
        raise JudgeOutputError("every turn in the list needs its \"turn\" number")
    by_turn = {turn.turn: turn for turn in raw.turns if turn.turn is not None}  # none is None: checked above
    missing = [t for t in expected_turns if t not in by_turn]
    extra = sorted(set(by_turn) - set(expected_turns))
    if missing or extra or len(raw.turns) != len(by_turn):
        raise JudgeOutputError(
            f"turns must be exactly {list(expected_turns)} once each"
            + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else "")
        )
    labelled, problems = [], []
    for t in expected_turns:
        try:
            labelled.append(_to_turn_judgment(by_turn[t], t, hidden))
        except JudgeOutputError as exc:
            problems.append(str(exc))
    if problems:
        raise JudgeOutputError("; ".join(problems))
    return labelled
