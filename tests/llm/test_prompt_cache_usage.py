"""Cached-input and cache-write tokens: read from each provider's own usage shape, priced exactly.

Loopback servers answer as OpenAI, vLLM, llama.cpp (OpenAI shape + ``timings``), Anthropic's
Messages API and Gemini's generateContent (both through litellm's own providers via ``api_base``).
"""

from __future__ import annotations

import asyncio

import pytest

from intake_eval.core.records import Usage
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec, UsageMeter
from intake_eval.llm.litellm_backend import cache_prices, call_cost
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted

FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.1, deadline_s=10.0)
HELLO = [{"role": "system", "content": "You are a clinician."}, {"role": "user", "content": "I can't sleep."}]
# A priced loopback alias: the server is local, so only the alias's own prices apply.
PRICES = {"input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6, "cache_read_cost_per_token": 5e-7,
          "cache_write_cost_per_token": 2.5e-6}


def call(server, model: str, reply_client: str = "auto", tmp_path=None, **fields) -> ChatResult:
    spec = ModelSpec(alias="m", model=model, api_base=server.url, timeout_s=5.0, **fields)
    pool = ModelPool({"m": spec}, cache_path=(tmp_path / "cache.sqlite") if tmp_path else None,
                     retry_policy=FAST, client=reply_client)

    async def go():
        try:
            return await pool.get("m").complete(ChatRequest(messages=HELLO))
        finally:
            await pool.aclose()

    return asyncio.run(go())


OPENAI_SHAPES = [
    ({"prompt_tokens_details": {"cached_tokens": 1536}}, 1536),  # OpenAI, vLLM with prompt details on
    ({"prompt_tokens_details": {"cached_tokens": 0}}, 0),
    ({}, 0),  # absent
    ({"prompt_tokens_details": None}, 0),
]


@pytest.mark.parametrize("client", ["auto", "litellm"])
@pytest.mark.parametrize("usage,cached", OPENAI_SHAPES)
def test_openai_shape_cached_tokens(client, usage, cached):
    reply = Reply(content="Tell me more.", prompt_tokens=2000, completion_tokens=10, usage=usage)
    with FakeOpenAIServer(scripted([reply])) as server:
        result = call(server, "openai/fake", client, **PRICES)
    assert result.usage.prompt_tokens == 2000
    assert result.usage.cached_prompt_tokens == cached
    assert result.usage.cache_write_tokens == 0
    expected = (2000 - cached) * 2e-6 + cached * 5e-7 + 10 * 8e-6
    assert result.usage.cost_usd == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("timings,cached", [({"cache_n": 480, "prompt_n": 20}, 480), ({"cache_n": 0, "prompt_n": 500}, 0),
                                            (None, 0)])
def test_llamacpp_timings_cache_n(timings, cached):
    extra = {"timings": timings} if timings is not None else {}
    with FakeOpenAIServer(scripted([Reply(content="Go on.", prompt_tokens=500, completion_tokens=3, extra=extra)])) as server:
        result = call(server, "openai/smollm")
    assert (result.usage.prompt_tokens, result.usage.cached_prompt_tokens) == (500, cached)
    assert result.usage.cost_usd == 0.0 and result.usage.cost_known  # a local server is free


@pytest.mark.parametrize("usage,read,written", [
    ({"cache_read_input_tokens": 3000, "cache_creation_input_tokens": 400}, 3000, 400),
    ({"cache_read_input_tokens": 0, "cache_creation_input_tokens": 2500}, 0, 2500),
    ({"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}, 0, 0),
    ({}, 0, 0),
])
def test_anthropic_shape_through_litellm(usage, read, written):
    reply = Reply(content="Labelled.", prompt_tokens=100, completion_tokens=20, usage=usage)
    with FakeOpenAIServer(scripted([reply])) as server:
        result = call(server, "anthropic/claude-sonnet-4-6", **PRICES)
        assert server.paths[0].endswith("/messages")
    # Anthropic's input_tokens excludes the cached ones; ours counts every input token
    assert result.usage.prompt_tokens == 100 + read + written
    assert (result.usage.cached_prompt_tokens, result.usage.cache_write_tokens) == (read, written)
    expected = 100 * 2e-6 + read * 5e-7 + written * 2.5e-6 + 20 * 8e-6
    assert result.usage.cost_usd == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("usage,cached", [({"prompt_tokens_details": {"cached_tokens": 1200}}, 1200),
                                          ({"prompt_tokens_details": {"cached_tokens": 0}}, 0), ({}, 0)])
def test_gemini_shape_on_its_openai_compatible_endpoint(usage, cached):
    # Gemini goes over the direct path (its OpenAI-compatible endpoint), which reports implicit-cache
    # hits in OpenAI's usage shape
    reply = Reply(content="Labelled.", prompt_tokens=1500, completion_tokens=20, usage=usage)
    with FakeOpenAIServer(scripted([reply])) as server:
        result = call(server, "gemini/gemini-3-flash-preview", **PRICES)
        assert server.paths[0].endswith("/chat/completions")
    assert (result.usage.prompt_tokens, result.usage.cached_prompt_tokens) == (1500, cached)
    expected = (1500 - cached) * 2e-6 + cached * 5e-7 + 20 * 8e-6
    assert result.usage.cost_usd == pytest.approx(expected, rel=1e-12)


def test_response_cache_hit_keeps_cached_tokens_and_price(tmp_path):
    reply = Reply(content="Tell me more.", prompt_tokens=2000, completion_tokens=10,
                  usage={"prompt_tokens_details": {"cached_tokens": 1024}})
    with FakeOpenAIServer(scripted([reply])) as server:
        first = call(server, "openai/fake", tmp_path=tmp_path, **PRICES)
        again = call(server, "openai/fake", tmp_path=tmp_path, **PRICES)
        assert server.request_count == 1
    assert again.cached and not first.cached
    assert again.usage == first.usage and again.usage.cached_prompt_tokens == 1024
    meter = UsageMeter()
    meter.add(first)
    meter.add(again)
    usage = meter.to_usage()
    assert (usage.cached_prompt_tokens, usage.prompt_tokens) == (2048, 4000)
    assert usage.cost_usd == pytest.approx(2 * first.usage.cost_usd)
    assert meter.paid_usd == pytest.approx(first.usage.cost_usd)  # only the first was paid


def test_usage_add_sums_cache_fields():
    a = Usage(calls=1, prompt_tokens=10, cached_prompt_tokens=4, cache_write_tokens=3)
    b = Usage(calls=2, prompt_tokens=20, cached_prompt_tokens=5, cache_write_tokens=0)
    total = a.add(b)
    assert (total.cached_prompt_tokens, total.cache_write_tokens, total.prompt_tokens) == (9, 3, 30)
    assert Usage.model_validate({"calls": 1}).cached_prompt_tokens == 0  # older records still read


def test_litellm_table_cache_prices():
    sonnet = ModelSpec(model="anthropic/claude-sonnet-4-6")
    assert cache_prices(sonnet) == (pytest.approx(3e-7), pytest.approx(3.75e-6))
    cost, known = call_cost(sonnet, 10_000, 0, cached_tokens=8_000, cache_write_tokens=1_000)
    assert known and cost == pytest.approx(1_000 * 3e-6 + 8_000 * 3e-7 + 1_000 * 3.75e-6)
    gpt4o = ModelSpec(model="openai/gpt-4o")
    cost, _ = call_cost(gpt4o, 2_048, 100, cached_tokens=1_024)
    assert cost == pytest.approx(1_024 * 2.5e-6 + 1_024 * 1.25e-6 + 100 * 1e-5)
    # no cached price in the table: cached tokens cost the plain input price (no discount assumed)
    deepseek = ModelSpec(model="together_ai/deepseek-ai/DeepSeek-V3")
    assert call_cost(deepseek, 2_000, 0, cached_tokens=1_500)[0] == pytest.approx(call_cost(deepseek, 2_000, 0)[0])


def test_alias_override_beats_the_table():
    spec = ModelSpec(model="anthropic/claude-sonnet-4-6", cache_read_cost_per_token=1e-7)
    read, write = cache_prices(spec)
    assert read == 1e-7 and write == pytest.approx(3.75e-6)
    # own input/output prices without cache prices: cached input at the plain input price
    own = ModelSpec(model="anthropic/claude-sonnet-4-6", input_cost_per_token=1e-6, output_cost_per_token=1e-6)
    assert call_cost(own, 1_000, 0, cached_tokens=600)[0] == pytest.approx(1_000 * 1e-6)


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-6", "gemini/gemini-3-flash-preview", "openai/gpt-4o",
                                   "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", "deepseek/deepseek-chat",
                                   "openrouter/openai/gpt-4o", "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"])
def test_prices_read_once_equal_litellms_per_call(model):
    """The table's rates are read once per model; every call is priced as litellm's cost_per_token prices it."""
    from intake_eval.llm.litellm_backend import import_litellm

    litellm = import_litellm()
    spec = ModelSpec(model=model)
    for prompt, completion in ((1, 1), (2_048, 350), (99_999, 12_345), (250_000, 4)):
        try:
            expected = sum(litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion))
        except Exception:
            assert call_cost(spec, prompt, completion) == (0.0, False)  # unmapped: unknown, as before
            continue
        assert call_cost(spec, prompt, completion) == (expected, True)
