"""Every recorded successful answer, replayed over loopback through the real client: text, reasoning,
finish reason, usage, cached tokens and dollars (= usage × litellm's prices, cache rates included).

Each recording is served on the route its provider uses (``INTAKE_EVAL_BASE_URL_<PROVIDER>`` points the
provider here with its key variable and price table kept). The model an answer is priced as is the
alias's, as in a run; where the recorded model is not in litellm's table, a listed model of the same
provider is named (said per case).

Answers cut at max_tokens, refused or filtered (llama.cpp's two captures, OpenRouter's length and
content-filter answers, Together's R1 cut mid-thought, OpenAI's refusal) are how another branch's work
(a turn without visible text, truncation, refusals as counted facts) is tested; here they are read
through the real HTTP client and only their usage, cached tokens and dollars are asserted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from intake_eval.llm.base import ChatRequest
from intake_eval.llm.litellm_backend import ProviderBackend, cache_tokens, call_cost
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.providers import direct_route
from intake_eval.llm.registry import PROVIDER_KEY_ENV, resolve_spec
from tests.conformance.prices import table_dollars
from tests.conformance.replay import ReplayServer, recorded

HELLO = [{"role": "user", "content": "hello"}]


@dataclass(frozen=True)
class Case:
    recording: str
    model: str  # the alias's provider id: route, key variable, prices
    prompt: int
    completion: int
    cached: int = 0
    written: int = 0
    reasoning_tokens: int = 0


ANSWERED = [
    Case("openai_gpt4o_plain", "openai/gpt-4o-2024-08-06", 24, 8),
    # recorded from a model litellm's table does not list: priced as gpt-4o
    Case("openai_cached_tokens", "openai/gpt-4o", 4020, 4, cached=4012),
    Case("deepseek_reasoner_ok", "deepseek/deepseek-reasoner", 12, 789, reasoning_tokens=415),
    Case("fireworks_kimi_k2p5_reasoning_content", "fireworks_ai/accounts/fireworks/models/kimi-k2p5", 706, 5017),
    # Qwen3-VL thinking is not in the table: priced as Kimi K2.5 on the same provider
    Case("fireworks_qwen3_thinking_close_tag_only", "fireworks_ai/accounts/fireworks/models/kimi-k2p5", 722, 5772),
    # DeepSeek-R1 on Together is not in the table: priced as Kimi K2.6 on Together (it has a cache-read rate)
    Case("together_r1_think_inline", "together_ai/moonshotai/Kimi-K2.6", 4, 197),
    # Anthropic's input_tokens leave the cache out: every input token is input + read + written
    Case("anthropic_cache_read", "anthropic/claude-sonnet-4-5-20250929", 3 + 1111, 406, cached=1111),
    Case("anthropic_cache_read_write", "anthropic/claude-sonnet-4-5-20250929", 3 + 1111 + 418, 33, cached=1111,
         written=418),
]
CUT_REFUSED_OR_FILTERED = [
    Case("llamacpp_xllamacpp_real_0", "openai/local", 37, 200),
    Case("llamacpp_xllamacpp_real_1", "openai/local", 37, 200, cached=36),
    Case("openrouter_gemini_length_visible", "openrouter/google/gemini-2.5-flash", 2168, 100, cached=2161),
    Case("openrouter_content_filter_empty", "openrouter/google/gemini-2.5-flash", 1296, 0),
    Case("together_r1_length_midthink", "together_ai/moonshotai/Kimi-K2.6", 4, 100),
    Case("openai_refusal_docs", "openai/gpt-4o-2024-08-06", 81, 11),
]


def expected_text_and_reasoning(body: dict) -> tuple[str, str | None]:
    """What the visible answer and the reasoning are, read from the recording by hand."""
    if "choices" not in body:  # Anthropic: text blocks, thinking blocks
        return "".join(b["text"] for b in body["content"] if b["type"] == "text").strip(), None
    message = body["choices"][0]["message"]
    content = message.get("content") or ""
    if "</think>" in content:
        thought, _, visible = content.rpartition("</think>")
        return visible.strip(), thought.replace("<think>", "").strip()
    reasoning = (message.get("reasoning_content") or message.get("reasoning") or "").strip()
    return content.strip(), reasoning or None


def _serve(case: Case, monkeypatch) -> tuple[ReplayServer, dict]:
    answer = recorded(case.recording)
    provider = case.model.split("/", 1)[0]
    server = ReplayServer({"messages" if provider == "anthropic" else "chat": answer})
    monkeypatch.setenv(PROVIDER_KEY_ENV.get(provider) or "UNUSED_KEY", "sk-conformance-test")
    return server, answer


def _spec(case: Case, server: ReplayServer, monkeypatch):
    provider = case.model.split("/", 1)[0]
    if case.model == "openai/local":  # a server you run: api_base, no key, free
        return resolve_spec("local", {"local": resolve_spec(case.model, {}).model_copy(
            update={"alias": "local", "api_base": server.url, "api_key_env": None})})
    for name, value in server.env(provider).items():
        monkeypatch.setenv(name, value)
    return resolve_spec(case.model, {})


@pytest.mark.parametrize("case", ANSWERED, ids=lambda case: case.recording)
def test_an_answer_is_read_counted_and_priced_as_the_provider_gave_it(case, monkeypatch):
    server, answer = _serve(case, monkeypatch)
    with server:
        spec = _spec(case, server, monkeypatch)
        pool = ModelPool({spec.alias: spec}, use_cache=False)

        async def go():
            try:
                return await pool.get(spec.alias).complete(ChatRequest(messages=HELLO, max_tokens=8000))
            finally:
                await pool.aclose()

        result = asyncio.run(go())
    assert len(server.requests) == 1
    text, reasoning = expected_text_and_reasoning(answer["body"])
    assert (result.text, result.reasoning) == (text, reasoning) and text
    assert result.finish_reason == "stop" and result.attempts == 1
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens, usage.cache_write_tokens) == (
        case.prompt, case.completion, case.cached, case.written)
    if case.reasoning_tokens:
        assert usage.reasoning_tokens == case.reasoning_tokens
    dollars = table_dollars(case.model, case.prompt, case.completion, case.cached, case.written)
    assert usage.cost_known and dollars > 0 and usage.cost_usd == pytest.approx(dollars, rel=1e-9)


@pytest.mark.parametrize("case", CUT_REFUSED_OR_FILTERED, ids=lambda case: case.recording)
def test_a_cut_refused_or_filtered_answer_keeps_its_usage_and_price(case, monkeypatch):
    server, answer = _serve(case, monkeypatch)
    with server:
        spec = _spec(case, server, monkeypatch)
        backend = ProviderBackend(spec)
        route = direct_route(spec)
        assert route is not None  # the direct HTTP route, as every call of this provider takes

        async def go():
            try:
                params = backend.request_params(ChatRequest(messages=HELLO))
                return await backend.route.send(params, None)
            finally:
                await backend.aclose()

        response = asyncio.run(go())
    assert response == answer["body"] or response["choices"] == answer["body"]["choices"]
    usage = response["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (case.prompt, case.completion)
    assert (cache_tokens(response, usage)[0] or 0) == case.cached  # as sent: an absent count is None
    dollars, known = call_cost(spec, case.prompt, case.completion, cached_tokens=case.cached)
    if case.model == "openai/local":
        assert (dollars, known) == (0.0, True)  # a server on this machine is free
    elif case.model.startswith("openrouter/"):
        assert dollars == pytest.approx(table_dollars(case.model, case.prompt, case.completion, case.cached))
    else:
        assert known and dollars == pytest.approx(table_dollars(case.model, case.prompt, case.completion, case.cached))


def test_togethers_top_level_cached_tokens_are_cached_input_at_the_cached_rate(monkeypatch):
    """Together reports cache hits as ``usage.cached_tokens`` beside the OpenAI fields. Variation of
    together_r1_think_inline: cached_tokens 0 → 3 (of its 4 prompt tokens), nothing else changed."""
    answer = recorded("together_r1_think_inline")
    answer["body"]["usage"]["cached_tokens"] = 3
    monkeypatch.setenv("TOGETHER_API_KEY", "sk-conformance-test")
    with ReplayServer({"chat": answer}) as server:
        for name, value in server.env("together_ai").items():
            monkeypatch.setenv(name, value)
        model = "together_ai/moonshotai/Kimi-K2.6"
        pool = ModelPool({}, use_cache=False)

        async def go():
            try:
                return await pool.get(model).complete(ChatRequest(messages=HELLO))
            finally:
                await pool.aclose()

        usage = asyncio.run(go()).usage
    assert (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens) == (4, 3, 197)
    cached_rate = table_dollars(model, 4, 197, cached=3)
    assert usage.cost_usd == pytest.approx(cached_rate, rel=1e-9) and cached_rate < table_dollars(model, 4, 197)
