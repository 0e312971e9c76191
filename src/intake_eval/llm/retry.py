"""The one retry policy for provider calls.

Retried: 429, 408/409/425, 5xx, timeouts, dropped connections and garbled bodies. Waits are
jittered exponential backoff, or the server's Retry-After when it names one, each capped, inside a
total deadline. Fatal at once: 400/401/403/404/422 and other 4xx — retrying cannot fix a bad key or
model name — and a refused connection (nothing listens at the api_base: backing off for minutes
would only hide that). The error body is read too (llm/error_body.py): a 429 that is a billing
state (``insufficient_quota``) or a per-day quota stops the endpoint at once instead of being
retried; Google's ``RetryInfo.retryDelay`` counts like a Retry-After header; a content-policy
refusal fails that call only (kind ``content_policy``), never the endpoint. The SDKs' own retries
are off (see litellm_backend), so attempts never multiply. Every failure is reported to the
endpoint's health (llm/health.py): the first of each kind is shown to the user, and repeated
identical deterministic ones stop the endpoint.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from intake_eval.llm.base import ModelCallError, ModelSpec, public_url
from intake_eval.llm.error_body import error_body_of
from intake_eval.llm.health import DETERMINISTIC_STATUS, EndpointHealth

T = TypeVar("T")

RETRYABLE_STATUS = {408, 409, 425, 429}
CONTENT_POLICY_STATUS = {400, 403, 422}  # how providers answer a request their safety system refuses
_JITTER = random.Random()  # one per process: seeding reads os.urandom, a GIL hand-off per call under litellm's threads
FATAL_HINTS = {
    400: "the provider rejected the request",
    401: "authentication failed",
    403: "access denied",
    404: "model or endpoint not found",
    422: "the provider could not process the request",
}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    base_delay_s: float = 1.0  # first backoff; doubles each retry
    max_delay_s: float = 60.0  # cap on any single wait (Retry-After included)
    deadline_s: float = 900.0  # total time for one call, all attempts and waits included

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay_s < 0 or self.max_delay_s < 0 or self.deadline_s <= 0:
            raise ValueError(f"invalid retry policy: {self}")


@dataclass
class RetryStats:
    """Per-endpoint counts for the manifest."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    waited_s: float = 0.0
    by_reason: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "attempts": self.attempts,
            "retries": self.retries,
            "failures": self.failures,
            "waited_s": round(self.waited_s, 3),
            "by_reason": dict(sorted(self.by_reason.items())),
        }


@dataclass(frozen=True)
class Failure:
    retryable: bool
    reason: str  # "429", "5xx", "timeout", "connection", "bad_body", "http_401", "insufficient_quota", ...
    status: int | None = None
    retry_after_s: float | None = None
    detail: str = ""
    stops_endpoint: bool = False  # about the account (billing, a daily quota): no request can succeed
    call_only: bool = False  # about this request's content (a content policy): other requests may succeed


def _headers_of(error: BaseException) -> Any:
    for name in ("litellm_response_headers", "headers"):  # litellm / openai_http.ProviderHTTPError
        headers = getattr(error, name, None)
        if headers:
            return headers
    response = getattr(error, "response", None)
    return getattr(response, "headers", None) if response is not None else None


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds from a Retry-After / retry-after-ms header (number or HTTP date), else None."""
    if not headers:
        return None
    try:
        lowered = {str(key).lower(): str(value) for key, value in dict(headers).items()}
    except (TypeError, ValueError):
        return None
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):  # neither seconds nor an HTTP date: ignore the header
            return None
        return max(0.0, parsed.timestamp() - (now if now is not None else time.time()))


def _short(error: BaseException, secret: str | None = None) -> str:
    text = str(getattr(error, "message", None) or error)
    return _short_text(text if text.strip() else type(error).__name__, secret)  # never empty


def _short_text(text: str, secret: str | None = None) -> str:
    text = " ".join(text.split())
    if secret and len(secret) >= 6:
        text = text.replace(secret, "***")  # some providers echo the key they rejected
    return text[:240] + ("…" if len(text) > 240 else "")


def connection_refused(error: BaseException) -> bool:
    """Nothing listens at the address: ECONNREFUSED anywhere in the exception's chain (aiohttp keeps
    it in ``os_error``; litellm wraps openai's APIConnectionError around httpx around the OSError)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or isinstance(getattr(current, "os_error", None),
                                                                      ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    return False


def classify_failure(error: BaseException, secret: str | None = None) -> Failure:
    """Decide whether an exception from litellm/openai/httpx is worth another attempt."""
    import openai  # light next to litellm, and every provider error derives from its classes

    detail = _short(error, secret)
    if connection_refused(error):
        return Failure(False, "connection_refused", detail=detail)
    if isinstance(error, (openai.APITimeoutError, asyncio.TimeoutError, TimeoutError)):
        if not str(error).strip():  # asyncio's timeout carries no message
            detail = "no reply within the request timeout"
        return Failure(True, "timeout", detail=detail)
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None) if response is not None else None
    if isinstance(error, openai.APIConnectionError) and not isinstance(status, int):
        return Failure(True, "connection", detail=detail)
    if isinstance(error, json.JSONDecodeError) and not isinstance(status, int):
        return Failure(True, "bad_body", detail=detail)
    if isinstance(status, int):
        body = error_body_of(error)
        if isinstance(getattr(error, "body", None), (dict, list)) and body.message not in detail:
            # an SDK's own message may drop the server's words (litellm: "Error code: 429" for Gemini's array)
            detail = _short_text(f"{detail} — {body.message}", secret)
        retry_after = retry_after_seconds(_headers_of(error))
        if retry_after is None:
            retry_after = body.retry_delay_s  # Google's RetryInfo.retryDelay in the body
        if status == 429 and body.out_of_credit:
            return Failure(False, "insufficient_quota", status, None, detail, stops_endpoint=True)
        if status == 429 and body.daily_quota:
            return Failure(False, "daily_quota", status, retry_after, detail, stops_endpoint=True)
        if status in CONTENT_POLICY_STATUS and body.content_policy:
            return Failure(False, "content_policy", status, None, detail, call_only=True)
        if status == 429:
            return Failure(True, "429", status, retry_after, detail)
        if status in RETRYABLE_STATUS or status >= 500:
            reason = "connection" if "connect" in detail.lower() and status == 500 else "5xx" if status >= 500 else str(status)
            return Failure(True, reason, status, retry_after, detail)
        return Failure(False, f"http_{status}", status, None, detail)
    # Transport errors from httpx/aiohttp below the SDK, e.g. a reset connection.
    name = type(error).__name__.lower()
    if any(word in name for word in ("connect", "timeout", "disconnect", "payload", "remoteprotocol", "readerror",
                                     "network", "oserror")):
        return Failure(True, "connection", detail=detail)
    return Failure(False, f"error_{type(error).__name__}", detail=detail)


def _where(spec: ModelSpec) -> str:
    where = f"model '{spec.alias or spec.model}' (provider {spec.provider}, model id {spec.model}"
    return where + (f", api_base {public_url(spec.api_base)})" if spec.api_base else ")")


def describe_fatal(spec: ModelSpec, failure: Failure) -> str:
    if failure.reason == "insufficient_quota":
        key = f" (key ${spec.api_key_env})" if spec.api_key_env else ""
        return (f"{_where(spec)}: HTTP 429 insufficient_quota — billing: the account{key} is out of credit or over "
                f"its spending limit; this is not a rate limit and retrying cannot help: add credit or raise the "
                f"limit in the provider's billing settings ({failure.detail})")
    if failure.reason == "daily_quota":
        return (f"{_where(spec)}: HTTP 429: a per-day quota is used up; retrying within the day cannot help: wait "
                f"for the quota to reset or move to a paid tier ({failure.detail})")
    if failure.reason == "content_policy":
        return (f"{_where(spec)}: HTTP {failure.status}: the provider's content policy refused this request "
                f"(this call fails; other requests go on): {failure.detail}")
    if failure.reason == "connection_refused":
        target = public_url(spec.api_base) if spec.api_base else f"the {spec.provider} endpoint"
        return (f"cannot connect to {target}: connection refused — is the server running and is api_base right? "
                f"(model '{spec.alias or spec.model}', model id {spec.model})")
    hint = FATAL_HINTS.get(failure.status or 0, "the request failed")
    where = _where(spec)
    advice = ""
    if failure.status in (401, 403):
        advice = f"; check the key in ${spec.api_key_env}" if spec.api_key_env else "; this model has no api_key_env set"
    elif failure.status == 404:
        advice = "; check the model id and api_base"
    code = f"HTTP {failure.status}" if failure.status else failure.reason
    return f"{hint} for {where}: {code}: {failure.detail}{advice}"


def describe_transient(spec: ModelSpec, failure: Failure, wait_s: float) -> str:
    code = f"HTTP {failure.status}" if failure.status else failure.reason
    return (f"{_where(spec)}: {code}: {failure.detail} — retrying (first wait {wait_s:.1f} s; "
            "later ones of this kind are counted, not shown)")


def is_deterministic(failure: Failure) -> bool:
    if failure.call_only:
        return False  # the same refusal for different prompts says nothing about the endpoint
    return failure.reason == "connection_refused" or (not failure.retryable and failure.status in DETERMINISTIC_STATUS)


def backoff_delay(policy: RetryPolicy, retry_number: int, retry_after_s: float | None,
                  rng: random.Random) -> float:
    """Wait before retry number ``retry_number`` (1-based): full-jitter exponential backoff,
    never shorter than the server's Retry-After, never longer than the cap."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * (2 ** (retry_number - 1)))
    wait = rng.uniform(ceiling / 2, ceiling)
    if retry_after_s is not None:
        # A little jitter on top so that clients told the same Retry-After do not stampede.
        wait = retry_after_s + rng.uniform(0, min(1.0, 0.1 * retry_after_s + 0.05))
    return min(wait, policy.max_delay_s)


async def call_with_retry(
    attempt: Callable[[], Awaitable[T]],
    *,
    spec: ModelSpec,
    policy: RetryPolicy,
    stats: RetryStats | None = None,
    on_retry_after: Callable[[float], None] | None = None,
    rng: random.Random | None = None,
    health: EndpointHealth | None = None,
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds, fails fatally, or the policy is used up.

    Returns (result, attempts). ModelCallError raised by the attempt (e.g. an empty answer after
    a length stop) passes through unchanged: it is an answer, not a transport failure.
    """
    rng = rng or _JITTER
    stats = stats if stats is not None else RetryStats()
    if health is not None:
        health.check()  # an endpoint stopped after repeated identical failures sends nothing more
    stats.calls += 1
    started = time.monotonic()
    attempts = 0
    while attempts < policy.max_attempts:
        attempts += 1
        stats.attempts += 1
        try:
            result = await attempt()
            if health is not None:
                health.succeeded()
            return result, attempts
        except ModelCallError as error:
            error.attempts = attempts
            stats.failures += 1
            raise
        except asyncio.CancelledError:
            raise
        except Exception as error:  # classified below; anything unknown is fatal, never looped on
            secret = os.environ.get(spec.api_key_env) if spec.api_key_env else None
            failure = classify_failure(error, secret)
            stats.by_reason[failure.reason] = stats.by_reason.get(failure.reason, 0) + 1
            if not failure.retryable:
                stats.failures += 1
                message = describe_fatal(spec, failure)
                if health is not None and failure.stops_endpoint:
                    health.announce(failure.reason, message)
                    health.stop(message)
                elif health is not None:
                    health.failed(failure.reason, message, deterministic=is_deterministic(failure),
                                  identity=(failure.reason, failure.detail))
                kind = "content_policy" if failure.call_only else "fatal"
                raise ModelCallError(message, kind=kind, attempts=attempts, status_code=failure.status) from None
            left_s = policy.deadline_s - (time.monotonic() - started)
            if failure.retry_after_s is not None and failure.retry_after_s > left_s:
                # Waiting would outlive the call, and pausing the endpoint that long stalls every other call.
                stats.failures += 1
                message = (f"model '{spec.alias or spec.model}' ({spec.model}): the provider asked to wait "
                           f"{failure.retry_after_s:,.0f} s (Retry-After), beyond this call's {policy.deadline_s:g} s "
                           f"deadline ({max(left_s, 0):,.0f} s left); gave up after {attempts} attempt(s): "
                           f"{failure.reason}: {failure.detail}")
                if health is not None:
                    health.failed("retry_after_beyond_deadline", message, deterministic=False, identity=(failure.reason,))
                raise ModelCallError(message, kind="exhausted", attempts=attempts, status_code=failure.status) from None
            if failure.retry_after_s is not None and on_retry_after is not None:
                on_retry_after(failure.retry_after_s)
            wait = backoff_delay(policy, attempts, failure.retry_after_s, rng)
            if health is not None:
                health.failed(failure.reason, describe_transient(spec, failure, wait), deterministic=False,
                              identity=(failure.reason,))
            elapsed = time.monotonic() - started
            if attempts >= policy.max_attempts or elapsed + wait > policy.deadline_s:
                stats.failures += 1
                why = "attempts" if attempts >= policy.max_attempts else f"{policy.deadline_s:g} s deadline"
                raise ModelCallError(
                    f"model '{spec.alias or spec.model}' ({spec.model}) gave up after {attempts} attempt(s) "
                    f"({why} used up); last error: {failure.reason}: {failure.detail}",
                    kind="exhausted", attempts=attempts, status_code=failure.status,
                ) from None
            stats.retries += 1
            stats.waited_s += wait
            await asyncio.sleep(wait)
    raise AssertionError("unreachable: the loop returns or raises")  # max_attempts >= 1 by construction
