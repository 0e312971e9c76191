"""The estimate's replay of a provider's prompt cache, call by call, on hand-made requests."""

from __future__ import annotations

from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.prompt_cache import history_cache_points
from intake_eval.study.cache_estimate import PromptCacheModel, input_dollars


def _words(messages) -> int:  # a stand-in tokenizer: one token per character, 3 per message, 3 to prime
    return sum(3 + len(str(m.get("content", ""))) for m in messages) + 3


def _model(model: str) -> PromptCacheModel:
    return PromptCacheModel(ModelSpec(alias="a", model=model), _words, len)


def _chat(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "s" * 4000}, {"role": "user", "content": "opening"}]
    for n in range(turns):
        messages += [{"role": "assistant", "content": f"q{n}" * 20}, {"role": "user", "content": f"a{n}" * 20}]
    return messages


def _request(messages) -> ChatRequest:
    return ChatRequest(messages=messages, cache_points=history_cache_points(messages, 0))


def test_automatic_cache_reads_the_previous_prompt_in_provider_steps():
    cache = _model("openai/gpt-4o")  # from 1,024 tokens, in 128-token steps
    assert cache.account(_request(_chat(0)), "clinician") == (0, 0)  # nothing cached yet
    read, written = cache.account(_request(_chat(1)), "clinician")
    shared = _words(_chat(0)) - 3  # the whole previous prompt (without the reply priming)
    assert written == 0 and read == shared - shared % 128 and read % 128 == 0
    assert cache.account(_request(_chat(1)), "patient") == (0, 0)  # another role's chain starts fresh
    short = _model("openai/gpt-4o")
    tiny = [{"role": "user", "content": "x" * 100}]
    short.account(ChatRequest(messages=tiny), "judge")
    assert short.account(ChatRequest(messages=tiny + tiny), "judge") == (0, 0)  # below the minimum


def test_breakpoint_cache_writes_then_reads_the_marked_prefix():
    cache = _model("anthropic/claude-sonnet-4-5")  # from 1,024 tokens, explicit breakpoints
    first = cache.account(_request(_chat(1)), "clinician")
    assert first[0] == 0 and first[1] > 1024  # the whole prompt is written for the next call
    second = cache.account(_request(_chat(2)), "clinician")
    assert second[0] == first[1]  # the next call reads exactly what the first wrote
    assert second[1] == _words(_chat(2)) - 3 - second[0]  # and writes its one new exchange
    unmarked = _model("anthropic/claude-sonnet-4-5")
    unmarked.account(ChatRequest(messages=_chat(1)), "clinician")
    assert unmarked.account(ChatRequest(messages=_chat(2)), "clinician") == (0, 0)  # no breakpoints, no cache


def test_offline_models_cache_nothing_and_prices_fall_back_to_input():
    assert _model("offline/patient").account(_request(_chat(3)), "patient") == (0, 0)
    assert input_dollars(1000, 600, 100, 1e-6, 1e-7, 2e-6) == 300 * 1e-6 + 600 * 1e-7 + 100 * 2e-6
    assert input_dollars(1000, 600, 0, 1e-6, None, None) == 1000 * 1e-6
