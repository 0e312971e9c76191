"""A small study with every role served by a loopback OpenAI-compatible server (real litellm, real
HTTP): every artifact of the run-folder contract exists and is consistent, no secret reaches a
file, a rerun sends zero requests, and the estimate matches the recorded usage.

Estimate tolerance (stated): calls exact per stage and model; prompt tokens within 20 %,
completion tokens within 30 % and dollars within 30 % per stage — the estimate counts tokens with
one offline tokenizer and assumes answer lengths, the server counts ~4 characters per token.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation, Judgment, Profile
from intake_eval.core.store import RunPaths, iter_records
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.study_responder import StudyResponder

SECRET = "sk-loopback-secret-0123456789"
CLINICIANS = ["fake-chat", "fake-reasoner"]
JUDGES = ["fake-judge", "fake-cross"]
CONFIG = """\
name: loopback
seed: 11
profiles: {n: 3, mode: stratified}
generator: fake-gen
patient: {model: fake-patient, mode: prompted}
clinicians: [fake-chat, fake-reasoner]
judges: [fake-judge, fake-cross]
turns: 3
formulation: true
concurrency: 8
"""


def models_file(tmp_path: Path, url: str) -> Path:
    entries = {
        "fake-gen": "model: openai/gen-model",
        "fake-patient": "model: openai/patient-model\n    input_cost_per_token: 0.000002\n    output_cost_per_token: 0.000008",
        "fake-chat": "model: openai/chat-model\n    max_tokens: 350",
        "fake-reasoner": "model: openai/reasoner-model\n    reasoning: true\n    max_tokens: 2500",
        "fake-judge": "model: openai/judge-model\n    temperature: 0.0\n    max_tokens: 2000",
        "fake-cross": "model: openai/cross-model\n    temperature: 0.0\n    max_tokens: 2000",
    }
    text = "models:\n" + "".join(
        f"  {alias}:\n    {body}\n    api_base: {url}\n    api_key_env: LOOPBACK_KEY\n" for alias, body in entries.items())
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def loopback(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPBACK_KEY", SECRET)
    responder = StudyResponder(reasoning_models=("reasoner-model",))
    with FakeOpenAIServer(responder) as server:
        config = tmp_path / "study.yaml"
        config.write_text(CONFIG)
        yield server, config, models_file(tmp_path, server.url), tmp_path / "run"


def _stage_usage(data: dict) -> dict[tuple[str, str], dict]:
    """(stage, alias) → recorded usage from the manifest (generate records it under its role)."""
    out = {}
    for name, stage in data["stages"].items():
        for key, usage in (stage.get("usage") or {}).items():
            alias = data["models"]["generator"][0]["alias"] if key == "generator" else key
            out[(name.split(":")[0], alias)] = usage
    return out


@pytest.mark.slow
def test_loopback_study_every_role_artifacts_consistent_and_estimate_matches(loopback):
    server, config, models, run_dir = loopback
    result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir), "--models", str(models)])
    assert result.exit_code == 0, result.output
    paths = RunPaths(run_dir)
    data = json.loads(paths.manifest.read_text())

    # --- the run-folder contract
    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    assert len(profiles) == 3
    conversations = {}
    for clinician in CLINICIANS:
        records = list(iter_records(paths.conversations(clinician), Conversation))
        assert len(records) == 3 and all(c.ok and len(c.turns) == 3 and c.opening for c in records)
        assert all(c.formulation["status"] == "ok" and c.formulation["formulation"]["risk_level"] == "low"
                   for c in records), records[0].formulation
        conversations.update({c.conversation_id: c for c in records})
    assert {c.profile_id for c in conversations.values()} == set(profiles)
    for judge in JUDGES:
        judged = {}
        for clinician in CLINICIANS:
            for j in iter_records(paths.judgments(judge, clinician), Judgment):
                judged[j.conversation_id] = j
        assert set(judged) == set(conversations)  # every conversation judged by every judge
        for cid, judgment in judged.items():
            assert judgment.ok and [t.turn for t in judgment.turns] == [0, 1, 2, 3]
            hidden = set(profiles[conversations[cid].profile_id].hidden_domains)
            assert all(set(t.domains) == hidden for t in judgment.turns)
    with open(paths.metrics("conversations"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(conversations) * len(JUDGES)
    assert {(r["conversation_id"], r["judge"]) for r in rows} == {(c, j) for c in conversations for j in JUDGES}
    for name in ("cells", "domains", "trajectories", "agreement"):
        assert paths.metrics(name).exists()
    assert (paths.report_dir / "index.html").exists()
    assert set(data["models"]) >= {"generator", "patient", "clinician", "judge"}

    # --- every HTTP request is accounted for; no secret reaches any file
    first = data["study"]["history"][0]
    assert first["calls"] == server.request_count
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert all(SECRET not in json.dumps(body) for body in server.requests)

    # --- rerun: zero requests, zero calls, report rebuilt
    before = server.request_count
    again = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir), "--models", str(models)])
    assert again.exit_code == 0, again.output
    assert server.request_count == before
    assert json.loads(paths.manifest.read_text())["study"]["history"][-1]["calls"] == 0

    # --- the estimate against what was recorded
    from intake_eval.study.pipeline import estimate_config

    estimate = estimate_config(config, models_file=models)
    recorded = _stage_usage(data)
    by_key: dict[tuple[str, str], dict] = {}
    for line in estimate.lines:
        entry = by_key.setdefault((line.stage, line.alias), {"calls": 0, "prompt": 0, "completion": 0, "dollars": 0.0})
        entry["calls"] += line.calls
        entry["prompt"] += line.prompt_tokens
        entry["completion"] += line.completion_tokens
        entry["dollars"] += line.dollars or 0.0
    assert set(by_key) == set(recorded), (sorted(by_key), sorted(recorded))
    for key, guess in by_key.items():
        real = recorded[key]
        print(f"{key}: calls {guess['calls']}/{real['calls']}, prompt {guess['prompt'] / real['prompt_tokens']:.2f}x, "
              f"completion {guess['completion'] / real['completion_tokens']:.2f}x")
        assert guess["calls"] == real["calls"], key
        assert guess["prompt"] == pytest.approx(real["prompt_tokens"], rel=0.20), key
        assert guess["completion"] == pytest.approx(real["completion_tokens"], rel=0.30), key
    patient_dollars = recorded[("run", "fake-patient")]["cost_usd"]
    assert patient_dollars > 0
    assert by_key[("run", "fake-patient")]["dollars"] == pytest.approx(patient_dollars, rel=0.30)


def test_a_failing_clinician_leaves_the_study_incomplete_but_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPBACK_KEY", SECRET)
    inner = StudyResponder()

    def responder(body, index):
        if body.get("model") == "reasoner-model":  # this clinician's endpoint refuses every request
            return Reply(status=400, error_message="model not found")
        return inner(body, index)

    with FakeOpenAIServer(responder) as server:
        config = tmp_path / "study.yaml"
        config.write_text(CONFIG.replace("n: 3", "n: 2").replace("turns: 3", "turns: 2"))
        run_dir = tmp_path / "run"
        result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir),
                                          "--models", str(models_file(tmp_path, server.url))])
    assert result.exit_code == 1, result.output
    assert "incomplete" in result.output and "2 conversations failed" in result.output
    paths = RunPaths(run_dir)
    assert (paths.report_dir / "index.html").exists()
    failed = list(iter_records(paths.conversations("fake-reasoner"), Conversation))
    assert len(failed) == 2 and all(not c.ok and c.error for c in failed)
    with open(paths.metrics("conversations"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(JUDGES) and {r["clinician"] for r in rows} == {"fake-chat"}
    data = json.loads(paths.manifest.read_text())
    assert data["stages"]["run"]["status"] == "incomplete" and data["stages"]["run"]["counts"]["failed"] == 2
    assert data["study"]["last_run"]["status"] == "incomplete"


@pytest.mark.slow
def test_study_killed_mid_run_resumes_to_a_complete_consistent_folder(tmp_path):
    """SIGKILL a real `intake-eval study` process mid-run; the rerun finishes every conversation and
    judges every one exactly once per judge (including those finished before the kill)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    inner = StudyResponder()

    def slow(body, index):
        reply = inner(body, index)
        reply.delay = 0.05
        return reply

    with FakeOpenAIServer(slow) as server:
        config = tmp_path / "study.yaml"
        config.write_text(CONFIG.replace("n: 3", "n: 4").replace("concurrency: 8", "concurrency: 2"))
        run_dir = tmp_path / "run"
        command = [sys.executable, "-m", "intake_eval.cli", "study", str(config), "--run-dir", str(run_dir),
                   "--models", str(models_file(tmp_path, server.url))]
        env = {**os.environ, "LOOPBACK_KEY": SECRET}
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        first_file = RunPaths(run_dir).conversations("fake-chat")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if first_file.exists() and first_file.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.02)
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        process.send_signal(signal.SIGKILL)
        process.wait()
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr[-2000:]

    paths = RunPaths(run_dir)
    ids = []
    for clinician in CLINICIANS:
        lines = paths.conversations(clinician).read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert len(records) == 4 and all(r["status"] == "ok" for r in records)
        assert [r["conversation_id"] for r in records] == sorted(r["conversation_id"] for r in records)
        ids += [r["conversation_id"] for r in records]
        for judge in JUDGES:
            judged = [json.loads(line)["conversation_id"] for line in
                      paths.judgments(judge, clinician).read_text().splitlines()]
            assert judged == sorted(r["conversation_id"] for r in records)  # each once, compacted
    with open(paths.metrics("conversations"), newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(ids) * len(JUDGES)
