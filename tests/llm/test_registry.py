"""Aliases, --models files, raw provider ids, key preflight, prices, retry/limiter arithmetic."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.limiter import EndpointLimiter
from intake_eval.llm.litellm_backend import call_cost
from intake_eval.llm.structured import response_format, starting_level
from intake_eval.llm.registry import load_model_specs, preflight, resolve_spec
from intake_eval.llm.retry import RetryPolicy, backoff_delay, retry_after_seconds
from intake_eval.simulated import check_offline_name

STUDY = {
    "llama-3.3-70b": (False, 350), "llama-3.1-8b": (False, 350), "deepseek-v3": (False, 350),
    "qwen3-8b": (True, 2500), "kimi-k2.6": (True, 2500), "gpt-4o": (False, 350),
}


def test_shipped_aliases_match_the_study():
    specs = load_model_specs()
    for alias, (reasoning, max_tokens) in STUDY.items():
        spec = specs[alias]
        assert (spec.reasoning, spec.max_tokens, spec.temperature) == (reasoning, max_tokens, 0.7), alias
        assert spec.api_key_env and spec.alias == alias
    assert specs["gemini"].model == "gemini/gemini-3-flash-preview"
    assert specs["claude-sonnet-4.6"].model == "anthropic/claude-sonnet-4-6"
    for name in ("patient", "screener", "anchored", "judge", "generator"):
        assert specs[f"offline/{name}"].is_offline and specs[f"offline/{name}"].api_key_env is None


def test_every_shipped_provider_model_has_a_price():
    for alias, spec in load_model_specs().items():
        if spec.is_local:  # the embedded llama.cpp server runs on this machine: free, and known to be
            assert call_cost(spec, 1000, 100) == (0.0, True), alias
        elif not spec.is_offline:
            cost, known = call_cost(spec, 1000, 100)
            assert known and cost > 0, alias


def test_call_cost_hand_worked():
    # gpt-4o in litellm's table: $2.50 / M input, $10 / M output.
    assert call_cost(ModelSpec(model="openai/gpt-4o"), 1000, 100) == (pytest.approx(0.0035), True)
    override = ModelSpec(model="openai/x", input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    assert call_cost(override, 1000, 100) == (pytest.approx(0.0012), True)
    assert call_cost(ModelSpec(model="openai/not-a-real-model-xyz"), 1000, 100) == (0.0, False)
    assert call_cost(ModelSpec(model="openai/gpt-4o", api_base="http://127.0.0.1:8000/v1"), 1000, 100) == (0.0, True)


def test_models_file_merges_over_the_shipped_aliases(tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text(
        "models:\n  my-vllm:\n    model: hosted_vllm/Qwen/Qwen3-8B\n    api_base: http://127.0.0.1:8000/v1\n"
        "    rpm: 600\n  gpt-4o:\n    model: openai/gpt-4o-2024-11-20\n"
    )
    specs = load_model_specs(extra)
    assert specs["my-vllm"].api_key_env is None and specs["my-vllm"].rpm == 600
    assert specs["gpt-4o"].model == "openai/gpt-4o-2024-11-20" and specs["gpt-4o"].temperature == 0.7
    assert specs["gpt-4o"].api_key_env == "OPENAI_API_KEY"  # provider default filled in
    assert "gemini" in specs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("models:\n  x:\n    model: openai/a\n    temprature: 0.2\n", "models.x.temprature: unknown key"),
        ("models:\n  x:\n    model: openai/a\n    temperature: 3\n", "models.x.temperature: 3.0 is outside 0–2"),
        ("models:\n  x:\n    model: openai/a\n    api_key_env: sk-abc123\n", "models.x.api_key_env: must be the NAME"),
        ("models:\n  x:\n    model: openai/a\n    extra_params: {api_key: abc}\n", "models.x.extra_params.api_key"),
        ("models:\n  x:\n    max_tokens: 5\n", "models.x.model: Field required"),
        ("models: [1, 2]\n", "models: Input should be a valid dictionary"),
        ("models:\n  x: {model: openai/a\n", "YAML syntax error"),
    ],
)
def test_bad_models_file_is_one_line_naming_file_and_key(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(IntakeEvalError) as caught:
        load_model_specs(path)
    message = caught.value.format_message()
    assert str(path) in message and expected in message and "\n" not in message
    assert "sk-abc123" not in message


def test_missing_models_file_names_the_flag(tmp_path):
    with pytest.raises(IntakeEvalError, match=r"--models .*nope.yaml: no such file"):
        load_model_specs(tmp_path / "nope.yaml")


def test_resolve_raw_ids_offline_and_typos():
    specs = load_model_specs()
    raw = resolve_spec("openai/gpt-4o-mini", specs)
    assert (raw.model, raw.api_key_env, raw.temperature, raw.max_tokens) == ("openai/gpt-4o-mini", "OPENAI_API_KEY", 0.7, 350)
    assert resolve_spec("hosted_vllm/Qwen/Qwen3-8B", specs).api_key_env is None
    assert resolve_spec("gemini/gemini-2.5-flash", specs).api_key_env == "GEMINI_API_KEY"
    assert resolve_spec("offline/screener", specs).is_offline
    with pytest.raises(IntakeEvalError, match="did you mean 'gpt-4o'"):
        resolve_spec("gpt4o", specs)
    with pytest.raises(IntakeEvalError, match="unknown offline model"):
        check_offline_name(resolve_spec("offline/oracle", specs).model)


def test_preflight_names_alias_and_variable(monkeypatch):
    specs = load_model_specs()
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(IntakeEvalError) as caught:
        preflight([specs["gemini"], specs["claude-sonnet-4.6"], specs["offline/judge"]])
    message = caught.value.format_message()
    assert "GEMINI_API_KEY (for gemini)" in message and "ANTHROPIC_API_KEY (for claude-sonnet-4.6)" in message
    monkeypatch.setenv("GEMINI_API_KEY", "x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "y")
    preflight([specs["gemini"], specs["claude-sonnet-4.6"]])  # no error once set
    local = ModelSpec(alias="mine", model="openai/served", api_base="http://127.0.0.1:8000/v1")
    preflight([local])  # a local server without api_key_env needs no key


def test_response_format_per_provider():
    schema = {"type": "object", "properties": {"a": {"type": "object", "additionalProperties": False}},
              "additionalProperties": False}
    gemini = ModelSpec(model="gemini/gemini-3-flash-preview")
    assert "additionalProperties" not in str(response_format(starting_level(gemini), schema, gemini.provider))
    thinking = ModelSpec(model="anthropic/claude-sonnet-4-6", extra_params={"thinking": {"type": "enabled"}})
    assert starting_level(thinking) == "prompt" and response_format("prompt", schema, "anthropic") is None
    assert starting_level(ModelSpec(model="anthropic/claude-sonnet-4-6")) == "json_schema"
    assert starting_level(ModelSpec(model="openai/x", supports_json_schema=False)) == "prompt"
    assert starting_level(ModelSpec(model="deepseek/deepseek-chat", supports_json_schema=True)) == "json_schema"
    assert starting_level(ModelSpec(model="deepseek/deepseek-chat")) == "prompt"
    assert response_format("json_schema", None, "openai") is None


def test_retry_after_parsing_and_backoff():
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds(None) is None
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random("backoff")
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        assert ceiling / 2 <= backoff_delay(policy, retry, None, rng) <= ceiling
    assert 5.0 <= backoff_delay(policy, 1, 5.0, rng) <= 6.0  # Retry-After wins over a short backoff
    assert backoff_delay(policy, 1, 100.0, rng) == 8.0  # but never beyond the cap


def test_rpm_limiter_paces_requests():
    limiter = EndpointLimiter(rpm=1200)  # 20 per second, a burst of at most 20

    async def go():
        async def one():
            async with limiter.slot():
                pass

        started = time.monotonic()
        await asyncio.gather(*(one() for _ in range(40)))
        return time.monotonic() - started

    elapsed = asyncio.run(go())
    assert 0.9 <= elapsed < 3.0  # 20 at once, the next 20 over one second
