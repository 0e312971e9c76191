"""`intake-eval models` and the key preflight through the CLI."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from intake_eval.cli import app

runner = CliRunner()


def test_models_table_shows_aliases_and_key_status(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-visible-nowhere-111")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = runner.invoke(app, ["models"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for alias in ("llama-3.3-70b", "kimi-k2.6", "gpt-4o", "gemini", "claude-sonnet-4.6", "qwen3-235b", "offline/patient"):
        assert alias in result.output
    assert "OPENAI_API_KEY set" in result.output and "GEMINI_API_KEY missing" in result.output
    assert "sk-visible-nowhere-111" not in result.output


def test_models_json_with_extra_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-visible-nowhere-222")
    extra = tmp_path / "local.yaml"
    extra.write_text("models:\n  my-server:\n    model: openai/served\n    api_base: http://127.0.0.1:8000/v1\n    rpm: 600\n")
    result = runner.invoke(app, ["models", "--models", str(extra), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["alias"]: row for row in json.loads(result.output)}
    assert rows["my-server"]["key_env"] is None and rows["my-server"]["key_set"] is None
    assert rows["my-server"]["rpm"] == 600
    assert rows["gpt-4o"]["key_env"] == "OPENAI_API_KEY" and rows["gpt-4o"]["key_set"] is True
    assert "sk-visible-nowhere-222" not in result.output


def test_preflight_failure_names_the_missing_variable(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    result = runner.invoke(app, ["models", "--check", "gemini", "--check", "offline/judge"])
    assert result.exit_code == 2
    assert "error: missing API key: set the environment variable GEMINI_API_KEY (for gemini)" in result.output
    assert "Traceback" not in result.output


def test_bad_models_file_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  x:\n    model: openai/a\n    rpn: 5\n")
    result = runner.invoke(app, ["models", "--models", str(bad)])
    assert result.exit_code == 2
    assert f"error: {bad}: models.x.rpn: unknown key" in result.output
