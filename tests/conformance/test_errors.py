"""Every recorded error answer, replayed over loopback through the real client, retry policy and
endpoint health: the error class, whether and how long it is retried, whether the endpoint stops, and
the words the user is shown (the server's text, never a Python repr of its JSON)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from intake_eval.llm.base import ChatRequest, ModelCallError
from intake_eval.llm.health import EndpointHealth
from intake_eval.llm.litellm_backend import ProviderBackend
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.registry import PROVIDER_KEY_ENV, resolve_spec
from intake_eval.llm.retry import RetryPolicy, RetryStats, call_with_retry
from tests.conformance.replay import ReplayServer, recorded

QUICK = RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.01)  # waits asked for are seen, not slept


def ask(number: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": f"question {number}"}])


def point_here(server: ReplayServer, model: str, monkeypatch) -> None:
    provider = model.split("/", 1)[0]
    monkeypatch.setenv(PROVIDER_KEY_ENV[provider], "sk-conformance-secret-0042")
    for name, value in server.env(provider).items():
        monkeypatch.setenv(name, value)


def send_each(model: str, requests: int) -> tuple[list[object], list[str], ModelPool]:
    """``requests`` calls one after another through a fresh pool: each result or error, the notices."""
    pool = ModelPool({}, use_cache=False, retry_policy=QUICK)
    outcomes: list[object] = []

    async def go():
        try:
            for number in range(requests):
                try:
                    outcomes.append(await pool.get(model).complete(ask(number)))
                except ModelCallError as error:
                    outcomes.append(error)
        finally:
            await pool.aclose()

    asyncio.run(go())
    return outcomes, pool.notices, pool


@dataclass(frozen=True)
class Refusal:
    recording: str
    model: str
    reason: str  # RetryStats.by_reason key
    kind: str  # ModelCallError.kind
    sent: int  # requests that reach the server out of four calls
    words: str  # what the user is shown, in the server's words
    stops: str | None  # the endpoint's stop reason, None → it keeps serving


GPT, CLAUDE, KIMI, GEMINI = ("openai/gpt-4o", "anthropic/claude-sonnet-4-5-20250929", "together_ai/moonshotai/Kimi-K2.6",
                             "gemini/gemini-2.5-flash")
REFUSALS = [
    Refusal("openai_401_invalid_key", GPT, "http_401", "fatal", 3, "Incorrect API key provided", "3 identical failures"),
    Refusal("together_401_invalid_key", KIMI, "http_401", "fatal", 3, "Invalid API key provided", "3 identical failures"),
    Refusal("anthropic_401_invalid_key", CLAUDE, "http_401", "fatal", 3, "authentication_error: invalid x-api-key",
            "3 identical failures"),
    Refusal("openai_404_model_not_found", GPT, "http_404", "fatal", 3, "The model `gpt-5.2-proo` does not exist",
            "3 identical failures"),
    Refusal("anthropic_404_not_found", CLAUDE, "http_404", "fatal", 3, "not_found_error: model: claude-sonet-4-5",
            "3 identical failures"),
    # billing, not a rate limit: the first answer stops the endpoint, nothing is retried
    Refusal("openai_429_insufficient_quota", GPT, "insufficient_quota", "fatal", 1,
            "You exceeded your current quota, please check your plan and billing details", "billing"),
    # Google's QuotaFailure names a per-day quota: waiting the RetryInfo's 22 s cannot help
    Refusal("gemini_429_retryinfo_native", GEMINI, "daily_quota", "fatal", 1,
            "You exceeded your current quota", "per-day quota"),
    Refusal("gemini_compat_429_retryinfo_array", GEMINI, "daily_quota", "fatal", 1,
            "You exceeded your current quota", "per-day quota"),
    # one request's content: every call fails alone, the endpoint keeps serving
    Refusal("openai_400_safety_system", GPT, "content_policy", "content_policy", 4,
            "Your request was rejected as a result of our safety system", None),
    # Azure's content filter, in the same OpenAI-compatible error object (code content_filter)
    Refusal("azure_400_content_filter", GPT, "content_policy", "content_policy", 4,
            "triggering Azure OpenAI’s content management policy", None),
]


@pytest.mark.parametrize("case", REFUSALS, ids=lambda case: case.recording)
def test_a_refusal_fails_the_call_or_stops_the_endpoint_as_its_cause_says(case, monkeypatch):
    route = "messages" if case.model.startswith("anthropic/") else "chat"
    with ReplayServer({route: recorded(case.recording)}) as server:
        point_here(server, case.model, monkeypatch)
        outcomes, notices, pool = send_each(case.model, 4)
        sent = len(server.calls(route))
    assert sent == case.sent  # never retried; after a stop, nothing more is sent
    assert all(isinstance(outcome, ModelCallError) for outcome in outcomes)
    sent_errors = [error for error in outcomes if error.attempts]
    assert len(sent_errors) == case.sent and {error.kind for error in sent_errors} == {case.kind}
    stats = pool.retry_stats()[case.model]
    assert stats["retries"] == 0 and stats["by_reason"] == {case.reason: case.sent}
    shown = " ".join(notices)
    assert case.words in shown and "[{" not in shown and "sk-conformance-secret" not in shown
    stopped = pool.stopped(case.model)
    if case.stops is None:
        assert stopped is None
    else:
        assert case.stops in stopped
        assert all("not sent" in str(error) for error in outcomes[case.sent:])


def _retried(answers: list[dict], model: str, monkeypatch) -> tuple[object, list[float], RetryStats, EndpointHealth]:
    """One call through the real retry loop and client; the waits the server asked for are recorded."""
    route = "messages" if model.startswith("anthropic/") else "chat"
    asked: list[float] = []
    stats = RetryStats()
    health = EndpointHealth(model)
    with ReplayServer({route: answers}) as server:
        point_here(server, model, monkeypatch)
        backend = ProviderBackend(resolve_spec(model, {}))

        async def go():
            try:
                return await call_with_retry(lambda: backend.complete(ask(0)), spec=backend.spec, policy=QUICK,
                                             stats=stats, on_retry_after=asked.append, rng=random.Random(7),
                                             health=health)
            finally:
                await backend.aclose()

        outcome = asyncio.run(go())
    return outcome, asked, stats, health


def test_anthropics_rate_limit_is_retried_after_its_retry_after(monkeypatch):
    (result, attempts), asked, stats, health = _retried(
        [recorded("anthropic_429_rate_limit"), recorded("anthropic_cache_read_write")], CLAUDE, monkeypatch)
    assert attempts == 2 and asked == [3.0] and stats.by_reason == {"429": 1}
    assert result.text.startswith("Python is a beginner-friendly") and health.stopped is None
    assert "rate_limit_error: This request would exceed the rate limit" in health.seen["429"]


def test_anthropics_server_error_is_retried(monkeypatch):
    (result, attempts), asked, stats, health = _retried(
        [recorded("anthropic_500_api_error"), recorded("anthropic_cache_read_write")], CLAUDE, monkeypatch)
    assert attempts == 2 and asked == [] and stats.by_reason == {"5xx": 1} and health.stopped is None
    assert "HTTP 500: api_error: Internal server error" in health.seen["5xx"]


def test_geminis_per_minute_quota_waits_the_retry_delay_it_names(monkeypatch):
    (_, attempts), asked, stats, health = _retried(
        [recorded("gemini_429_per_minute_retryinfo"), recorded("openai_gpt4o_plain")], GEMINI, monkeypatch)
    assert attempts == 2 and asked == [58.0] and stats.by_reason == {"429": 1} and health.stopped is None
    assert "HTTP 429: You exceeded your current quota" in health.seen["429"] and "[{" not in health.seen["429"]


def test_geminis_array_429_is_retried_and_shown_as_text(monkeypatch):
    (result, attempts), asked, stats, health = _retried(
        [recorded("gemini_compat_429_array"), recorded("openai_gpt4o_plain")], GEMINI, monkeypatch)
    assert attempts == 2 and asked == [] and stats.by_reason == {"429": 1}
    assert "HTTP 429: Resource has been exhausted (e.g. check quota)." in health.seen["429"]
    assert "[{" not in health.seen["429"] and "'error'" not in health.seen["429"]


@pytest.mark.parametrize("recording", ["gemini_429_retryinfo_native", "gemini_compat_429_retryinfo_array"])
def test_geminis_retry_delay_in_the_body_is_honoured(recording, monkeypatch):
    """Variation of the recording: the QuotaFailure's quotaId per minute instead of per day (nothing
    else changed), so the 429 is a rate limit and its RetryInfo.retryDelay "22s" is the wait."""
    answer = recorded(recording)
    errors = answer["body"] if isinstance(answer["body"], list) else [answer["body"]]
    for error in errors:
        for detail in error["error"]["details"]:
            for violation in detail.get("violations", ()):
                violation["quotaId"] = violation["quotaId"].replace("PerDay", "PerMinute")
    (_, attempts), asked, stats, health = _retried([answer, recorded("openai_gpt4o_plain")], GEMINI, monkeypatch)
    assert attempts == 2 and asked == [22.0] and stats.by_reason == {"429": 1} and health.stopped is None


def test_the_same_refusal_for_different_prompts_never_stops_the_endpoint(monkeypatch):
    """Content-policy refusals between answers: each fails alone; the endpoint keeps answering."""
    answers = [recorded("openai_400_safety_system")] * 5 + [recorded("openai_gpt4o_plain")]
    with ReplayServer({"chat": answers}) as server:
        point_here(server, GPT, monkeypatch)
        outcomes, notices, pool = send_each(GPT, 6)
    assert [getattr(o, "kind", "ok") for o in outcomes] == ["content_policy"] * 5 + ["ok"]
    assert pool.stopped(GPT) is None and len(notices) == 1  # the first refusal shown once, counted after


def _one_failed_call(server: ReplayServer) -> pytest.ExceptionInfo[ModelCallError]:
    """One request to the replayed server through the real pool, which must fail."""
    spec = resolve_spec("openai/served", {}).model_copy(update={"api_base": server.url, "api_key_env": None})
    pool = ModelPool({"served": spec}, use_cache=False, retry_policy=QUICK)

    async def go():
        try:
            await pool.get("served").complete(ask(0))
        finally:
            await pool.aclose()

    with pytest.raises(ModelCallError) as raised:
        asyncio.run(go())
    return raised


def test_a_fastapi_detail_body_is_shown(monkeypatch):
    """vLLM (FastAPI) answers a request it cannot route or validate with {"detail": …}. Derived: the
    body FastAPI gives a validation error (its documented shape), on the chat route."""
    detail = {"status": 422, "headers": {}, "body": {"detail": [
        {"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}}]}}
    with ReplayServer({"chat": detail}) as server:
        raised = _one_failed_call(server)
    assert "HTTP 422: body.messages: Field required" in str(raised.value)


def test_an_unserved_route_says_not_found_in_the_servers_words(monkeypatch):
    with ReplayServer({}) as server:
        raised = _one_failed_call(server)
    assert "HTTP 404: Not Found" in str(raised.value) and "None" not in str(raised.value)


LITELLM_SHAPED = [case for case in REFUSALS if case.reason in ("insufficient_quota", "daily_quota", "content_policy")
                  and not case.recording.startswith("gemini_429_retryinfo_native")]


@pytest.mark.parametrize("case", LITELLM_SHAPED, ids=lambda case: case.recording)
def test_litellms_client_reads_the_same_causes_from_its_exceptions(case):
    """Providers that stay on litellm (Bedrock, Vertex, …) raise litellm's exceptions: the cause is read
    from the body they carry, so the same answer stops the endpoint or fails one call alike."""
    with ReplayServer({"chat": recorded(case.recording)}) as server:
        spec = resolve_spec("openai/served", {}).model_copy(update={"api_base": server.url, "api_key_env": None})
        pool = ModelPool({"served": spec}, use_cache=False, retry_policy=QUICK, client="litellm")

        async def go():
            errors = []
            try:
                for number in range(4):
                    try:
                        await pool.get("served").complete(ask(number))
                    except ModelCallError as error:
                        errors.append(error)
            finally:
                await pool.aclose()
            return errors

        errors = asyncio.run(go())
        sent = len(server.calls("chat"))
    assert sent == case.sent and len(errors) == 4
    assert pool.retry_stats()["served"]["by_reason"] == {case.reason: case.sent}
    assert (pool.stopped("served") is None) == (case.stops is None)


def test_litellms_client_shows_geminis_array_error_as_text():
    with ReplayServer({"chat": [recorded("gemini_compat_429_array"), recorded("openai_gpt4o_plain")]}) as server:
        spec = resolve_spec("openai/served", {}).model_copy(update={"api_base": server.url, "api_key_env": None})
        pool = ModelPool({"served": spec}, use_cache=False, retry_policy=QUICK, client="litellm")

        async def go():
            try:
                return await pool.get("served").complete(ask(0))
            finally:
                await pool.aclose()

        result = asyncio.run(go())
    shown = " ".join(pool.notices)
    assert result.attempts == 2 and "Resource has been exhausted (e.g. check quota)." in shown and "[{" not in shown
