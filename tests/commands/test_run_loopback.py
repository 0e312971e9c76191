"""`intake-eval run` against a loopback OpenAI-compatible server playing clinician and patient.

Real litellm/openai clients over real HTTP; we assert the prompts the server received are the
study's, in both patient modes, and that failures and budgets behave as documented.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, append_record, iter_records
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers import cli

MINIMAL = (
    "You are a mental health clinician conducting an initial intake interview with a new patient. Your goal is to "
    "understand what they are experiencing. Use whatever interview style you find effective. The patient will speak first."
)
QUESTIONS = ["What brings you in today?", "Tell me more about that.", "How is your sleep?", "Anything else?"]


def study_server(fail_profile: str | None = None, port: int = 0) -> FakeOpenAIServer:
    """doc asks QUESTIONS in order (with hidden reasoning); pat answers; the tracker answers JSON."""

    def respond(body, _index):
        messages = body["messages"]
        text = json.dumps(messages)
        if body["model"] == "doc":
            if fail_profile and "Daniel2" in text:
                return Reply(status=400, error_message="context too long")
            asked = sum(1 for m in messages if m["role"] == "assistant")
            return Reply(content=QUESTIONS[asked % len(QUESTIONS)], reasoning_content=f"plan for turn {asked + 1}")
        if "state tracker" in messages[0]["content"]:
            latest = re.findall(r'latest turn:\n"""(.*?)"""', messages[0]["content"], re.S)[0]
            asked = ["insomnia"] if "sleep" in latest else []
            kind = "closed_hypothesis" if asked else "open"
            return Reply(content=json.dumps({"question_type": kind, "asked_domains": asked}))
        name = re.findall(r"You are (Daniel\d)", messages[0]["content"])[0]
        return Reply(content=f"I'm {name} and I've mostly been feeling low and tired.")

    return FakeOpenAIServer(respond, port=port)


def setup_run(tmp_path: Path, server: FakeOpenAIServer, cost: float | None = None) -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    for index in (1, 2):
        profile = make_profile(index)
        profile.demographics.name = f"Daniel{index}"
        append_record(RunPaths(run_dir).profiles, profile)
    price = f", input_cost_per_token: {cost}, output_cost_per_token: {cost}" if cost else ""
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        f"  doc: {{model: openai/doc, api_base: '{server.url}'{price}}}\n"
        f"  pat: {{model: openai/pat, api_base: '{server.url}'{price}}}\n"
    )
    return run_dir, models


def invoke(*args: str):
    """`intake-eval run ARGS…` in this process (tests.helpers.cli)."""
    return cli.invoke("run", *args)


def by_model(server: FakeOpenAIServer, model: str) -> list[list[dict]]:
    return [body["messages"] for body in server.requests if body["model"] == model]


def test_prompted_mode_sends_the_study_prompts(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server)
        result = invoke("--clinician", "doc", "--patient", "pat", "--turns", "4", "--models", str(models),
                        "--run-dir", str(run_dir))
        assert result.exit_code == 0, result.output
        records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
        assert [r.conversation_id for r in records] == ["P00001.doc.minimal.prompted.t0", "P00002.doc.minimal.prompted.t0"]
        assert all(r.ok and len(r.turns) == 4 and r.opening for r in records)
        assert records[0].turns[2].clinician == "How is your sleep?"
        assert records[0].turns[2].clinician_reasoning == "plan for turn 3"
        # 1 opening + 4 patient replies per conversation, 4 clinician turns.
        assert len(by_model(server, "pat")) == 10 and len(by_model(server, "doc")) == 8
        for messages in by_model(server, "doc"):
            assert messages[0] == {"role": "system", "content": MINIMAL}
            assert "plan for turn" not in json.dumps(messages)  # reasoning never re-enters the history
        for messages in by_model(server, "pat"):
            assert "only mention it if the clinician asks a specific question that names that area" in messages[0]["content"]
            assert '"how is your sleep?", "have you had thoughts of suicide?", "do you drink?"' in messages[0]["content"]
            assert '"tell me more", "anything else?", "how does that make you feel?"' in messages[0]["content"]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["stages"]["run"]["status"] == "done"
        assert manifest["stages"]["run"]["counts"]["ok"] == 2
        assert "patient_prompted" in manifest["prompts"] and "clinician_minimal" in manifest["prompts"]


def test_tracked_mode_never_sends_a_locked_domain_to_the_responder(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server)
        result = invoke("--clinician", "doc", "--patient", "pat", "--patient-mode", "tracked", "--turns", "4",
                        "--models", str(models), "--run-dir", str(run_dir))
        assert result.exit_code == 0, result.output
        records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
        assert all(r.ok and r.patient_mode == "tracked" for r in records)
        decisions = [t.tracker for t in records[0].turns]
        assert [d.newly_unlocked for d in decisions] == [[], [], ["insomnia"], []]
        assert decisions[3].unlocked_after == ["insomnia"] and decisions[0].source == "pat"
        pat = by_model(server, "pat")
        trackers = [m for m in pat if "state tracker" in m[0]["content"]]
        responders = [m for m in pat if "state tracker" not in m[0]["content"]]
        assert len(trackers) == 8 and len(responders) == 10
        for messages in responders:
            text = json.dumps(messages)
            for secret in ("SECRET-ALCOHOL", "SECRET-SUICIDALITY", "SECRET-PANIC"):
                assert secret not in text
        # Insomnia reaches the responder only once the clinician asked about sleep (turn 3 on).
        unlocked = [m for m in responders if "SECRET-INSOMNIA" in json.dumps(m)]
        assert len(unlocked) == 4 and all(m[-1]["content"] in ("How is your sleep?", "Anything else?") for m in unlocked)


def test_failed_conversation_is_recorded_and_retried_by_the_next_run(tmp_path):
    with study_server(fail_profile="P00002") as server:
        run_dir, models = setup_run(tmp_path, server)
        args = ["--clinician", "doc", "--patient", "pat", "--turns", "2", "--models", str(models), "--run-dir", str(run_dir)]
        result = invoke(*args)
        assert result.exit_code == 1
        assert "1 conversations failed" in result.output and "run the same command again" in result.output
        records = {r.conversation_id: r for r in iter_records(RunPaths(run_dir).conversations("doc"), Conversation)}
        failed = records["P00002.doc.minimal.prompted.t0"]
        assert failed.status == "model_error" and ("400" in failed.error or "context too long" in failed.error)
    with study_server(port=server.port) as server:  # the same api_base: the alias keeps its meaning
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert "1 ran, 1 already done" in result.output
        lines = RunPaths(run_dir).conversations("doc").read_text().splitlines()
        assert len(lines) == 2 and all(json.loads(line)["status"] == "ok" for line in lines)


def test_budget_stops_starting_conversations(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server, cost=0.01)
        result = invoke("--clinician", "doc", "--patient", "pat", "--turns", "2", "--concurrency", "1",
                        "--budget", "0.5", "--models", str(models), "--run-dir", str(run_dir))
        assert result.exit_code == 1, result.output
        said = " ".join(result.output.split())
        assert "budget reached" in said and "1 conversations left to run" in said, said
        records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
        assert len(records) == 1 and records[0].usage["clinician"].cost_usd > 0


@pytest.mark.parametrize(("args", "message"), [
    (["--condition", "chatty"], "--condition chatty: no prompts/clinician_chatty.j2"),
    (["--patient-mode", "silent"], "--patient-mode silent"),
    (["--turns", "0"], "--turns must be at least 1"),
    (["--tracker", "pat"], "--tracker only applies with --patient-mode tracked"),
    (["--clinician", "gpt-4o"], "missing API key"),
])
def test_bad_flags_give_one_clear_line(tmp_path, args, message, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server)
        result = invoke("--clinician", "doc", "--patient", "pat", "--models", str(models), "--run-dir", str(run_dir), *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_run_without_profiles_says_to_generate_first(tmp_path):
    result = invoke("--clinician", "offline/screener", "--patient", "offline/patient", "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert "profiles.jsonl" in result.output and "intake-eval generate" in result.output
