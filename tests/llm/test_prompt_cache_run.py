"""A priced loopback run whose server reports cached prompt tokens: the records carry the cached
tokens and their cost exactly (the server's counts are the truth), and `status` shows the share."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, append_record, iter_records
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply

IN, OUT, READ = 2e-6, 8e-6, 5e-7
PER_MESSAGE = 100  # the server bills 100 prompt tokens per message …
COMPLETION = 10


def _cached(messages: list[dict]) -> int:
    """… and serves from its cache everything but the last exchange (the previous call's prompt)."""
    return PER_MESSAGE * max(0, len(messages) - 2)


HIDDEN = ("insomnia", "alcohol_use", "suicidality", "panic")


def _judge_text(messages: list[dict]) -> str:
    turn = int(re.search(r"Label turn (\d+) only", messages[0]["content"]).group(1))
    return json.dumps({"turn": turn, "reasoning": "r", "question_type": "other", "patient_faithful": True,
                       "domains": [{"domain": d, "reasoning": "r", "asked_about": False, "disclosed": False}
                                   for d in HIDDEN]})


def _respond(body: dict, index: int) -> Reply:
    messages = body["messages"]
    if body["model"] == "jdg":  # one growing message per turn: a fixed cached share of it
        prompt = len(messages[0]["content"]) // 4
        return Reply(content=_judge_text(messages), prompt_tokens=prompt, completion_tokens=COMPLETION,
                     usage={"prompt_tokens_details": {"cached_tokens": prompt // 2}})
    usage = {"prompt_tokens_details": {"cached_tokens": _cached(messages)}}
    text = "How is your sleep?" if body["model"] == "doc" else "Mostly low and tired."
    return Reply(content=text, prompt_tokens=PER_MESSAGE * len(messages), completion_tokens=COMPLETION, usage=usage)


def _expected(bodies: list[dict]) -> tuple[int, int, float]:
    prompt = sum(PER_MESSAGE * len(b["messages"]) for b in bodies)
    cached = sum(_cached(b["messages"]) for b in bodies)
    return prompt, cached, (prompt - cached) * IN + cached * READ + COMPLETION * len(bodies) * OUT


def test_priced_loopback_run_reports_cached_tokens_and_their_cost_exactly(tmp_path: Path):
    run_dir = tmp_path / "run"
    for index in (1, 2):
        profile = make_profile(index)
        profile.demographics.name = f"Daniel{index}"
        append_record(RunPaths(run_dir).profiles, profile)
    prices = f"input_cost_per_token: {IN}, output_cost_per_token: {OUT}, cache_read_cost_per_token: {READ}"
    with FakeOpenAIServer(_respond) as server:
        models = tmp_path / "models.yaml"
        models.write_text("models:\n"
                          f"  doc: {{model: openai/doc, api_base: '{server.url}', {prices}}}\n"
                          f"  pat: {{model: openai/pat, api_base: '{server.url}', {prices}}}\n"
                          f"  jdg: {{model: openai/jdg, api_base: '{server.url}', max_tokens: 900, {prices}}}\n")
        result = CliRunner().invoke(app, ["run", "--clinician", "doc", "--patient", "pat", "--turns", "3",
                                          "--models", str(models), "--run-dir", str(run_dir), "--no-cache"])
        assert result.exit_code == 0, result.output
        # --no-cache: every call reaches the server (the two patients' first exchanges are alike)
        judged = CliRunner().invoke(app, ["judge", "--judge", "jdg", "--models", str(models), "--run-dir", str(run_dir),
                                          "--no-cache"])
        assert judged.exit_code == 0, judged.output
        bodies = {name: [b for b in server.requests if b["model"] == name] for name in ("doc", "pat", "jdg")}
    records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
    assert len(records) == 2 and all(r.ok for r in records)
    for role, model in (("clinician", "doc"), ("patient", "pat")):
        prompt, cached, cost = _expected(bodies[model])
        assert cached > 0
        assert sum(r.usage[role].prompt_tokens for r in records) == prompt
        assert sum(r.usage[role].cached_prompt_tokens for r in records) == cached
        assert sum(r.usage[role].cost_usd for r in records) == pytest.approx(cost, rel=1e-9)

    status = CliRunner().invoke(app, ["status", "--run-dir", str(run_dir), "--json"])
    assert status.exit_code == 0, status.output
    usage = json.loads(status.output)["stages"]["run"]["usage"]
    for model in ("doc", "pat"):
        prompt, cached, cost = _expected(bodies[model])
        assert (usage[model]["prompt_tokens"], usage[model]["cached_prompt_tokens"]) == (prompt, cached)
        assert usage[model]["cost_usd"] == pytest.approx(cost, rel=1e-9)
    shown = CliRunner().invoke(app, ["status", "--run-dir", str(run_dir)], terminal_width=80)
    share = sum(_expected(bodies["doc"])[1:2]) / _expected(bodies["doc"])[0]
    assert f"{share:.0%}" in shown.output and "p-cache" in shown.output
    assert f"${_expected(bodies['doc'])[2]:.4f}" in shown.output  # the dollars column still fits
    assert max(len(line) for line in shown.output.splitlines()) <= 80

    judge_prompt = sum(len(b["messages"][0]["content"]) // 4 for b in bodies["jdg"])
    judge_cached = sum(len(b["messages"][0]["content"]) // 4 // 2 for b in bodies["jdg"])
    assert usage_of(run_dir, "judge:jdg")["jdg"]["cached_prompt_tokens"] == judge_cached

    report = CliRunner().invoke(app, ["report", "--quiet", "--run-dir", str(run_dir)])
    assert report.exit_code == 0, report.output
    page = (run_dir / "report" / "index.html").read_text()
    summary = (run_dir / "report" / "summary.md").read_text()
    for text in (page, summary):  # the cache share per role in "Cost by role"
        assert "Cost by role" in text and "Prompt cache" in text
        assert f"{_expected(bodies['doc'])[1] / _expected(bodies['doc'])[0] * 100:.1f}%" in text  # clinician
        assert f"{_expected(bodies['pat'])[1] / _expected(bodies['pat'])[0] * 100:.1f}%" in text  # patient
        assert f"{judge_cached / judge_prompt * 100:.1f}%" in text  # judge


def usage_of(run_dir: Path, stage: str) -> dict:
    status = CliRunner().invoke(app, ["status", "--run-dir", str(run_dir), "--json"])
    return json.loads(status.output)["stages"][stage]["usage"]
