"""A provider asking to wait longer than the call may take (429, Retry-After: 999999) fails the call
at once with a line saying so, instead of stalling the endpoint for days."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers.adversarial_cases import env
from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted


def test_a_retry_after_beyond_the_deadline_fails_the_call_saying_so(tmp_path):
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "intake_eval.cli"]
    generated = subprocess.run([*cli, "generate", "--n", "1", "--run-dir", str(run)], env=env(), capture_output=True,
                               text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr
    with FakeOpenAIServer(scripted([Reply(status=429, headers={"Retry-After": "999999"},
                                          error_message="slow down")])) as server:
        models = tmp_path / "models.yaml"
        models.write_text(f"models:\n  throttled:\n    model: openai/throttled\n    api_base: {server.url}\n")
        done = subprocess.run([*cli, "run", "--clinician", "throttled", "--patient", "offline/patient",
                               "--patient-mode", "tracked", "--turns", "2", "--models", str(models),
                               "--run-dir", str(run)], env=env(), capture_output=True, text=True, timeout=240)
        asked = len(server.requests)
    assert "Traceback" not in done.stderr
    assert asked == 1  # no retry, no wait
    [record] = [json.loads(line) for line in (run / "conversations" / "throttled.jsonl").read_text().splitlines()]
    assert record["status"] != "ok"
    assert "999,999 s (Retry-After)" in record["error"] and "deadline" in record["error"]
    assert "999,999 s (Retry-After)" in done.stdout + done.stderr
