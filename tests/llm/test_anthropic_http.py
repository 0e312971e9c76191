"""Claude over the direct Messages API path, against a loopback server answering in Anthropic's format.

The same answers through litellm (client="litellm", same server) must give the same request on the
wire and the same normalised result: text, reasoning, finish reason, usage with cache reads and
writes, cost.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from intake_eval.llm.anthropic_http import STRUCTURED_OUTPUTS_BETA, anthropic_route
from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend, call_cost
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted

SONNET = "anthropic/claude-sonnet-4-6"  # native structured output (output_format)
HAIKU = "anthropic/claude-3-5-haiku-20241022"  # a schema as one forced tool call
SCHEMA = {"type": "object", "properties": {"turn": {"type": "integer", "minimum": 0},
                                           "reasoning": {"type": "string", "maxLength": 300}},
          "required": ["turn", "reasoning"]}
LONG = "The patient describes poor sleep, early waking and low mood most days. " * 120
MESSAGES = [{"role": "system", "content": "You are a clinical rater."}, {"role": "user", "content": LONG},
            {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Label turn 3 only."}]
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.5, deadline_s=20.0)


def _message(content: list[dict], usage: dict, stop: str = "end_turn") -> bytes:
    return json.dumps({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
                       "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}).encode()


TEXT = [{"type": "text", "text": "How long has this lasted?"}]
ANSWER = {"turn": 3, "reasoning": "Asked about sleep."}
SHAPES = {
    "text, cache read and write": (SONNET, None, _message(TEXT, {
        "input_tokens": 40, "output_tokens": 9, "cache_read_input_tokens": 2100, "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard"})),
    "two text blocks, no cache fields": (SONNET, None, _message(
        [{"type": "text", "text": "Tell me "}, {"type": "text", "text": "more."}], {"input_tokens": 12, "output_tokens": 4})),
    "native structured output": (SONNET, SCHEMA, _message([{"type": "text", "text": json.dumps(ANSWER)}], {
        "input_tokens": 900, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 2500})),
    "forced tool call": (HAIKU, SCHEMA, _message(
        [{"type": "tool_use", "id": "toolu_1", "name": "json_tool_call", "input": ANSWER}],
        {"input_tokens": 700, "output_tokens": 30, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 0},
        stop="tool_use")),
    "forced tool call wrapped in values": (HAIKU, SCHEMA, _message(
        [{"type": "tool_use", "id": "toolu_2", "name": "json_tool_call", "input": {"values": ANSWER}}],
        {"input_tokens": 700, "output_tokens": 30}, stop="tool_use")),
    "thinking with its token count": (SONNET, None, _message(
        [{"type": "thinking", "thinking": "Sleep first, then mood.", "signature": "sig"}, *TEXT],
        {"input_tokens": 50, "output_tokens": 80, "output_tokens_details": {"thinking_tokens": 61}})),
    "thinking without a token count": (SONNET, None, _message(
        [{"type": "thinking", "thinking": "Ask about duration before severity.", "signature": "s"},
         {"type": "redacted_thinking", "data": "xyz"}, *TEXT], {"input_tokens": 50, "output_tokens": 80})),
    "cut off at max_tokens": (SONNET, None, _message(
        [{"type": "text", "text": "How long"}], {"input_tokens": 50, "output_tokens": 2000}, stop="max_tokens")),
}


def _both(model: str, schema: dict | None, raw: bytes, **fields):
    results, bodies = {}, {}
    with FakeOpenAIServer(scripted([Reply(raw_body=raw)])) as server:
        spec = ModelSpec(alias="claude", model=model, api_base=server.url.removesuffix("/v1"), temperature=0.0,
                         max_tokens=2000, timeout_s=10, **fields)
        for client in ("litellm", "auto"):
            backend = ProviderBackend(spec, client=client)

            async def go(backend=backend):
                try:
                    request = ChatRequest(messages=MESSAGES, response_schema=schema, cache_points=((1, len(LONG)),))
                    return await backend.complete(request, level="json_schema" if schema else None)
                finally:
                    await backend.aclose()

            results[client] = asyncio.run(go())
        assert len(server.requests) == 2 and all(path.endswith("/v1/messages") for path in server.paths)
        bodies = dict(zip(("litellm", "auto"), server.requests))
        headers = {client: {k.lower(): v for k, v in h.items()} for client, h in zip(("litellm", "auto"), server.headers)}
    return results, bodies, headers


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_direct_and_litellm_send_and_normalise_alike(shape):
    model, schema, raw = SHAPES[shape]
    results, bodies, headers = _both(model, schema, raw)
    assert "aiohttp" in headers["auto"]["user-agent"] and "litellm" in headers["litellm"]["user-agent"]
    # the same request on the wire, but for the schema: GA output_config.format where litellm still
    # sends the beta output_format (and its header)
    ga = {**bodies["auto"]}
    if "output_config" in ga:
        ga["output_format"] = ga.pop("output_config")["format"]
        assert headers["auto"].get("anthropic-beta") is None
        assert headers["litellm"]["anthropic-beta"] == STRUCTURED_OUTPUTS_BETA
    assert ga == bodies["litellm"]
    for name in ("x-api-key", "anthropic-version", *(() if schema is not None else ("anthropic-beta",))):
        assert headers["auto"].get(name) == headers["litellm"].get(name), name
    direct, routed = (results[c].model_dump(exclude={"latency_s"}) for c in ("auto", "litellm"))
    assert direct == routed
    body = bodies["auto"]
    assert body["system"] == [{"type": "text", "text": "You are a clinical rater."}]
    assert body["messages"][0]["content"][-1].get("cache_control") == {"type": "ephemeral"}
    if schema is not None:
        assert direct["text"] and json.loads(direct["text"]) == ANSWER
        if model == SONNET:
            assert body["output_config"]["format"]["type"] == "json_schema" and "output_format" not in body
            assert "maxLength" not in json.dumps(body["output_config"])  # what Anthropic's grammar refuses
        else:
            assert body["tool_choice"] == {"name": "json_tool_call", "type": "tool"}


def test_usage_counts_every_input_token_and_prices_the_cache(monkeypatch):
    """The hosted route (key variable, price table) pointed at 127.0.0.1 by the base URL variable."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    with FakeOpenAIServer(scripted([Reply(raw_body=SHAPES["text, cache read and write"][2])])) as server:
        monkeypatch.setenv("INTAKE_EVAL_BASE_URL_ANTHROPIC", server.url.removesuffix("/v1"))
        pool = ModelPool({}, use_cache=False)

        async def go():
            try:
                return await pool.get(SONNET).complete(ChatRequest(messages=MESSAGES))
            finally:
                await pool.aclose()

        usage = asyncio.run(go()).usage
        assert server.headers[0]["x-api-key"] == "sk-ant-test-key" and "aiohttp" in server.headers[0]["User-Agent"]
    assert (usage.prompt_tokens, usage.cached_prompt_tokens, usage.cache_write_tokens) == (40 + 2100 + 300, 2100, 300)
    expected, known = call_cost(ModelSpec(model=SONNET), 2440, 9, cached_tokens=2100, cache_write_tokens=300)
    assert usage.cost_known == known is True and usage.cost_usd == pytest.approx(expected) and expected > 0


def test_thinking_is_reasoning_not_text():
    results, _, _ = _both(*SHAPES["thinking with its token count"])
    result = results["auto"]
    assert (result.text, result.reasoning) == ("How long has this lasted?", "Sleep first, then mood.")
    assert result.usage.reasoning_tokens == 61


def test_a_cut_off_answer_is_length():
    results, _, _ = _both(*SHAPES["cut off at max_tokens"])
    assert results["auto"].finish_reason == "length" == results["litellm"].finish_reason


def _pool_call(server, replies):
    spec = ModelSpec(alias="claude", model=SONNET, api_base=server.url, timeout_s=10)
    pool = ModelPool({"claude": spec}, use_cache=False, retry_policy=FAST)

    async def go():
        try:
            return await pool.get("claude").complete(ChatRequest(messages=MESSAGES[:2]))
        finally:
            await pool.aclose()

    return asyncio.run(go()), pool


def _error(status: int, kind: str, message: str, headers: dict | None = None) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    return Reply(status=status, raw_body=json.dumps(body).encode(), headers=headers or {})


def test_overloaded_and_rate_limited_are_retried_after_the_servers_wait():
    replies = [_error(529, "overloaded_error", "Overloaded", {"retry-after": "0"}),
               _error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit",
                      {"retry-after": "0", "anthropic-ratelimit-requests-remaining": "0"}),
               Reply(raw_body=_message(TEXT, {"input_tokens": 10, "output_tokens": 5}))]
    with FakeOpenAIServer(scripted(replies)) as server:
        result, pool = _pool_call(server, replies)
        assert server.request_count == 3
    assert result.text == "How long has this lasted?" and result.attempts == 3
    assert pool.retry_stats()["claude"]["by_reason"] == {"429": 1, "5xx": 1}


def test_an_authentication_error_is_fatal_and_says_so():
    with FakeOpenAIServer(scripted([_error(401, "authentication_error", "invalid x-api-key")])) as server:
        with pytest.raises(ModelCallError) as error:
            _pool_call(server, None)
        assert server.request_count == 1
    assert error.value.kind == "fatal" and "authentication_error: invalid x-api-key" in str(error.value)


def test_routes(monkeypatch):
    for name in ("INTAKE_EVAL_BASE_URL_ANTHROPIC", "ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    hosted = anthropic_route(ModelSpec(model=SONNET))
    assert hosted.messages_url == "https://api.anthropic.com/v1/messages" and hosted.key_env == "ANTHROPIC_API_KEY"
    assert hosted.native_schema and not anthropic_route(ModelSpec(model=HAIKU)).native_schema
    monkeypatch.setenv("INTAKE_EVAL_BASE_URL_ANTHROPIC", "http://127.0.0.1:9/")
    assert anthropic_route(ModelSpec(model=SONNET)).messages_url == "http://127.0.0.1:9/v1/messages"
    own = anthropic_route(ModelSpec(model=SONNET, api_base="http://127.0.0.1:8/v1/messages"))
    assert own.messages_url == "http://127.0.0.1:8/v1/messages" and own.key_env is None  # no provider key
    # a parameter only litellm knows how to map keeps the alias on litellm; so do Bedrock and Vertex
    assert anthropic_route(ModelSpec(model=SONNET, extra_params={"reasoning_effort": "low"})) is None
    assert anthropic_route(ModelSpec(model=SONNET, extra_params={"thinking": {"type": "enabled",
                                                                              "budget_tokens": 1024}})) is not None
    for model in ("bedrock/anthropic.claude-3", "vertex_ai/claude-sonnet-4-6", "openai/gpt-4o"):
        assert anthropic_route(ModelSpec(model=model)) is None
