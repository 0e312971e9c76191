"""Structured output negotiated per endpoint, against loopback servers that answer like real ones.

Real pool → retry → limiter → HTTP (the direct aiohttp client and litellm) → a server that treats
``response_format`` as llama-cpp-python, llama.cpp's llama-server, a json_object-only server or a
server without any response_format would. Request counts prove that a schema rejection is never
retried as a transient error.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from intake_eval.llm.structured import response_format, strip_keywords
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.server_dialects import (
    DIALECTS,
    EXPECTED_LEVELS,
    instance_of,
    level_sent,
    llama_cpp_python,
)

POLICY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, deadline_s=20.0)
CLIENTS = ["auto", "litellm"]
SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["open", "closed"]}, "why": {"type": "string"}},
    "required": ["label", "why"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "Label the question as JSON."}]


def answer(_body):
    return json.dumps(instance_of(SCHEMA))


def make_pool(server, client="auto", aliases=("judge",), **fields):
    specs = {alias: ModelSpec(alias=alias, model="openai/served", api_base=server.url, timeout_s=5.0, **fields)
             for alias in aliases}
    return ModelPool(specs, retry_policy=POLICY, client=client)


def run_calls(pool, calls):
    """calls: [(alias, ChatRequest)] sent one after another."""
    async def go():
        try:
            return [await pool.get(alias).complete(request) for alias, request in calls]
        finally:
            await pool.aclose()

    return asyncio.run(go())


def structured(index=0):
    return ChatRequest(messages=MESSAGES, response_schema=SCHEMA, sample_index=index)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_each_server_is_negotiated_once_and_remembered(dialect, client):
    with FakeOpenAIServer(DIALECTS[dialect](answer)) as server:
        pool = make_pool(server, client)
        results = run_calls(pool, [("judge", structured(i)) for i in range(3)])
        levels = [level_sent(body) for body in server.requests]
    expected = EXPECTED_LEVELS[dialect]
    # One request per refused level, then every later call goes straight to the level that answered.
    assert levels == expected + [expected[-1]] * 2
    assert all(json.loads(result.text) == instance_of(SCHEMA) for result in results)
    assert [result.structured_output for result in results] == [expected[-1]] * 3
    assert all(result.attempts == 1 for result in results)
    stats = pool.retry_stats()["judge"]
    assert stats["retries"] == 0 and stats["failures"] == 0 and "5xx" not in stats["by_reason"]
    endpoint = pool.structured_output()[f"openai/served@{server.url}"]
    assert endpoint["level"] == expected[-1]
    assert sorted(endpoint["rejected"]) == sorted(expected[:-1])


@pytest.mark.parametrize("client", CLIENTS)
def test_llama_cpp_python_500_is_quoted_and_not_retried(client):
    notices = []
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        pool = make_pool(server, client)
        pool.on_notice = notices.append
        run_calls(pool, [("judge", structured())])
        assert server.request_count == 2  # the 500 once, then json_object with the schema
        second = server.requests[1]["response_format"]
    assert second == {"type": "json_object", "schema": SCHEMA}
    rejected = pool.structured_output()[f"openai/served@{server.url}"]["rejected"]["json_schema"]
    assert "Input should be 'text' or 'json_object'" in rejected
    assert len(notices) == 1 and "json_object with a schema" in notices[0] and "json_schema" in notices[0]


def test_concurrent_first_calls_pay_for_one_rejection():
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        pool = make_pool(server)

        async def go():
            model = pool.get("judge")
            results = await asyncio.gather(*(model.complete(structured(i)) for i in range(8)))
            await pool.aclose()
            return results

        results = asyncio.run(go())
        levels = [level_sent(body) for body in server.requests]
    assert levels.count("json_schema") == 1 and levels.count("json_object_schema") == 8
    assert {result.structured_output for result in results} == {"json_object_schema"}


def test_requests_queued_behind_the_first_answer_go_out_together():
    """Only the first schema request probes; the seven waiting behind it are sent side by side once it
    answers (the server holds each until all seven are in, and refuses them if they come one by one)."""
    import threading

    together = threading.Barrier(7)

    def respond(body, index):
        if index > 0:
            try:
                together.wait(timeout=10)
            except threading.BrokenBarrierError:
                return Reply(status=400, error_message="the requests after the probe came one at a time")
        return Reply(content=answer(body))

    with FakeOpenAIServer(respond) as server:
        pool = make_pool(server)

        async def go():
            try:
                return await asyncio.gather(*(pool.get("judge").complete(structured(i)) for i in range(8)))
            finally:
                await pool.aclose()

        results = asyncio.run(go())
        assert server.request_count == 8
    assert {result.structured_output for result in results} == {"json_schema"}


def test_the_level_is_shared_by_every_alias_on_the_endpoint():
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        pool = make_pool(server, aliases=("judge", "tracker"))
        run_calls(pool, [("judge", structured(0)), ("tracker", structured(1))])
        levels = [level_sent(body) for body in server.requests]
    assert levels == ["json_schema", "json_object_schema", "json_object_schema"]


def test_supports_json_schema_overrides_the_starting_level():
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        off = make_pool(server, supports_json_schema=False)
        run_calls(off, [("judge", structured(i)) for i in range(2)])
        assert [level_sent(body) for body in server.requests] == ["prompt", "prompt"]
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        on = make_pool(server, supports_json_schema=True)  # a start, not a promise: still negotiated
        run_calls(on, [("judge", structured())])
        assert [level_sent(body) for body in server.requests] == ["json_schema", "json_object_schema"]


def test_plain_requests_carry_no_response_format_and_are_not_negotiated():
    with FakeOpenAIServer(llama_cpp_python(lambda body: "Hello.")) as server:
        pool = make_pool(server)
        result = run_calls(pool, [("judge", ChatRequest(messages=MESSAGES))])[0]
        assert "response_format" not in server.requests[0]
    assert result.structured_output is None and pool.structured_output() == {}


def test_an_unrelated_400_is_not_a_format_rejection():
    from tests.helpers.fakeserver import Reply

    with FakeOpenAIServer(lambda body, i: Reply(status=400, error_message="context length exceeded")) as server:
        pool = make_pool(server)
        with pytest.raises(Exception) as caught:
            run_calls(pool, [("judge", structured())])
        assert server.request_count == 1  # fatal at once, and not read as "json_schema unsupported"
    assert "context length exceeded" in str(caught.value)
    assert pool.structured_output()[f"openai/served@{server.url}"] == {"level": None, "rejected": {}}


def test_gemini_schema_keeps_property_names_but_drops_unsupported_keywords():
    schema = {"type": "object", "additionalProperties": False, "required": ["title", "additionalProperties"],
              "properties": {"title": {"type": "string"},
                             "additionalProperties": {"type": "object", "additionalProperties": False,
                                                      "properties": {"x": {"type": "boolean"}}},
                             "items": {"type": "array", "items": {"type": "object", "additionalProperties": False}}}}
    sent = response_format("json_schema", schema, "gemini")["json_schema"]["schema"]
    assert "additionalProperties" not in sent
    assert set(sent["properties"]) == {"title", "additionalProperties", "items"}  # names are data, not keywords
    assert "additionalProperties" not in sent["properties"]["additionalProperties"]
    assert sent["properties"]["items"]["items"] == {"type": "object"}
    assert response_format("json_schema", schema, "openai")["json_schema"]["schema"] == schema
    assert strip_keywords(schema, frozenset()) == schema
