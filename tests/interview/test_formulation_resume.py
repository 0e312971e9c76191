"""Resume never drops a formulation: a provider-failed formulation is requested again by the next
`run --formulation` / `study`, in the clinician's own rebuilt context; an invalid one is not; turning
formulations on for a run made without them adds them (loopback HTTP server and offline participants)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.interview.plan import RunSettings, plan_conversations
from intake_eval.interview.stage import compact_conversations, run_conversations
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.retry import RetryPolicy
from intake_eval.simulated import OfflineParticipants
from tests.helpers.convo_helpers import write_generated_profiles
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.commands.test_run_loopback import QUESTIONS, invoke, setup_run

VALID = {
    "chief_complaint": "low mood", "problems": ["low mood", "poor sleep"],
    "principal_diagnosis": {"name": "Major depressive disorder", "icd10": "F32.1"},
    "differential": [{"name": "Insomnia disorder", "icd10": "F51.01"}],
    "risk_level": "low", "risk_evidence": "Passive thoughts, no plan.",
}


def is_formulation(body: dict) -> bool:
    last = body["messages"][-1]["content"]
    return "case formulation" in last or "could not be used" in last


def server(formulation_reply, port: int = 0) -> FakeOpenAIServer:
    """doc asks QUESTIONS; pat answers as DanielN; a formulation request gets formulation_reply(name)."""

    def respond(body, _index):
        text = json.dumps(body["messages"])
        if body["model"] == "doc":
            if is_formulation(body):
                return formulation_reply("Daniel1" if "Daniel1" in text else "Daniel2")
            asked = sum(1 for m in body["messages"] if m["role"] == "assistant")
            return Reply(content=QUESTIONS[asked % len(QUESTIONS)])
        name = "Daniel1" if "Daniel1" in body["messages"][0]["content"] else "Daniel2"
        return Reply(content=f"I'm {name} and I've mostly been feeling low and tired.")

    return FakeOpenAIServer(respond, port=port)


def records(run_dir: Path, alias: str = "doc") -> dict[str, Conversation]:
    return {c.conversation_id: c for c in iter_records(RunPaths(run_dir).conversations(alias), Conversation)}


def said(result) -> str:
    """CLI output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def formulation_bodies(fake: FakeOpenAIServer) -> list[dict]:
    return [body for body in fake.requests if body["model"] == "doc" and is_formulation(body)]


def test_provider_error_formulation_is_requested_again_in_the_same_context_invalid_is_not(tmp_path):
    first = {"Daniel1": Reply(status=401, error_message="bad key"), "Daniel2": Reply(content="no idea, sorry")}
    with server(lambda name: first[name]) as fake:
        run_dir, models = setup_run(tmp_path, fake)
        args = ["--clinician", "doc", "--patient", "pat", "--turns", "3", "--formulation", "--models", str(models),
                "--run-dir", str(run_dir)]
        result = invoke(*args)
        failed_context = [b["messages"] for b in formulation_bodies(fake) if "Daniel1" in json.dumps(b["messages"])]
    assert result.exit_code == 1, result.output  # formulations failed: the command says so in its exit code
    assert "1 formulations failed at the provider" in said(result) and "run the same command again" in said(result)
    before = records(run_dir)
    one, two = before["P00001.doc.minimal.prompted.t0"], before["P00002.doc.minimal.prompted.t0"]
    assert one.ok and one.formulation["status"] == "provider_error: fatal" and "401" in one.formulation["error"]
    assert two.ok and two.formulation["status"] == "invalid"
    assert len(failed_context) == 1

    with server(lambda name: Reply(content=json.dumps(VALID)), port=fake.port) as fake:  # the same api_base
        again = invoke(*args)
        bodies = list(fake.requests)
    assert again.exit_code == 0, again.output
    assert "formulations requested for 1 conversations already on disk (ok: 1)" in said(again)
    assert "failed at the provider" not in again.output
    # Only the failed formulation was asked again: no clinician turn, no patient call, not the invalid one.
    assert len(bodies) == 1 and is_formulation(bodies[0])
    assert bodies[0]["messages"] == failed_context[0]  # the clinician's own context, rebuilt from the record
    after = records(run_dir)
    fixed = after["P00001.doc.minimal.prompted.t0"]
    assert fixed.formulation["status"] == "ok" and fixed.formulation["formulation"]["principal_diagnosis"]["icd10"] == "F32.1"
    assert fixed.turns == one.turns and fixed.opening == one.opening and fixed.usage["clinician"] == one.usage["clinician"]
    assert fixed.usage["formulation"].calls == 1
    assert after["P00002.doc.minimal.prompted.t0"] == two  # an invalid formulation is an outcome, kept
    lines = RunPaths(run_dir).conversations("doc").read_text().splitlines()
    assert len(lines) == 2  # compacted: the rewritten record replaced the old one
    manifest = json.loads(RunPaths(run_dir).manifest.read_text())
    assert manifest["stages"]["run"]["last_invocation"]["formulations"] == {"ok": 1}


def test_exhausted_retries_on_500s_are_requested_again_by_the_next_run(tmp_path):
    fast = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, deadline_s=10)
    attempts = {"formulation": 0}

    def first(_name):
        attempts["formulation"] += 1
        return Reply(status=500, error_message="overloaded")

    def run(fake: FakeOpenAIServer, run_dir: Path) -> None:
        specs = {alias: ModelSpec(alias=alias, model=f"openai/{alias}", api_base=fake.url, temperature=0.0)
                 for alias in ("doc", "pat")}
        settings = RunSettings(clinicians=["doc"], patient="pat", turns=2, formulation=True)
        from intake_eval.interview.plan import load_profiles

        plan = plan_conversations(load_profiles(RunPaths(run_dir)), settings)
        with ModelPool(specs, retry_policy=fast, use_cache=False, offline=OfflineParticipants()) as pool:
            asyncio.run(run_conversations(plan, pool, paths=RunPaths(run_dir), patient="pat", concurrency=2))
        compact_conversations(RunPaths(run_dir), ["doc"])

    with server(first) as fake:
        run_dir, _ = setup_run(tmp_path, fake)
        run(fake, run_dir)
    assert attempts["formulation"] == 4  # two conversations × two attempts each
    assert all(c.ok and c.formulation["status"] == "provider_error: exhausted" for c in records(run_dir).values())
    with server(lambda name: Reply(content=json.dumps(VALID))) as fake:
        run(fake, run_dir)
        assert len(fake.requests) == 2 and all(is_formulation(b) for b in fake.requests)
    assert all(c.formulation["status"] == "ok" for c in records(run_dir).values())


def test_turning_formulations_on_adds_them_to_the_conversations_on_disk(tmp_path):
    """Offline: `run --formulation` over a run made without it requests each formulation; the files equal
    those of a run that had formulations from the start. Turning them off again is refused plainly."""
    runner = CliRunner()
    base = ["run", "--clinician", "offline/screener", "--clinician", "offline/anchored", "--patient", "offline/patient",
            "--patient-mode", "tracked", "--turns", "6"]
    later, fresh = tmp_path / "later", tmp_path / "fresh"
    for run_dir in (later, fresh):
        run_dir.mkdir()
        write_generated_profiles(run_dir / "profiles.jsonl", 3)
    assert runner.invoke(app, [*base, "--run-dir", str(later)]).exit_code == 0
    assert all(c.formulation is None for c in records(later, "offline/screener").values())
    added = runner.invoke(app, [*base, "--formulation", "--run-dir", str(later)])
    assert added.exit_code == 0, added.output
    assert "formulations requested for 6 conversations already on disk (ok: 6)" in said(added)
    assert runner.invoke(app, [*base, "--formulation", "--run-dir", str(fresh)]).exit_code == 0
    for alias in ("offline/screener", "offline/anchored"):
        assert RunPaths(later).conversations(alias).read_bytes() == RunPaths(fresh).conversations(alias).read_bytes()
    stage = json.loads(RunPaths(later).manifest.read_text())["stages"]["run"]
    fresh_stage = json.loads(RunPaths(fresh).manifest.read_text())["stages"]["run"]
    assert stage["formulation_added"] is True and stage["config_hash"] == fresh_stage["config_hash"]

    rerun = runner.invoke(app, [*base, "--formulation", "--run-dir", str(later)])
    assert rerun.exit_code == 0 and "formulations requested" not in rerun.output  # nothing left to request
    refused = runner.invoke(app, [*base, "--run-dir", str(later)])
    assert refused.exit_code == 2 and refused.output.startswith("error:")
    assert "made with post-intake formulations; pass --formulation" in said(refused)


STUDY = """
name: small
seed: 7
profiles: {{n: 4, mode: stratified}}
generator: offline/generator
patient: {{model: offline/patient, mode: tracked}}
clinicians: [offline/screener, offline/anchored]
turns: 6
judges: [offline/judge]
formulation: {formulation}
concurrency: 8
qc: {{enabled: false}}
"""


def test_study_with_formulation_switched_on_adds_them_without_rerunning_or_rejudging(tmp_path):
    config, run_dir = tmp_path / "small.yaml", tmp_path / "run"
    config.write_text(STUDY.format(formulation="false"), encoding="utf-8")
    first = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert first.exit_code == 0, first.output
    paths = RunPaths(run_dir)
    before = {alias: records(run_dir, alias) for alias in ("offline/screener", "offline/anchored")}
    judged = {path: path.read_bytes() for path in paths.judgment_files()}
    assert not paths.metrics("diagnosis").exists()

    config.write_text(STUDY.format(formulation="true"), encoding="utf-8")
    second = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert second.exit_code == 0, second.output
    for alias, old in before.items():
        new = records(run_dir, alias)
        assert set(new) == set(old) and len(new) == 4
        for cid, conversation in new.items():
            assert conversation.formulation["status"] == "ok" and conversation.turns == old[cid].turns
    assert {path: path.read_bytes() for path in paths.judgment_files()} == judged  # judgments kept, not redone
    assert paths.metrics("diagnosis").exists() and 'id="diagnosis"' in paths.report_index.read_text(encoding="utf-8")
