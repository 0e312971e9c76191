"""The tracked-mode tracker as an LLM call: which hidden domains a clinician turn asks about.

The schema is built per conversation: ``asked_domains`` is an object with one required boolean
per hidden domain id (no other keys), so a grammar-constrained model must give a verdict on every
domain and cannot name one that is not hidden. The answer is validated and repaired once; the
older list shape (``"asked_domains": ["insomnia"]``) still reads, for models answering from the
prompt alone. The offline classifier tracker lives in participants.track_turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from intake_eval.core.prompts import render_prompt
from intake_eval.core.records import QUESTION_TYPES, DomainDraw
from intake_eval.llm.answer import truncated, unusable, unusable_error
from intake_eval.llm.base import (
    ChatModel,
    ChatRequest,
    ChatResult,
    Message,
    ModelCallError,
)
from intake_eval.llm.request_kind import RequestKind

TRACKER_MAX_TOKENS = 300


def tracker_schema(hidden_ids: Sequence[str]) -> dict[str, Any]:
    asked = {"type": "object", "properties": {domain: {"type": "boolean"} for domain in hidden_ids},
             "required": list(hidden_ids), "additionalProperties": False}
    return {"type": "object",
            "properties": {"question_type": {"type": "string", "enum": list(QUESTION_TYPES)}, "asked_domains": asked},
            "required": ["question_type", "asked_domains"], "additionalProperties": False}


def _json_object(text: str) -> Any:
    cleaned = re.sub(r"^```(?:json)?\s*|\s*```$", "", (text or "").strip())
    try:
        return json.loads(cleaned, strict=False)  # a raw newline inside a string is still read
    except ValueError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if start < 0 or end <= start:
            raise
        return json.loads(cleaned[start : end + 1], strict=False)


def _ids_by_name(hidden: Sequence[DomainDraw]) -> dict[str, str]:
    by_name = {}
    for draw in hidden:
        by_name[draw.domain.lower()] = draw.domain
        if draw.label:
            by_name[draw.label.lower()] = draw.domain
    return by_name


def _asked_from_object(asked: dict[str, Any], hidden: Sequence[DomainDraw]) -> tuple[list[str] | None, str]:
    by_name = _ids_by_name(hidden)
    verdicts: dict[str, bool] = {}
    for key, value in asked.items():
        domain = by_name.get(str(key).strip().lower())
        if domain is None:
            continue  # not a hidden domain: nothing to unlock
        if not isinstance(value, bool):
            return None, f"asked_domains.{key} must be true or false"
        verdicts[domain] = value
    missing = [draw.domain for draw in hidden if draw.domain not in verdicts]
    if missing:
        return None, f"asked_domains must give true or false for every area id; missing {', '.join(missing)}"
    return [draw.domain for draw in hidden if verdicts[draw.domain]], ""


def parse_tracker_answer(text: str, hidden: list[DomainDraw]) -> tuple[tuple[str, list[str]] | None, str]:
    """(question_type, hidden domain ids asked about) or (None, what was wrong). Labels are mapped
    to ids; a named domain that is not hidden is ignored (nothing to unlock)."""
    try:
        data = _json_object(text)
    except ValueError:
        return None, "it was not a JSON object"
    if not isinstance(data, dict):
        return None, "it was not a JSON object"
    question_type = data.get("question_type")
    if question_type not in QUESTION_TYPES:
        return None, f"question_type must be one of {', '.join(QUESTION_TYPES)} (got {question_type!r})"
    asked = data.get("asked_domains", [])
    if isinstance(asked, dict):
        ids, problem = _asked_from_object(asked, hidden)
        return ((question_type, ids), "") if ids is not None else (None, problem)
    if not isinstance(asked, list) or not all(isinstance(item, str) for item in asked):
        return None, "asked_domains must map every area id to true or false"
    by_name = _ids_by_name(hidden)
    ids = [by_name[item.strip().lower()] for item in asked if item.strip().lower() in by_name]
    return (question_type, [draw.domain for draw in hidden if draw.domain in ids]), ""


@dataclass
class TrackerVerdict:
    question_type: str
    asked: list[str]
    repaired: bool
    results: list[ChatResult] = field(default_factory=list)


async def ask_tracker(tracker: ChatModel, hidden: list[DomainDraw], *, previous_patient: str, utterance: str,
                      sample_index: int, on_result: Callable[[ChatResult], None] | None = None) -> TrackerVerdict:
    """One tracker request and, if its answer does not validate, one repair request. ``on_result``
    sees each answered call as it arrives (usage is paid even when both answers are invalid)."""
    prompt = render_prompt("patient_tracker", hidden=hidden, previous_patient=previous_patient,
                           clinician_utterance=utterance)
    messages: list[Message] = [{"role": "user", "content": prompt}]
    results: list[ChatResult] = []
    schema = tracker_schema([draw.domain for draw in hidden])
    source = tracker.spec.alias or tracker.spec.model
    problem = ""
    for attempt in range(2):  # the first answer, then one repair
        request = ChatRequest(
            messages=messages,
            sample_index=sample_index,
            temperature=0.0,
            max_tokens=max(TRACKER_MAX_TOKENS, tracker.spec.max_tokens or 0) if tracker.spec.reasoning else TRACKER_MAX_TOKENS,
            response_schema=schema,
            purpose=RequestKind.TRACKER,
        )
        result = await tracker.complete(request)
        results.append(result)
        if on_result is not None:
            on_result(result)
        refused = unusable(result)
        if refused is not None and refused.kind == "refused":  # a repair request cannot change a refusal
            raise unusable_error(f"tracker {source}", refused, result, attempts=attempt + 1)
        parsed, problem = parse_tracker_answer(result.text, hidden)
        if parsed is not None:
            return TrackerVerdict(question_type=parsed[0], asked=parsed[1], repaired=attempt > 0, results=results)
        if truncated(result):
            problem += f" (the answer was cut at max_tokens={request.max_tokens})"
        messages = messages + [
            {"role": "assistant", "content": result.text or ""},
            {"role": "user", "content": render_prompt("patient_tracker_repair", problem=problem, hidden=hidden)},
        ]
    raise ModelCallError(f"tracker {source} gave no valid JSON after one repair: {problem}", kind="invalid_output")
