"""Provider errors a user can act on, through the real pool and clients over loopback HTTP.

The first failure of each kind on an endpoint is announced once with the server's own words (and
the key variable for 401/403); repeated identical deterministic failures stop the endpoint so no
more requests go out; a refused connection fails at once naming the api_base; the time a call
waits for our own limiter is kept apart from its latency.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted

POLICY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, deadline_s=20.0)
CLIENTS = ["auto", "litellm"]
HELLO = [{"role": "user", "content": "How have you been sleeping?"}]


def make_pool(base, client="auto", **fields):
    spec = ModelSpec(alias="doc", model="openai/served", api_base=base, timeout_s=5.0, **fields)
    pool = ModelPool({"doc": spec}, retry_policy=POLICY, client=client)
    return pool


def call_many(pool, count):
    """``count`` calls one after another; each result or the ModelCallError it raised."""
    async def go():
        outcomes = []
        for index in range(count):
            try:
                outcomes.append(await pool.get("doc").complete(ChatRequest(messages=HELLO, sample_index=index)))
            except ModelCallError as error:
                outcomes.append(error)
        await pool.aclose()
        return outcomes

    return asyncio.run(go())


@pytest.mark.parametrize("client", CLIENTS)
def test_the_first_error_of_each_kind_is_announced_once_with_the_servers_words(client):
    loading = Reply(status=503, error_message="model is still loading")
    with FakeOpenAIServer(scripted([loading, "One.", loading, loading, "Two.", "Three."])) as server:
        pool = make_pool(server.url, client)
        outcomes = call_many(pool, 3)
        assert server.request_count == 6
    assert [outcome.text for outcome in outcomes] == ["One.", "Two.", "Three."]
    assert len(pool.notices) == 1  # three 503s, one kind: said once
    assert "HTTP 503" in pool.notices[0] and "model is still loading" in pool.notices[0]
    assert "retrying" in pool.notices[0] and server.url in pool.notices[0]


@pytest.mark.parametrize("client", CLIENTS)
def test_401_names_the_key_variable_and_stops_after_three(client, monkeypatch):
    monkeypatch.setenv("DOC_KEY", "sk-never-printed-123456")
    refused = Reply(status=401, error_message="Incorrect API key provided")
    with FakeOpenAIServer(scripted([refused])) as server:
        pool = make_pool(server.url, client, api_key_env="DOC_KEY")
        outcomes = call_many(pool, 6)
        assert server.request_count == 3  # three identical 401s, then nothing more is sent
    assert all(isinstance(outcome, ModelCallError) and outcome.kind == "fatal" for outcome in outcomes)
    assert "Incorrect API key provided" in str(outcomes[0]) and "$DOC_KEY" in str(outcomes[0])
    assert str(outcomes[3]).startswith("not sent: stopped sending to openai/served@")
    stopped = pool.stopped_endpoints()[f"openai/served@{server.url}"]
    assert "after 3 identical failures" in stopped and "$DOC_KEY" in stopped
    assert pool.stopped("doc") == stopped
    assert len(pool.notices) == 2 and pool.notices[1] == stopped  # the error once, then why it stopped
    assert not any("sk-never-printed" in notice for notice in pool.notices)


def test_a_success_between_identical_failures_keeps_the_endpoint_open():
    bad = Reply(status=400, error_message="prompt too long for this model")
    with FakeOpenAIServer(scripted([bad, bad, "Fine.", bad, bad, "Fine again."])) as server:
        pool = make_pool(server.url)
        outcomes = call_many(pool, 6)
        assert server.request_count == 6
    assert [getattr(outcome, "text", None) for outcome in outcomes] == [None, None, "Fine.", None, None, "Fine again."]
    assert pool.stopped_endpoints() == {}


def test_different_400s_are_not_identical():
    counter = iter(range(100))

    def respond(body, index):
        return Reply(status=400, error_message=f"maximum context length is 4096 tokens, you requested {4100 + next(counter)}")

    with FakeOpenAIServer(respond) as server:
        pool = make_pool(server.url)
        call_many(pool, 4)
        assert server.request_count == 4
    assert pool.stopped_endpoints() == {} and len(pool.notices) == 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("client", CLIENTS)
def test_connection_refused_fails_at_once_and_stops_the_endpoint(client):
    base = f"http://127.0.0.1:{_free_port()}/v1"
    pool = make_pool(base, client)
    outcomes = call_many(pool, 4)
    assert all(isinstance(outcome, ModelCallError) for outcome in outcomes)
    assert f"cannot connect to {base}: connection refused" in str(outcomes[0]) and outcomes[0].attempts == 1
    stats = pool.retry_stats()["doc"]
    assert stats["by_reason"] == {"connection_refused": 3} and stats["retries"] == 0  # the fourth was never sent
    assert "stopped sending" in str(outcomes[3])


def test_queue_time_is_kept_apart_from_latency():
    with FakeOpenAIServer(lambda body, index: Reply(content="ok", delay=0.3)) as server:
        pool = make_pool(server.url, max_concurrency=1)

        async def go():
            model = pool.get("doc")
            started = time.monotonic()
            results = await asyncio.gather(*(model.complete(ChatRequest(messages=HELLO, sample_index=i)) for i in range(2)))
            elapsed = time.monotonic() - started
            await pool.aclose()
            return results, elapsed

        results, elapsed = asyncio.run(go())
    first, second = sorted(results, key=lambda result: result.queue_s)
    # The second call waited for the first to finish (its whole 0.3 s server time) before it was sent.
    assert second.queue_s >= 0.3 and first.queue_s < second.queue_s
    assert all(result.latency_s >= 0.3 for result in results)  # send → answer, the server's delay inside it
    assert second.latency_s + second.queue_s <= elapsed
    meter = pool.usage_by_model()["doc"]
    assert meter.queue_s == pytest.approx(first.queue_s + second.queue_s)
