"""The post-intake case formulation: one more request to the clinician after its last turn.

It goes into the clinician's own conversation context (its view of the transcript plus the
``prompts/formulation.j2`` instruction as a final user message). It is not a turn: the patient never
sees it and it is not in ``turns``. The answer is structured output where the provider supports it,
validated with ``core.formulation.parse_formulation``; an invalid answer gets ONE repair request
quoting the validation error. A formulation that still fails is recorded on the conversation and is
never fatal to it (the conversation's status stays "ok").

Record stored in ``Conversation.formulation``:
- ``{"status": "ok", "repaired": bool, "formulation": {...Formulation fields}}``
- ``{"status": "invalid", "error": "<one line>", "answer": "<the last answer, truncated>"}``
- ``{"status": "provider_error: <kind>", "error": "<one line>"}`` (the pool's retries exhausted)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from intake_eval.core.formulation import (
    MAX_DIFFERENTIAL,
    Formulation,
    RiskLevel,
    parse_formulation,
)
from intake_eval.core.placeholders import written_text
from intake_eval.core.prompts import render_prompt
from intake_eval.llm.answer import truncated, unusable
from intake_eval.llm.base import (
    ChatModel,
    ChatRequest,
    ChatResult,
    Message,
    ModelCallError,
)
from intake_eval.llm.prompt_cache import history_cache_points
from intake_eval.llm.request_kind import RequestKind

RISK_LEVELS: tuple[str, ...] = get_args(RiskLevel)
FORMULATION_MAX_TOKENS = 1200  # a formulation is ~300-500 tokens; a larger spec cap (reasoning models) wins
ANSWER_KEPT = 2000  # characters of an unusable answer kept in the record, for diagnosis
PROMPT_NAMES = ("formulation", "formulation_repair")
SHORT_TEXT_CHARS = 150  # a phrase: a complaint, a problem, a diagnosis name
EVIDENCE_CHARS = 400
MAX_PROBLEMS = 10  # a bound a grammar enforces, so a looping model still closes its JSON


def formulation_instruction() -> str:
    return render_prompt("formulation", max_differential=MAX_DIFFERENTIAL, risk_levels=list(RISK_LEVELS))


def repair_instruction(error: str) -> str:
    return render_prompt("formulation_repair", error=error, max_differential=MAX_DIFFERENTIAL,
                         risk_levels=list(RISK_LEVELS))


def response_schema() -> dict[str, Any]:
    """The Formulation as a plain JSON schema for structured output: every property required, no
    others allowed, text bounded and never a placeholder (core/placeholders.written_text); no $ref,
    titles or defaults, which some dialects reject; Gemini's dialect loses additionalProperties and
    patterns on the way out (llm/structured.py)."""
    def closed(properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}

    # A code or "" (the instruction allows none); the validator is more lenient than the grammar.
    icd10 = {"type": "string", "maxLength": 8, "pattern": "^([A-Z][0-9][0-9A-Z](\\.[0-9A-Z]{1,4})?)?$"}
    diagnosis = closed({"name": written_text(SHORT_TEXT_CHARS), "icd10": icd10})
    return closed({
        "chief_complaint": written_text(SHORT_TEXT_CHARS),
        "problems": {"type": "array", "items": written_text(SHORT_TEXT_CHARS), "maxItems": MAX_PROBLEMS},
        "principal_diagnosis": diagnosis,
        "differential": {"type": "array", "items": diagnosis, "maxItems": MAX_DIFFERENTIAL},
        "risk_level": {"type": "string", "enum": list(RISK_LEVELS)},
        "risk_evidence": written_text(EVIDENCE_CHARS),
    })


async def request_formulation(clinician_model: ChatModel, clinician_messages: list[Message], *,
                              conversation_id: str = "", turn: int = 0, max_turns: int = 0, trial: int = 0,
                              on_result: Callable[[ChatResult], None] | None = None) -> dict[str, Any]:
    """Ask for the formulation (and, if its answer does not validate, repair it once).

    ``clinician_messages`` is the clinician's view of the finished conversation
    (``participants.clinician_messages``); ``on_result`` sees every answered call (usage accounting).
    Returns the record for ``Conversation.formulation``.
    """
    messages: list[Message] = [*clinician_messages, {"role": "user", "content": formulation_instruction()}]
    cap = max(clinician_model.spec.max_tokens or 0, FORMULATION_MAX_TOKENS)
    context = {"role": "clinician", "conversation_id": conversation_id, "turn": turn, "max_turns": max_turns,
               "trial": trial, "request": "formulation"}
    schema = response_schema()
    # The clinician's last turn call ended one exchange before the finished conversation.
    points = history_cache_points(messages, 0, previous_end=len(clinician_messages) - 3)
    for attempt in range(2):
        request = ChatRequest(messages=messages, sample_index=trial, max_tokens=cap, response_schema=schema,
                              purpose=RequestKind.FORMULATION, context=context, cache_points=points)
        try:
            result = await clinician_model.complete(request)
        except ModelCallError as exc:
            return {"status": f"provider_error: {exc.kind}", "error": exc.format_message()}
        if on_result is not None:
            on_result(result)
        answered = {"finish_reason": result.finish_reason, **({"truncated": True} if truncated(result) else {})}
        problem = unusable(result)
        if problem is not None and problem.kind == "refused":  # a repair request cannot change a refusal
            return {"status": "refused", "error": f"formulation: {problem.describe()}", "refusal": problem.refusal,
                    **answered}
        text = result.text or ""
        try:
            formulation = parse_formulation(text)
        except ValueError as exc:
            error = str(exc) if text.strip() else f"formulation: empty answer (finish_reason={result.finish_reason})"
            if truncated(result) and text.strip():
                error += f" (the answer was cut at max_tokens={cap})"
            if attempt == 1:
                return {"status": "invalid", "error": f"{error} (after one repair request)", "answer": text[:ANSWER_KEPT],
                        **answered}
            messages = [*messages, {"role": "assistant", "content": text},
                        {"role": "user", "content": repair_instruction(error)}]
            continue
        return {"status": "ok", "repaired": attempt == 1, "formulation": formulation.model_dump(mode="json"), **answered}
    raise AssertionError("unreachable")


def formulation_of(record: dict[str, Any] | None) -> Formulation | None:
    """The validated Formulation stored on a conversation, or None (absent, failed, or not valid)."""
    from pydantic import ValidationError

    if not record or record.get("status") != "ok" or not isinstance(record.get("formulation"), dict):
        return None
    try:
        return Formulation.model_validate(record["formulation"])
    except ValidationError:
        return None


def formulation_status(record: dict[str, Any] | None) -> str:
    """ok | invalid | refused | provider_error: <kind> | missing (no formulation was requested or recorded).
    A record that says ok but holds no valid formulation (edited by hand) is invalid."""
    if not record:
        return "missing"
    status = str(record.get("status", "invalid"))
    return "invalid" if status == "ok" and formulation_of(record) is None else status
