"""Secrets: with a recognisable fake API key in the environment, a full loopback study (every role on
an OpenAI-compatible server over real HTTP, the CLI in a real subprocess) writes the key nowhere:
not in any file of the run folder, not on stdout/stderr of study, status, report or show — even
when the provider echoes the rejected key back in a 401 error, as some do."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.study_responder import StudyResponder

SECRET = "sk-test-SECRET-7f3a9c2e41d8b6a0"
CONFIG = """\
name: secrets
seed: 4
profiles: {n: 2, mode: stratified}
generator: s-gen
patient: {model: s-patient, mode: tracked, tracker: s-tracker}
clinicians: [s-chat, s-rejected]
judges: [s-judge, s-cross]
turns: 2
concurrency: 4
"""


def scan(blob: bytes) -> list[str]:
    """Where the key (or a long piece of it) appears."""
    found = []
    for piece in (SECRET, SECRET[8:], SECRET[-12:]):
        if piece.encode() in blob:
            found.append(piece)
    return found


@pytest.mark.slow
def test_a_full_loopback_run_writes_the_api_key_nowhere(tmp_path):
    inner = StudyResponder()

    def responder(body, index):
        if body.get("model") == "rejected-model":  # a provider that echoes the bad key back
            return Reply(status=401, error_message=f"Incorrect API key provided: {SECRET}. Find your key at ...")
        return inner(body, index)

    aliases = {"s-gen": "gen", "s-patient": "patient", "s-tracker": "tracker", "s-chat": "chat",
               "s-rejected": "rejected", "s-judge": "judge", "s-cross": "cross"}
    with FakeOpenAIServer(responder) as server:
        models = tmp_path / "models.yaml"
        models.write_text("models:\n" + "".join(
            f"  {alias}:\n    model: openai/{name}-model\n    api_base: {server.url}\n    api_key_env: FAKE_PROVIDER_KEY\n"
            f"    max_tokens: 2000\n" for alias, name in aliases.items()))
        config = tmp_path / "study.yaml"
        config.write_text(CONFIG)
        run_dir = tmp_path / "run"
        env = {**os.environ, "FAKE_PROVIDER_KEY": SECRET, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "LITELLM_MODE": "PRODUCTION", "INTAKE_EVAL_LOG_LEVEL": "DEBUG", "LITELLM_LOG": "DEBUG"}
        cli = [sys.executable, "-m", "intake_eval.cli"]
        outputs = []
        study = subprocess.run([*cli, "study", str(config), "--run-dir", str(run_dir), "--models", str(models)],
                               env=env, capture_output=True, timeout=300, check=False)
        outputs.append(study)
        assert study.returncode == 1, study.stderr.decode()[-2000:]  # the rejected clinician's conversations failed
        assert b"Traceback" not in study.stderr
        for args in (["status"], ["status", "--json"], ["report"], ["show", "P00000.s-rejected.minimal.tracked.t0"],
                     ["show", "P00000.s-chat.minimal.tracked.t0", "--reasoning"]):
            result = subprocess.run([*cli, *args, "--run-dir", str(run_dir)], env=env, capture_output=True, timeout=120,
                                    check=False)
            assert result.returncode == 0, (args, result.stderr.decode()[-1000:])
            outputs.append(result)
        # the key was really in use: every request carried it
        assert server.headers and all(h.get("Authorization") == f"Bearer {SECRET}" for h in server.headers)
        assert all(SECRET not in str(body) for body in server.requests)

    rejected = (run_dir / "conversations" / "s-rejected.jsonl").read_text()
    assert "Incorrect API key provided" in rejected and "***" in rejected  # the echo was kept, the key masked
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) > 10
    leaks = {str(p): scan(p.read_bytes()) for p in files}
    assert not any(leaks.values()), {k: v for k, v in leaks.items() if v}
    for result in outputs:
        assert not scan(result.stdout) and not scan(result.stderr), (result.args, result.stdout[-500:], result.stderr[-500:])


PASSWORD = "pw-SECRET-9d1e77c0b3"


@pytest.mark.parametrize("command", [["study", "{config}"], ["run", "--clinician", "s-chat", "--patient", "offline/patient"],
                                     ["models"], ["estimate", "{config}"]])
def test_credentials_inside_an_api_base_are_refused_unechoed_and_reach_no_artifact(tmp_path, command):
    """`api_base: http://user:PASSWORD@host/v1`: one line naming the file and alias, never the
    password; nothing is written that could keep it (manifest, records, report, stage log)."""
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  s-chat:\n    model: openai/chat\n"
                      f"    api_base: http://proxy-user:{PASSWORD}@127.0.0.1:9/v1\n")
    config = tmp_path / "study.yaml"
    config.write_text(CONFIG.replace("s-gen", "offline/generator").replace("s-patient", "offline/patient")
                      .replace(", tracker: s-tracker", "").replace("[s-chat, s-rejected]", "[s-chat]")
                      .replace("[s-judge, s-cross]", "[offline/judge]"))
    run_dir = tmp_path / "run"
    args = [part.format(config=config) for part in command]
    extra = ["--models", str(models)] + ([] if command[0] in ("models", "estimate") else ["--run-dir", str(run_dir)])
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
    done = subprocess.run([sys.executable, "-m", "intake_eval.cli", *args, *extra], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert str(models) in lines[0] and "models.s-chat.api_base" in lines[0] and "credentials" in lines[0]
    assert PASSWORD not in done.stdout + done.stderr and "proxy-user" not in done.stdout + done.stderr
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and p != models and PASSWORD.encode() in p.read_bytes()]
    assert not leaks, leaks


def test_credentials_inside_extra_params_are_refused_before_they_reach_the_manifest(tmp_path):
    """extra_params reach the manifest and the report's methods table: a credential header or key there is
    refused by name (without echoing it); counts that merely mention tokens are not credentials."""
    from typer.testing import CliRunner

    from intake_eval.cli import app

    for params, where in (("extra_headers: {Authorization: Bearer sk-live-0451}", "extra_params.extra_headers.Authorization"),
                          ("x-api-key: sk-live-0451", "extra_params.x-api-key")):
        models = tmp_path / "models.yaml"
        models.write_text("models:\n  doc:\n    model: openai/local\n    api_base: http://127.0.0.1:9/v1\n"
                          f"    extra_params: {{{params}}}\n")
        result = CliRunner().invoke(app, ["models", "--models", str(models)])
        assert result.exit_code == 2, result.output
        assert where in " ".join(result.output.split()) and "sk-live-0451" not in result.output
    allowed = tmp_path / "allowed.yaml"
    allowed.write_text("models:\n  doc:\n    model: openai/local\n    api_base: http://127.0.0.1:9/v1\n"
                       "    extra_params: {max_completion_tokens: 64, extra_headers: {HTTP-Referer: example}}\n")
    result = CliRunner().invoke(app, ["models", "--models", str(allowed)])
    assert result.exit_code == 0, result.output
