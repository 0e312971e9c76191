"""What a researcher from inspect_ai, promptfoo or tau2-bench expects of a Python LLM tool:
`python -m intake_eval`, shell completion, a ./.env read (the real environment winning, `models`
saying where each key came from), inspect spellings answered with litellm's, `vllm/…` refused with
the server recipe, the version from the package metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.envfile import key_source, load_env_file

runner = CliRunner()


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI in its own process (a .env it reads must not leak into this one)."""
    clean = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    return subprocess.run([sys.executable, "-m", "intake_eval", *args], capture_output=True, text=True, cwd=cwd,
                          env={**clean, "COLUMNS": "200", **(env or {})}, timeout=300)


def test_python_dash_m_runs_the_cli_and_the_version_is_the_package_metadata(tmp_path):
    done = cli("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m intake_eval" in done.stdout and "demo" in done.stdout
    shown = cli("--version", cwd=tmp_path)
    assert shown.stdout.strip() == f"intake-eval {version('intake-eval')}"
    import intake_eval

    assert intake_eval.__version__ == version("intake-eval")
    init = (Path(intake_eval.__file__)).read_text()
    assert '__version__ = "' not in init  # one source: pyproject.toml through the metadata


def test_shell_completion_is_offered_and_completes_commands(tmp_path):
    helped = runner.invoke(app, ["--help"])
    assert "--install-completion" in helped.output and "--show-completion" in helped.output
    script_path = Path(sys.executable).parent / "intake-eval"  # the installed console script
    script = subprocess.run([str(script_path), "--show-completion", "bash"], capture_output=True, text=True,
                            env={**os.environ, "SHELL": "/bin/bash"}, cwd=tmp_path, timeout=120)
    assert script.returncode == 0 and "_INTAKE_EVAL_COMPLETE=complete_bash" in script.stdout
    completed = subprocess.run(
        [str(script_path)], capture_output=True, text=True,
        env={**os.environ, "_INTAKE_EVAL_COMPLETE": "complete_bash", "COMP_WORDS": "intake-eval phe",
             "COMP_CWORD": "1"}, cwd=tmp_path, timeout=120)
    assert "phenotypes" in completed.stdout.split()


def test_a_dotenv_key_is_seen_by_models_and_the_real_environment_wins(tmp_path):
    (tmp_path / ".env").write_text("TOGETHER_API_KEY=from-dotenv-1\nOPENAI_API_KEY=from-dotenv-2\n")
    done = cli("models", "--json", cwd=tmp_path, env={"OPENAI_API_KEY": "real-environment-3"})
    assert done.returncode == 0, done.stderr
    rows = {row["alias"]: row for row in json.loads(done.stdout)}
    assert rows["llama-3.3-70b"]["key_set"] is True and rows["llama-3.3-70b"]["key_source"] == ".env"
    assert rows["gpt-4o"]["key_set"] is True and rows["gpt-4o"]["key_source"] == "environment"
    assert rows["gemini"]["key_set"] is False and rows["gemini"]["key_source"] is None
    table = cli("models", cwd=tmp_path, env={"OPENAI_API_KEY": "real-environment-3"})
    assert "TOGETHER_API_KEY set (from .env)" in table.stdout
    assert "OPENAI_API_KEY set (from environment)" in table.stdout
    for secret in ("from-dotenv-1", "from-dotenv-2", "real-environment-3"):
        assert secret not in table.stdout + table.stderr + done.stdout


def test_the_env_file_loader_never_replaces_a_set_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("INTAKE_EVAL_TEST_SET", "kept")
    monkeypatch.setenv("INTAKE_EVAL_TEST_NEW", "placeholder")
    monkeypatch.delenv("INTAKE_EVAL_TEST_NEW")  # registered with monkeypatch, so it is removed again after
    (tmp_path / ".env").write_text("INTAKE_EVAL_TEST_SET=replaced\nINTAKE_EVAL_TEST_NEW=added\n")
    added = load_env_file(tmp_path)
    assert added == {"INTAKE_EVAL_TEST_NEW"}
    assert os.environ["INTAKE_EVAL_TEST_SET"] == "kept" and os.environ["INTAKE_EVAL_TEST_NEW"] == "added"
    assert key_source("INTAKE_EVAL_TEST_NEW", added) == ".env"
    assert key_source("INTAKE_EVAL_TEST_SET", added) == "environment"
    assert load_env_file(tmp_path / "nowhere") == frozenset()


@pytest.mark.parametrize(("written", "litellm"), [
    ("together/meta-llama/Llama-3.3-70B-Instruct-Turbo", "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"),
    ("google/gemini-2.5-flash", "gemini/gemini-2.5-flash"),
    ("grok/grok-4", "xai/grok-4"),
    ("fireworks/accounts/fireworks/models/qwen3-8b", "fireworks_ai/accounts/fireworks/models/qwen3-8b"),
])
def test_inspect_spellings_are_answered_with_the_litellm_spelling(written, litellm):
    done = runner.invoke(app, ["models", "--check", written])
    assert done.exit_code == 2
    assert f"'{written}' is the inspect_ai spelling; litellm spells it '{litellm}'" in done.output
    assert "Traceback" not in done.output and len(done.output.strip().splitlines()) == 1


def test_vllm_never_means_an_in_process_engine(tmp_path):
    done = runner.invoke(app, ["models", "--check", "vllm/Qwen/Qwen3-8B"])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1
    assert ("hosted_vllm/Qwen/Qwen3-8B with api_base: http://HOST:8000/v1" in done.output
            and "inside this process" in done.output)
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  mine:\n    model: vllm/Qwen/Qwen3-8B\n")
    listed = runner.invoke(app, ["models", "--models", str(models)])
    assert listed.exit_code == 2 and f"{models}: models.mine.model: 'vllm/Qwen/Qwen3-8B'" in listed.output
    run = runner.invoke(app, ["run", "--clinician", "vllm/Qwen/Qwen3-8B", "--patient", "offline/patient",
                              "--run-dir", str(tmp_path / "run")])
    assert run.exit_code == 2 and "hosted_vllm/Qwen/Qwen3-8B" in run.output


@pytest.mark.parametrize(("written", "recipe"), [
    ("sglang/Qwen/Qwen3-8B", "model: openai/Qwen/Qwen3-8B with api_base: http://HOST:30000/v1"),
    ("hf/Qwen/Qwen3-8B", "model: hosted_vllm/Qwen/Qwen3-8B with api_base"),
    ("openai-api/deepseek/deepseek-chat", "model: openai/<model> with its api_base and api_key_env"),
])
def test_inspect_ids_without_a_litellm_provider_get_the_recipe(written, recipe):
    done = runner.invoke(app, ["models", "--check", written])
    assert done.exit_code == 2 and recipe in done.output and len(done.output.strip().splitlines()) == 1
