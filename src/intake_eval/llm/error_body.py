"""What a provider's error body says beyond its HTTP status.

Error bodies come in several real shapes: OpenAI's ``{"error": {"message", "type", "code", "param"}}``,
Anthropic's ``{"type": "error", "error": {"type", "message"}}``, Google's ``{"error": {"code",
"message", "status", "details": [...]}}`` (wrapped in a root JSON array by Gemini's
OpenAI-compatible endpoint), vLLM's top-level ``{"message"}`` and FastAPI's ``{"detail": …}`` (a
string, or a list of validation problems). ``ErrorBody.parse`` reads any of them (or plain text)
into the facts retry.py decides on:

- ``message``: the server's own words as one line of text (never a Python repr of a list);
- ``code`` / ``type``: the machine-readable kind (``insufficient_quota``, ``rate_limit_error``, …);
- ``retry_delay_s``: Google's ``RetryInfo.retryDelay`` ("22s"), a wait the server asks for in the body;
- ``daily_quota``: the quota that ran out is a per-day one (Google's ``QuotaFailure`` quotaId),
  so waiting seconds cannot help;
- ``out_of_credit``: a billing state (OpenAI's ``insufficient_quota``), not a rate limit;
- ``content_policy``: the provider's safety system refused this request's content — a verdict on
  one request, not on the endpoint.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE = 600
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s\s*$")
_RETRY_DELAY_TEXT = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')
_DAILY_QUOTA_TEXT = re.compile(r"PerDay", re.IGNORECASE)
_CONTENT_POLICY = re.compile(
    r"rejected as a result of our safety system|content[_ ]policy[_ ]violation|content management policy|"
    r"flagged as potentially violating|\bcontent_filter\b", re.IGNORECASE)
CONTENT_POLICY_CODES = frozenset({"content_policy_violation", "content_filter", "moderation_blocked"})
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"


def _load(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return None


def _one_line(value: Any) -> str:
    """Text for a message that may be a string, a list of FastAPI/pydantic problems, or a mapping."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return "; ".join(part for part in (_one_line(item) for item in value) if part)
    if isinstance(value, dict):
        if "msg" in value:  # a FastAPI / pydantic validation problem: where, then what
            where = ".".join(str(part) for part in value.get("loc") or ())
            return f"{where}: {value['msg']}" if where else str(value["msg"])
        for key in ("message", "detail", "error"):
            if value.get(key):
                return _one_line(value[key])
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def _seconds(duration: Any) -> float | None:
    match = _DURATION.match(str(duration)) if duration is not None else None
    return float(match.group(1)) if match else None


@dataclass(frozen=True)
class ErrorBody:
    message: str
    code: str | None = None
    type: str | None = None
    retry_delay_s: float | None = None
    daily_quota: bool = False
    details: tuple[Any, ...] = ()

    @property
    def out_of_credit(self) -> bool:
        return "insufficient_quota" in (self.code, self.type)

    @property
    def content_policy(self) -> bool:
        return bool({self.code, self.type} & CONTENT_POLICY_CODES) or bool(_CONTENT_POLICY.search(self.message))

    @classmethod
    def parse(cls, raw: bytes | str | Any) -> "ErrorBody":
        """From the raw bytes of a response body, or an already-parsed one."""
        payload = _load(raw) if isinstance(raw, (bytes, str)) else raw
        if payload is None:
            text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
            return cls.from_text(text)
        if isinstance(payload, list):  # Gemini's OpenAI-compatible endpoint: a root array of error objects
            parts = [cls.parse(item) for item in payload if item is not None]
            if not parts:
                return cls("empty error list")
            first = parts[0]
            return cls(" | ".join(dict.fromkeys(part.message for part in parts))[:MAX_MESSAGE], first.code, first.type,
                       first.retry_delay_s, any(part.daily_quota for part in parts), first.details)
        if not isinstance(payload, dict):
            return cls(_one_line(payload)[:MAX_MESSAGE] or "no body")
        error = payload.get("error")
        source = error if isinstance(error, dict) else payload
        kind = source.get("type") if isinstance(source.get("type"), str) else None
        code = source.get("code") if isinstance(source.get("code"), str) else None
        if code is None and isinstance(source.get("status"), str):
            code = source["status"]  # Google's RESOURCE_EXHAUSTED, INVALID_ARGUMENT, …
        message = _one_line(source.get("message") or source.get("detail") or error or payload)
        if payload.get("type") == "error" and kind:
            message = f"{kind}: {message}"  # Anthropic's envelope: the error type says the most
        param = source.get("param")
        if param and str(param) not in message:
            message += f" (param: {param})"
        details = tuple(source.get("details") or ()) if isinstance(source.get("details"), list) else ()
        return cls(message[:MAX_MESSAGE] or "no message", code, kind, _retry_delay(details), _daily(details), details)

    @classmethod
    def from_text(cls, text: str) -> "ErrorBody":
        """From an error's text alone (a litellm exception quotes the body inside its message)."""
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
        if start >= 0:
            try:  # the first JSON value in the text; what follows it (litellm's notes) is not part of it
                parsed, _ = json.JSONDecoder().raw_decode(text[start:])
            except ValueError:
                parsed = None
            if isinstance(parsed, (dict, list)) and parsed:
                return cls.parse(parsed)
        delay = _RETRY_DELAY_TEXT.search(text)
        code = next((word for word in ("insufficient_quota", *sorted(CONTENT_POLICY_CODES)) if word in text), None)
        return cls(" ".join(text.split())[:MAX_MESSAGE] or "no body", code, None,
                   float(delay.group(1)) if delay else None,
                   bool(_DAILY_QUOTA_TEXT.search(text)) and "quota" in text.lower())


def _retry_delay(details: tuple[Any, ...]) -> float | None:
    for detail in details:
        if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO:
            return _seconds(detail.get("retryDelay"))
    return None


def _daily(details: tuple[Any, ...]) -> bool:
    for detail in details:
        if isinstance(detail, dict) and detail.get("@type") == QUOTA_FAILURE:
            for violation in detail.get("violations") or ():
                if isinstance(violation, dict) and _DAILY_QUOTA_TEXT.search(str(violation.get("quotaId", ""))):
                    return True
    return False


def error_body_of(error: BaseException) -> ErrorBody:
    """The facts of an exception's error body: ours (ProviderHTTPError.body), the openai SDK's
    ``body``, or JSON quoted in the exception's text (litellm)."""
    body = getattr(error, "body", None)
    if isinstance(body, (dict, list)):
        # the openai SDK (and litellm after it) hand over the inner error object; the body's own code
        # and type win over the exception's (litellm sets code "429", type "throttling_error")
        return ErrorBody.parse(body)
    return ErrorBody.from_text(str(getattr(error, "message", None) or error))
