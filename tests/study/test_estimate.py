"""`intake-eval estimate`: the seed study's full table offline; offline studies cost 0; unknown
prices are shown as unknown, never as zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAPER_ALIASES = ["qwen3-235b", "gpt-4o", "deepseek-v3", "llama-3.3-70b", "llama-3.1-8b", "qwen3-8b", "kimi-k2.6",
                 "gemini", "claude-sonnet-4.6"]


def estimate_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["estimate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_paper_estimate_prints_a_full_table_offline(monkeypatch):
    for variable in ("OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY", "TOGETHER_API_KEY"):
        monkeypatch.delenv(variable, raising=False)  # no keys needed to estimate
    result = CliRunner().invoke(app, ["estimate", str(ROOT / "configs" / "paper.yaml")])
    assert result.exit_code == 0, result.output
    for text in (*PAPER_ALIASES, "generate", "run", "judge", "total", "Wall time", "108 profiles", "540 conversations"):
        assert text in result.output, text


def test_paper_estimate_counts_the_seed_study_calls():
    data = estimate_json(str(ROOT / "configs" / "paper.yaml"))
    lines = data["lines"]
    calls = {(line["stage"], line["role"], line["alias"]): line["calls"] for line in lines}
    for clinician in ("deepseek-v3", "llama-3.3-70b", "llama-3.1-8b", "qwen3-8b", "kimi-k2.6"):
        assert calls[("run", "clinician", clinician)] == 108 * 12
    assert calls[("run", "patient", "gpt-4o")] == 108 + 540 * 12  # one shared opening per profile
    for judge in ("gemini", "claude-sonnet-4.6"):
        assert calls[("judge", "judge", judge)] == 540 * 13  # turns 0..12, per-turn mode
    assert 108 * 5 <= calls[("generate", "generator", "qwen3-235b")] <= 108 * 6  # one call per domain
    by_alias = {line["alias"]: line for line in lines}
    # Reasoning clinicians pay for hidden reasoning; their cap is the larger one.
    assert by_alias["qwen3-8b"]["reasoning_tokens"] > 0 and by_alias["deepseek-v3"]["reasoning_tokens"] == 0
    for line in lines:
        assert line["prompt_tokens"] > line["calls"] * 50  # real prompts were rendered and counted
        assert line["completion_cap_tokens"] >= line["completion_tokens"]
        if line["dollars"] is not None:
            assert line["dollars"] > 0 and line["dollars_at_cap"] >= line["dollars"]
    # Prompts grow with the conversation: the patient's average prompt is far above its system prompt.
    assert data["wall_s"]["study"] >= data["wall_s"]["run"] > 0
    known = [line for line in lines if line["dollars"] is not None]
    assert known, "litellm's local price table should price some of the study's models"
    if data["unknown_price_models"]:
        assert data["dollars"] is None
    else:
        assert data["dollars"] > 0
    # Provider prompt caching, replayed on the real prompts and priced at the published cached rates,
    # puts the study at least 30 % below the same study without it.
    assert data["dollars"] <= 0.70 * data["dollars_without_cache"]
    for line in lines:
        assert 0 <= line["cached_prompt_tokens"] + line["cache_write_tokens"] <= line["prompt_tokens"]
        if line["cache_read_cost_per_token"] is None:  # no published cached price: no saving claimed
            assert line["dollars"] == pytest.approx(line["dollars_without_cache"], rel=1e-9)  # summed apart
    assert by_alias["claude-sonnet-4.6"]["cache_write_tokens"] > 0  # breakpoints write, then are read
    assert by_alias["gpt-4o"]["cache_write_tokens"] == 0 and by_alias["gpt-4o"]["cached_prompt_tokens"] > 0
    assert data["assumptions"]["prompt_cache"]["claude-sonnet-4.6"]["breakpoints"] is True


def test_offline_demo_costs_nothing():
    data = estimate_json(str(ROOT / "configs" / "demo.yaml"))
    assert data["dollars"] == 0.0
    assert all(line["offline"] and line["dollars"] == 0.0 for line in data["lines"])
    assert data["conversations"] == 108  # 36 profiles × 3 offline clinicians


def test_unknown_price_is_unknown_not_zero(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  mystery:\n    model: openai/mystery-model-without-a-price\n    api_key_env: MYSTERY_KEY\n")
    config = tmp_path / "study.yaml"
    config.write_text("name: x\nprofiles: {n: 2}\npatient: {model: offline/patient}\nclinicians: [mystery]\n"
                      "judges: [offline/judge]\nturns: 2\n")
    data = estimate_json(str(config), "--models", str(models))
    mystery = [line for line in data["lines"] if line["alias"] == "mystery"]
    assert mystery and all(line["dollars"] is None and line["input_cost_per_token"] is None for line in mystery)
    assert data["dollars"] is None and data["unknown_price_models"] == ["mystery"]
    table = CliRunner().invoke(app, ["estimate", str(config), "--models", str(models)])
    assert table.exit_code == 0, table.output
    assert "unknown" in table.output and "Unknown price for: mystery" in table.output
