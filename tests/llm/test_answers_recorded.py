"""Every recorded successful answer in the shared set, through the real direct HTTP client: what
llm/answer.py makes of it (usable, refused, empty, cut at the cap) and the finish_reason kept."""

from __future__ import annotations

import asyncio

import pytest

from intake_eval.llm.answer import truncated, unusable
from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend
from tests.conformance.replay import ReplayServer, recorded

# recording -> (finish_reason, cut at the cap, what the answer is: None = usable text)
EXPECTED = {
    "openai_gpt4o_plain": ("stop", False, None),
    "openai_cached_tokens": ("stop", False, None),
    "deepseek_reasoner_ok": ("stop", False, None),
    "fireworks_kimi_k2p5_reasoning_content": ("stop", False, None),
    "fireworks_qwen3_thinking_close_tag_only": ("stop", False, None),
    "together_r1_think_inline": ("stop", False, None),
    "llamacpp_xllamacpp_real_0": ("length", True, None),
    "llamacpp_xllamacpp_real_1": ("length", True, None),
    "openrouter_gemini_length_visible": ("length", True, None),
    "openai_refusal_docs": ("stop", False, "refused"),
    "openrouter_content_filter_empty": ("content_filter", False, "refused"),
}


def _answer(name: str, model: str = "openai/served", route: str = "chat"):
    with ReplayServer({route: recorded(name)}) as server:
        base = server.root if model.startswith("anthropic/") else server.url
        backend = ProviderBackend(ModelSpec(alias="x", model=model, api_base=base, max_tokens=100))
        return asyncio.run(backend.complete(ChatRequest(messages=[{"role": "user", "content": "hello"}])))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_recorded_answer_is_read_as_what_it_is(name):
    finish, cut, kind = EXPECTED[name]
    result = _answer(name)
    problem = unusable(result)
    assert (result.finish_reason, truncated(result), problem.kind if problem else None) == (finish, cut, kind)


def test_a_reasoning_answer_cut_mid_thought_fails_as_empty_after_length():
    with pytest.raises(ModelCallError) as caught:
        _answer("together_r1_length_midthink")
    assert caught.value.kind == "empty_after_length" and "max_tokens=100" in caught.value.format_message()


@pytest.mark.parametrize("name", ["anthropic_cache_read", "anthropic_cache_read_write"])
def test_claude_answers_keep_their_stop_reason(name):
    result = _answer(name, model="anthropic/claude-sonnet-4-5", route="messages")
    assert result.finish_reason == "stop" and result.refusal is None and unusable(result) is None


def test_claude_max_tokens_is_a_cut_answer():
    body = recorded("anthropic_cache_read")
    body["body"]["stop_reason"] = "max_tokens"  # changed: the same answer, stopped at the cap
    with ReplayServer({"messages": body}) as server:
        backend = ProviderBackend(ModelSpec(alias="x", model="anthropic/claude-sonnet-4-5", api_base=server.root))
        result = asyncio.run(backend.complete(ChatRequest(messages=[{"role": "user", "content": "hello"}])))
    assert result.finish_reason == "length" and truncated(result) and unusable(result) is None
