"""The real call path (pool → cache → retry → limiter → HTTP) against a real local server.

Every scenario runs through both clients the backend has: the direct OpenAI-compatible POST
("auto", used for api_base endpoints) and litellm (used for every hosted provider).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from intake_eval.simulated import OfflineParticipants
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted

FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=2.0, deadline_s=10.0)
CLIENTS = ["auto", "litellm"]
HELLO = [{"role": "system", "content": "You are a clinician."}, {"role": "user", "content": "I can't sleep."}]


def make_pool(server, client, tmp_path=None, policy=FAST, **spec_fields) -> ModelPool:
    fields = {"model": "openai/fake-clinician", "api_base": server.url, "timeout_s": 5.0} | spec_fields
    spec = ModelSpec(alias="local", **fields)
    cache = tmp_path / "cache.sqlite" if tmp_path is not None else None
    return ModelPool({"local": spec}, cache_path=cache, retry_policy=policy, client=client)


def complete(pool: ModelPool, request: ChatRequest | None = None, name: str = "local"):
    async def go():
        try:
            return await pool.get(name).complete(request or ChatRequest(messages=HELLO))
        finally:
            await pool.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("client", CLIENTS)
def test_scripted_reply_usage_and_request_body(client):
    reply = Reply(content="How long has this been going on?", prompt_tokens=40, completion_tokens=9)
    with FakeOpenAIServer(scripted([reply])) as server:
        result = complete(make_pool(server, client, temperature=0.7, max_tokens=350))
        body = server.requests[0]
    assert result.text == "How long has this been going on?"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 9)
    assert result.usage.cost_usd == 0.0 and result.usage.cost_known  # a local server costs nothing
    assert result.attempts == 1 and not result.cached and result.finish_reason == "stop"
    assert body["model"] == "fake-clinician" and body["messages"] == HELLO
    assert body["temperature"] == 0.7 and body["max_tokens"] == 350


@pytest.mark.parametrize("client", CLIENTS)
def test_429_retry_after_is_honoured(client):
    with FakeOpenAIServer(scripted([Reply(status=429, headers={"Retry-After": "1"}), "Tell me more."])) as server:
        pool = make_pool(server, client)
        started = time.monotonic()
        result = complete(pool)
        waited = time.monotonic() - started
        assert server.request_count == 2
    assert result.text == "Tell me more." and result.attempts == 2
    assert waited >= 1.0  # the server said one second; backoff alone would wait ~10 ms
    assert pool.retry_stats()["local"]["by_reason"] == {"429": 1}


@pytest.mark.parametrize("client", CLIENTS)
def test_500s_then_success(client):
    with FakeOpenAIServer(scripted([Reply(status=500), Reply(status=503), "Recovered."])) as server:
        pool = make_pool(server, client)
        result = complete(pool)
        assert server.request_count == 3
    assert result.text == "Recovered." and result.attempts == 3
    stats = pool.retry_stats()["local"]
    assert stats["retries"] == 2 and stats["attempts"] == 3 and stats["failures"] == 0


@pytest.mark.parametrize("client", CLIENTS)
def test_hang_past_timeout_is_retried_then_exhausted(client):
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.05, deadline_s=10.0)
    with FakeOpenAIServer(scripted([Reply(delay=3.0)])) as server:
        started = time.monotonic()
        with pytest.raises(ModelCallError) as caught:
            complete(make_pool(server, client, policy=policy, timeout_s=0.5))
        elapsed = time.monotonic() - started
        assert server.request_count == 2
    assert caught.value.kind == "exhausted" and caught.value.attempts == 2
    assert "timeout" in str(caught.value)
    assert elapsed < 2.5  # two 0.5 s timeouts, not the server's 3 s hang


@pytest.mark.parametrize("client", CLIENTS)
def test_truncated_json_body_is_retried(client):
    with FakeOpenAIServer(scripted([Reply(raw_body=b'{"id": "x", "choices": [{"mess'), "Complete now."])) as server:
        result = complete(make_pool(server, client))
        assert server.request_count == 2
    assert result.text == "Complete now." and result.attempts == 2


@pytest.mark.parametrize("client", CLIENTS)
def test_empty_answer_after_length_stop_is_a_recorded_failure(client):
    reply = Reply(content="", reasoning_content="thinking " * 50, finish_reason="length", reasoning_tokens=2500)
    with FakeOpenAIServer(scripted([reply])) as server:
        with pytest.raises(ModelCallError) as caught:
            complete(make_pool(server, client, max_tokens=2500, reasoning=True))
        assert server.request_count == 1  # an answer, not a transport failure: not retried
    assert caught.value.kind == "empty_after_length"
    assert "max_tokens=2500" in str(caught.value)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "reply",
    [
        Reply(content="Do you drink alcohol?", reasoning_content="Screen substance use."),
        Reply(content="Do you drink alcohol?", reasoning="Screen substance use."),
        Reply(content="<think>Screen substance use.</think>\nDo you drink alcohol?"),
        Reply(content="Screen substance use.</think>\n\nDo you drink alcohol?"),
    ],
    ids=["reasoning_content", "reasoning", "think_tags", "unopened_think"],
)
def test_reasoning_is_kept_apart(client, reply):
    with FakeOpenAIServer(scripted([reply])) as server:
        result = complete(make_pool(server, client, reasoning=True))
    assert result.text == "Do you drink alcohol?"
    assert result.reasoning == "Screen substance use."


@pytest.mark.parametrize("client", CLIENTS)
def test_cache_makes_a_repeat_call_free(client, tmp_path):
    with FakeOpenAIServer(scripted(["First answer.", "Second answer.", "Third answer."])) as server:
        pool = make_pool(server, client, tmp_path)

        async def go():
            model = pool.get("local")
            first = await model.complete(ChatRequest(messages=HELLO))
            again = await model.complete(ChatRequest(messages=HELLO, context={"turn": 3}))  # context is not in the key
            other_sample = await model.complete(ChatRequest(messages=HELLO, sample_index=1))
            await pool.aclose()
            return first, again, other_sample

        first, again, other_sample = asyncio.run(go())
        assert server.request_count == 2
        assert again.cached and again.text == "First answer." and again.usage.cost_usd == 0.0
        assert not other_sample.cached and other_sample.text == "Second answer."

        # A new pool on the same file (a rerun) answers from disk; --no-cache asks again but still writes.
        assert complete(make_pool(server, client, tmp_path)).cached
        assert server.request_count == 2
        fresh = ModelPool(pool.specs, cache_path=tmp_path / "cache.sqlite", use_cache=False, retry_policy=FAST,
                          client=client)
        assert complete(fresh).text == "Third answer." and server.request_count == 3
        assert complete(make_pool(server, client, tmp_path)).text == "Third answer."
    meter = pool.usage_by_model()["local"]
    assert (meter.calls, meter.cache_hits) == (3, 1)


@pytest.mark.parametrize("client", CLIENTS)
def test_401_fails_fast_naming_provider_model_and_key(client, monkeypatch):
    monkeypatch.setenv("FAKE_CLINIC_KEY", "sk-test-secret-value-123")
    with FakeOpenAIServer(scripted([Reply(status=401, error_message="invalid key sk-test-secret-value-123")])) as server:
        with pytest.raises(ModelCallError) as caught:
            complete(make_pool(server, client, api_key_env="FAKE_CLINIC_KEY"))
        assert server.request_count == 1
        sent = {key.lower(): value for key, value in server.headers[0].items()}
        assert sent["authorization"] == "Bearer sk-test-secret-value-123"
    message = str(caught.value)
    assert caught.value.kind == "fatal" and caught.value.status_code == 401
    assert "provider openai" in message and "openai/fake-clinician" in message and "$FAKE_CLINIC_KEY" in message
    assert "sk-test-secret-value-123" not in message


def test_key_never_reaches_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CLINIC_KEY", "sk-another-secret-456")
    with FakeOpenAIServer(scripted(["Fine."])) as server:
        complete(make_pool(server, "auto", tmp_path, api_key_env="FAKE_CLINIC_KEY"))
    assert b"sk-another-secret-456" not in (tmp_path / "cache.sqlite").read_bytes()


def test_local_server_without_key_env_never_gets_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-789")
    with FakeOpenAIServer(scripted(["Fine."])) as server:
        complete(make_pool(server, "litellm"))
        assert "sk-real-openai-key-789" not in str(server.headers[0])


def test_limiter_bounds_requests_in_flight():
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def respond(_body, _index):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return Reply(content="ok")

    with FakeOpenAIServer(respond) as server:
        pool = make_pool(server, "auto", max_concurrency=3)

        async def go():
            model = pool.get("local")
            await asyncio.gather(*(model.complete(ChatRequest(messages=HELLO, sample_index=i)) for i in range(12)))
            await pool.aclose()

        asyncio.run(go())
        assert server.request_count == 12
    assert state["peak"] == 3
    assert pool.limiter_stats()[f"openai/fake-clinician@{server.url}"]["peak_in_flight"] == 3


def test_json_schema_is_sent_as_response_format():
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "additionalProperties": False}
    with FakeOpenAIServer(scripted([json.dumps({"label": "open"})])) as server:
        result = complete(make_pool(server, "auto"), ChatRequest(messages=HELLO, response_schema=schema))
        sent = server.requests[0]["response_format"]
    assert json.loads(result.text) == {"label": "open"}
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == schema


@pytest.mark.parametrize("client", CLIENTS)
def test_connection_refused_fails_fast_naming_the_api_base(client):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    spec = ModelSpec(alias="gone", model="openai/fake", api_base=base, timeout_s=2.0)
    pool = ModelPool({"gone": spec}, retry_policy=RetryPolicy(max_attempts=3, base_delay_s=5.0, max_delay_s=5.0),
                     client=client)
    with pytest.raises(ModelCallError) as caught:
        complete(pool, name="gone")
    assert caught.value.kind == "fatal" and caught.value.attempts == 1  # no backoff: nothing listens there
    assert f"cannot connect to {base}: connection refused" in str(caught.value)
    assert pool.retry_stats()["gone"]["by_reason"] == {"connection_refused": 1}
    assert pool.retry_stats()["gone"]["waited_s"] == 0


def test_offline_participants_are_metered_but_never_cached_or_limited(tmp_path):
    from intake_eval.llm.registry import load_model_specs

    pool = ModelPool(load_model_specs(), cache_path=tmp_path / "cache.sqlite", offline=OfflineParticipants())
    messages = [{"role": "user", "content": "I've been feeling really low since I lost my job."}]
    context = {"role": "clinician", "conversation_id": "P00001.x", "turn": 1, "max_turns": 12, "trial": 0,
               "request": "turn"}

    async def go():
        model = pool.get("offline/screener")
        assert model is pool.get("offline/screener")  # built once
        return [await model.complete(ChatRequest(messages=messages, context=context)) for _ in range(2)]

    first, second = asyncio.run(go())
    pool.close()
    assert first.text and first.text == second.text and not second.cached  # deterministic, not cached
    assert pool.usage_by_model()["offline/screener"].calls == 2
    assert not (tmp_path / "cache.sqlite").exists() and pool.limiter_stats() == {}
