"""Chaos: a whole study (every role on a loopback OpenAI-compatible server, real HTTP) while the
server fails a seeded fraction of calls: 20 % HTTP 500, 10 % 429 with Retry-After, 5 % a truncated
JSON body, 2 % a hang past the client timeout. The study must complete with every profile,
conversation and judgment present exactly once, every retry counted in the manifest (attempts =
requests the server saw; retries by reason = faults injected), and nothing failed silently.
"""

from __future__ import annotations

import csv
import json
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation, Judgment, Profile
from intake_eval.core.store import RunPaths, iter_json_lines, iter_records
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.study_responder import StudyResponder

TIMEOUT_S = 2.0  # the aliases' client timeout; a hang answers after HANG_S
HANG_S = 2.5
RETRY_AFTER = "0.2"
# (fault, probability): the brief's mix; whatever is left answers normally.
MIX = (("500", 0.20), ("429", 0.10), ("truncated", 0.05), ("hang", 0.02))
FORCED = {1: "500", 2: "429", 3: "truncated", 4: "hang"}  # every kind happens at least once
CLINICIANS = ["chaos-chat", "chaos-second"]
JUDGES = ["chaos-judge", "chaos-cross"]
CONFIG = """\
name: chaos
seed: 5
profiles: {n: 2, mode: stratified}
generator: chaos-gen
patient: {model: chaos-patient, mode: prompted}
clinicians: [chaos-chat, chaos-second]
judges: [chaos-judge, chaos-cross]
turns: 2
concurrency: 8
"""
REASONS = {"500": "5xx", "429": "429", "truncated": "bad_body", "hang": "timeout"}


class ChaosResponder:
    """StudyResponder's answers, with a seeded fault per request index."""

    def __init__(self, seed: str = "chaos"):
        self.inner = StudyResponder()
        self.seed = seed
        self.faults: Counter[str] = Counter()
        self.lock = threading.Lock()

    def fault_for(self, index: int) -> str | None:
        if index in FORCED:
            return FORCED[index]
        draw = random.Random(f"{self.seed}|{index}").random()
        for fault, probability in MIX:
            if draw < probability:
                return fault
            draw -= probability
        return None

    def __call__(self, body: dict, index: int) -> Reply:
        fault = self.fault_for(index)
        if fault is not None:
            with self.lock:
                self.faults[fault] += 1
        if fault == "500":
            return Reply(status=500, error_message="injected internal error")
        if fault == "429":
            return Reply(status=429, headers={"Retry-After": RETRY_AFTER}, error_message="injected rate limit")
        if fault == "hang":
            return Reply(content="too late", delay=HANG_S)
        reply = self.inner(body, index)
        if fault == "truncated":
            whole = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}]})
            return Reply(status=200, raw_body=whole[: len(whole) // 2].encode())
        return reply


def chaos_models(tmp_path: Path, url: str) -> Path:
    aliases = ["chaos-gen", "chaos-patient", *CLINICIANS, *JUDGES]
    text = "models:\n" + "".join(
        f"  {alias}:\n    model: openai/{alias}-model\n    api_base: {url}\n    timeout_s: {TIMEOUT_S}\n"
        f"    max_tokens: 2000\n" for alias in aliases)
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_study_completes_under_injected_faults_with_every_record_once_and_every_retry_counted(tmp_path, monkeypatch):
    # The shipped retry policy with a shorter first backoff (the pool's policy is not an alias
    # parameter); Retry-After, jitter, attempts and the deadline work exactly as shipped.
    from intake_eval.llm import pool as pool_module
    from intake_eval.llm.retry import RetryPolicy

    monkeypatch.setattr(pool_module, "RetryPolicy", lambda: RetryPolicy(base_delay_s=0.05, max_delay_s=2.0))
    responder = ChaosResponder()
    with FakeOpenAIServer(responder) as server:
        config = tmp_path / "study.yaml"
        config.write_text(CONFIG)
        models = chaos_models(tmp_path, server.url)
        run_dir = tmp_path / "run"
        result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir), "--models", str(models)])
        requests = server.request_count
    assert result.exit_code == 0, result.output
    assert all(responder.faults[kind] >= 1 for kind in REASONS), responder.faults
    paths = RunPaths(run_dir)

    # --- every record present exactly once (raw lines, not deduplicated views)
    profile_ids = [d["profile_id"] for d in iter_json_lines(paths.profiles)]
    assert len(profile_ids) == 2 == len(set(profile_ids))
    assert len(list(iter_records(paths.profiles, Profile))) == 2  # every line a valid profile
    conversation_ids = set()
    for clinician in CLINICIANS:
        records = list(iter_records(paths.conversations(clinician), Conversation))
        ids = [c.conversation_id for c in records]
        assert len(ids) == len(set(ids)) == 2, ids
        assert all(c.status == "ok" and len(c.turns) == 2 for c in records), [c.status for c in records]
        conversation_ids |= set(ids)
    for judge in JUDGES:
        judged = []
        for clinician in CLINICIANS:
            records = list(iter_records(paths.judgments(judge, clinician), Judgment))
            assert all(j.status == "ok" for j in records), [(j.status, j.errors) for j in records]
            judged += [j.conversation_id for j in records]
        assert sorted(judged) == sorted(conversation_ids)  # exactly once each
    with open(paths.metrics("conversations"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    keys = [(r["conversation_id"], r["judge"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(conversation_ids) * len(JUDGES)
    assert (paths.report_dir / "index.html").exists()

    # --- nothing failed silently: every stage done, every call accounted for
    manifest = json.loads(paths.manifest.read_text())
    for name, stage in manifest["stages"].items():
        assert stage["status"] == "done", (name, stage.get("status"), stage.get("counts"))
    history = manifest["study"]["history"]
    assert len(history) == 1 and history[0]["status"] == "done"
    usage = history[0]["usage"]
    # usage counts the attempts of calls that returned an answer (retries included); the retry stats
    # below count every attempt, so they must match the server exactly
    assert sum(u["attempts"] for u in usage.values()) <= requests

    # --- every retry counted, by reason, in the manifest. On a loaded machine a normal answer can
    # also exceed the client timeout: such extra timeouts are retries too, and the only slack allowed.
    retries = history[0]["retries"]
    assert set(retries) == set(usage)  # every alias that called the server
    calls = sum(u["calls"] - u["cache_hits"] for u in usage.values())
    assert sum(r["failures"] for r in retries.values()) == 0
    assert sum(r["attempts"] for r in retries.values()) == requests, (retries, usage)
    assert sum(r["retries"] for r in retries.values()) == requests - calls  # every failed attempt was retried
    by_reason = Counter()
    for stats in retries.values():
        by_reason.update(stats["by_reason"])
    assert sum(by_reason.values()) == requests - calls
    assert set(by_reason) <= set(REASONS.values()), by_reason  # no unexplained kind of failure
    spurious = by_reason["timeout"] - responder.faults["hang"]
    assert 0 <= spurious <= 2 + requests // 8, (by_reason, responder.faults)
    for kind, reason in REASONS.items():
        if kind != "hang":  # a slow faulty answer may be counted as a timeout instead
            assert responder.faults[kind] - spurious <= by_reason[reason] <= responder.faults[kind], \
                (kind, by_reason, responder.faults)
    assert sum(r["waited_s"] for r in retries.values()) > 0
