"""Hosted providers over the direct HTTP path, each against a loopback server answering in its format.

``INTAKE_EVAL_BASE_URL_<PROVIDER>`` points a provider at 127.0.0.1 while keeping its key variable,
wire model id and price table, so these tests exercise the real route without touching a real host.
The same answers through litellm (client="litellm", same server) must normalise to the same result.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend, call_cost
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.providers import PROVIDERS, direct_route
from intake_eval.llm.registry import PROVIDER_KEY_ENV, resolve_spec
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted

HELLO = [{"role": "user", "content": "I can't sleep."}]


def _completion(message: dict, usage: dict, **top) -> bytes:
    return json.dumps({"id": "x-1", "object": "chat.completion", "created": 1700000000, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                    "finish_reason": "stop", "logprobs": None}],
                       "usage": usage, **top}).encode()


# (raw provider id, the provider's answer, expected text, expected reasoning, prompt, completion, reasoning tokens)
SHAPES = {
    "together_ai": ("together_ai/moonshotai/Kimi-K2.6", _completion(
        {"content": "How long has it lasted?", "reasoning": "Ask about duration.", "tool_calls": []},
        {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42, "cached_tokens": 16}, prompt=[]),
        "How long has it lasted?", "Ask about duration.", 30, 12, 0),
    "fireworks_ai": ("fireworks_ai/accounts/fireworks/models/qwen3-8b", _completion(
        {"content": "<think>Sleep first.</think>\n\nWhen did it start?"},
        {"prompt_tokens": 25, "completion_tokens": 20, "total_tokens": 45}),
        "When did it start?", "Sleep first.", 25, 20, 0),
    "deepseek": ("deepseek/deepseek-reasoner", _completion(
        {"content": "Do you wake early?", "reasoning_content": "Early waking hints at mood."},
        {"prompt_tokens": 40, "completion_tokens": 50, "total_tokens": 90, "prompt_cache_hit_tokens": 32,
         "prompt_cache_miss_tokens": 8, "completion_tokens_details": {"reasoning_tokens": 44}},
        system_fingerprint="fp_x"),
        "Do you wake early?", "Early waking hints at mood.", 40, 50, 44),
    "openrouter": ("openrouter/openai/gpt-4o", _completion(
        {"content": "Tell me more.", "reasoning": "Open prompt.", "refusal": None,
         "reasoning_details": [{"type": "reasoning.text", "text": "Open prompt."}]},
        {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14, "cost": 0.0001}, provider="OpenAI"),
        "Tell me more.", "Open prompt.", 10, 4, 0),
    "groq": ("groq/openai/gpt-oss-120b", _completion(
        {"content": "Any nightmares?", "reasoning": "Screen trauma."},
        {"queue_time": 0.01, "prompt_tokens": 22, "prompt_time": 0.002, "completion_tokens": 30,
         "completion_time": 0.05, "total_tokens": 52}, x_groq={"id": "req_1"}, service_tier="on_demand"),
        "Any nightmares?", "Screen trauma.", 22, 30, 0),
    # Gemini's OpenAI-compatible endpoint: thinking tokens only in total_tokens.
    "gemini": ("gemini/gemini-3-flash-preview", _completion(
        {"content": "How is your appetite?"},
        {"prompt_tokens": 50, "completion_tokens": 6, "total_tokens": 120}),
        "How is your appetite?", None, 50, 70, 0),
    "openai": ("openai/gpt-4o", _completion(
        {"content": "What brings you in?", "refusal": None, "annotations": []},
        {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
         "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}},
        service_tier="default"),
        "What brings you in?", None, 12, 5, 0),
}


def _complete(pool: ModelPool, name: str):
    async def go():
        try:
            return await pool.get(name).complete(ChatRequest(messages=HELLO, max_tokens=99))
        finally:
            await pool.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("provider", sorted(SHAPES))
def test_provider_shape_over_direct_http(provider, monkeypatch):
    model, raw, text, reasoning, prompt_tokens, completion_tokens, reasoning_tokens = SHAPES[provider]
    key_env = PROVIDER_KEY_ENV[provider]
    monkeypatch.setenv(key_env, f"test-key-for-{provider}")
    with FakeOpenAIServer(scripted([Reply(raw_body=raw)])) as server:
        monkeypatch.setenv(f"INTAKE_EVAL_BASE_URL_{provider.upper()}", server.url)
        spec = resolve_spec(model, {})  # a raw id: the registry fills in the key variable
        result = _complete(ModelPool({}, use_cache=False), model)
        body, headers = server.requests[0], server.headers[0]
    assert direct_route(spec) is not None and direct_route(spec).base_url == server.url
    assert "aiohttp" in headers["User-Agent"]  # the direct client, not litellm's openai SDK
    assert headers["Authorization"] == f"Bearer test-key-for-{provider}"
    assert body["model"] == model.split("/", 1)[1] and body["messages"] == HELLO
    assert body["max_completion_tokens" if provider == "openai" else "max_tokens"] == 99
    assert (result.text, result.reasoning) == (text, reasoning)
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens) == (
        prompt_tokens, completion_tokens, reasoning_tokens)
    expected_cost, known = call_cost(spec, prompt_tokens, completion_tokens, cached_tokens=usage.cached_prompt_tokens)
    assert usage.cached_prompt_tokens == {"deepseek": 32, "together_ai": 16}.get(provider, 0)  # their own fields, mapped
    assert usage.cost_known == known and usage.cost_usd == pytest.approx(expected_cost)
    # litellm's bundled table prices none of OpenRouter's ids: unknown, as on the litellm path
    assert known == (provider != "openrouter") and (expected_cost > 0) == known


@pytest.mark.parametrize("provider", sorted(set(SHAPES) - {"gemini"}))  # litellm speaks Gemini's native API
def test_direct_and_litellm_normalise_alike(provider):
    model, raw, *_ = SHAPES[provider]
    results = {}
    with FakeOpenAIServer(scripted([Reply(raw_body=raw)])) as server:
        spec = ModelSpec(alias="p", model=model, api_base=server.url, timeout_s=10)
        for client in ("auto", "litellm"):
            backend = ProviderBackend(spec, client=client)

            async def go(backend=backend):
                try:
                    return await backend.complete(ChatRequest(messages=HELLO))
                finally:
                    await backend.aclose()

            results[client] = asyncio.run(go())
        agents = [h.get("User-Agent", "") for h in server.headers]
    assert "aiohttp" in agents[0] and "aiohttp" not in agents[1]
    direct, routed = (results[c].model_dump(exclude={"latency_s"}) for c in ("auto", "litellm"))
    assert direct == routed


def test_api_base_on_a_provider_id_gets_no_provider_key(monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "real-together-key")
    with FakeOpenAIServer(scripted(["Hello."])) as server:
        spec = ModelSpec(alias="local-together", model="together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
                         api_base=server.url)
        result = _complete(ModelPool({"local-together": spec}, use_cache=False), "local-together")
        headers, body = server.headers[0], server.requests[0]
    assert result.text == "Hello." and result.usage.cost_usd == 0.0  # a loopback server is free
    assert headers["Authorization"] == "Bearer not-needed" and "aiohttp" in headers["User-Agent"]
    assert body["model"] == "meta-llama/Llama-3.3-70B-Instruct-Turbo"


def test_missing_provider_key_is_fatal_and_named(monkeypatch):
    monkeypatch.delenv("FIREWORKS_API_KEY", raising=False)
    monkeypatch.setenv("INTAKE_EVAL_BASE_URL_FIREWORKS_AI", "http://127.0.0.1:9/v1")
    from intake_eval.llm.base import ModelCallError

    with pytest.raises(ModelCallError, match="FIREWORKS_API_KEY") as error:
        _complete(ModelPool({}, use_cache=False), "fireworks_ai/accounts/fireworks/models/qwen3-8b")
    assert error.value.kind == "fatal"


def test_real_hosts_and_litellm_only_providers(monkeypatch):
    for name in PROVIDERS:
        monkeypatch.delenv(f"INTAKE_EVAL_BASE_URL_{name.upper()}", raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    expected = {
        "openai/gpt-4o": "https://api.openai.com/v1",
        "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo": "https://api.together.xyz/v1",
        "fireworks_ai/accounts/fireworks/models/qwen3-8b": "https://api.fireworks.ai/inference/v1",
        "deepseek/deepseek-chat": "https://api.deepseek.com/v1",
        "openrouter/openai/gpt-4o": "https://openrouter.ai/api/v1",
        "groq/openai/gpt-oss-120b": "https://api.groq.com/openai/v1",
        "gemini/gemini-3-flash-preview": "https://generativelanguage.googleapis.com/v1beta/openai",
    }
    for model, url in expected.items():
        route = direct_route(resolve_spec(model, {}))
        assert route is not None and route.base_url == url and route.key_env == PROVIDER_KEY_ENV[model.split("/")[0]]
    for model in ("anthropic/claude-sonnet-4-6", "bedrock/anthropic.claude-3", "vertex_ai/gemini-2.5-pro",
                  "hosted_vllm/qwen", "offline/judge"):
        assert direct_route(ModelSpec(model=model)) is None, model
    assert direct_route(ModelSpec(model="hosted_vllm/qwen", api_base="http://127.0.0.1:8000/v1")) is not None


def test_openai_base_url_variable_is_still_honoured(monkeypatch):
    monkeypatch.delenv("INTAKE_EVAL_BASE_URL_OPENAI", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example/v1/")
    route = direct_route(resolve_spec("openai/gpt-4o", {}))
    assert route is not None and route.base_url == "https://proxy.example/v1"
    assert route.max_tokens_field == "max_completion_tokens" and route.key_env == "OPENAI_API_KEY"
