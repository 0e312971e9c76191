"""The post-intake formulation request through the real provider path (ModelPool → client → loopback
HTTP server): valid, invalid-then-repaired, permanently invalid, provider failure; and the hook in
the conversation loop (`run --formulation`), offline and over HTTP."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.catalog.load import load_catalog
from intake_eval.cli import app
from intake_eval.core.formulation import Formulation
from intake_eval.core.records import Conversation, ConversationTurn
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.interview.formulation import (
    formulation_of,
    formulation_status,
    request_formulation,
)
from intake_eval.interview.participants import clinician_messages
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.registry import resolve_spec
from intake_eval.llm.retry import RetryPolicy
from intake_eval.simulated import build_offline
from tests.helpers.convo_helpers import make_profile, write_generated_profiles
from tests.helpers.fakeserver import FakeOpenAIServer, Reply

FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, deadline_s=10)
VALID = {
    "chief_complaint": "low mood", "problems": ["low mood", "poor sleep"],
    "principal_diagnosis": {"name": "Major depressive disorder", "icd10": "F32.1"},
    "differential": [{"name": "Insomnia disorder", "icd10": "F51.01"}],
    "risk_level": "low", "risk_evidence": "Passive thoughts, no plan.",
}
TRANSCRIPT = clinician_messages("minimal", "I've been feeling low for months.", [
    ConversationTurn(turn=1, clinician="How have you been sleeping?", patient="Badly, I wake at four."),
])


def _pool(server: FakeOpenAIServer) -> ModelPool:
    spec = ModelSpec(alias="doc", model="openai/fake-doc", api_base=server.url, temperature=0.0, max_tokens=350)
    return ModelPool({"doc": spec}, retry_policy=FAST)


def _formulate(server: FakeOpenAIServer, results: list | None = None) -> dict:
    with _pool(server) as pool:
        return asyncio.run(request_formulation(pool.get("doc"), TRANSCRIPT, conversation_id="c1", turn=1, max_turns=12,
                                               on_result=results.append if results is not None else None))


def test_valid_answer_is_recorded_with_structured_output_in_the_same_context():
    results: list = []
    with FakeOpenAIServer(lambda body, i: Reply(content="```json\n" + json.dumps(VALID) + "\n```")) as server:
        record = _formulate(server, results)
        bodies = list(server.requests)
    assert record["status"] == "ok" and record["repaired"] is False
    assert formulation_of(record).principal_diagnosis.icd10 == "F32.1"
    assert len(bodies) == 1 and len(results) == 1 and results[0].usage.prompt_tokens > 0
    messages = bodies[0]["messages"]
    # The clinician's own context (system prompt, the patient as 'user'), then the instruction.
    assert messages[:-1] == TRANSCRIPT
    assert messages[-1]["role"] == "user" and "JSON" in messages[-1]["content"] and "risk_level" in messages[-1]["content"]
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == set(Formulation.model_fields)  # the schema follows the validating model
    assert schema["properties"]["risk_level"]["enum"] == ["none", "low", "moderate", "high"]
    assert not {"$ref", "default"} & set(re.findall(r'"([$\w]+)":', json.dumps(schema)))
    assert schema["required"] == list(schema["properties"]) and schema["additionalProperties"] is False
    assert bodies[0]["max_tokens"] >= 1000  # room for a whole formulation, whatever the turn cap


def test_invalid_then_repaired_quotes_the_error_once():
    replies = iter(["My impression is depression.", json.dumps(VALID)])
    with FakeOpenAIServer(lambda body, i: Reply(content=next(replies))) as server:
        record = _formulate(server)
        bodies = list(server.requests)
    assert record["status"] == "ok" and record["repaired"] is True
    assert len(bodies) == 2
    repair = bodies[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "My impression is depression."}
    assert "no JSON object in the answer" in repair[-1]["content"]


def test_permanently_invalid_is_recorded_not_raised():
    bad = dict(VALID, risk_level="severe")
    with FakeOpenAIServer(lambda body, i: Reply(content=json.dumps(bad))) as server:
        record = _formulate(server)
        bodies = list(server.requests)
    assert len(bodies) == 2
    assert record["status"] == "invalid" and "risk_level" in record["error"] and "after one repair" in record["error"]
    assert "severe" in record["answer"] and formulation_of(record) is None
    assert "risk_level" in bodies[1]["messages"][-1]["content"]


def test_provider_failure_is_recorded_with_its_kind():
    with FakeOpenAIServer(lambda body, i: Reply(status=401, error_message="bad key")) as server:
        record = _formulate(server)
    assert record["status"] == "provider_error: fatal" and record["error"]


def test_conversation_stays_ok_when_the_formulation_fails_and_the_patient_never_sees_it():
    """Clinician over HTTP (12 questions, then two unusable formulations); offline patient."""
    def respond(body, index):
        last = body["messages"][-1]["content"]
        if "case formulation" in last or "could not be used" in last:
            return Reply(content="{}")
        return Reply(content="How have you been sleeping lately?")

    profile = make_profile()
    patient = build_offline(resolve_spec("offline/patient", {}), load_catalog())
    with FakeOpenAIServer(respond) as server, _pool(server) as pool:
        item = PlannedConversation.of(profile, clinician="doc", patient_mode="tracked", formulation=True)
        record = asyncio.run(run_conversation(item, Participants(clinician=pool.get("doc"), patient=patient,
                                                                 patient_alias="offline/patient")))
        bodies = list(server.requests)
    assert record.status == "ok" and record.termination == "completed" and len(record.turns) == 12
    assert record.formulation["status"] == "invalid" and "chief_complaint" in record.formulation["error"]
    assert record.usage["formulation"].calls == 2 and record.usage["clinician"].calls == 12
    assert len(bodies) == 14
    assert all("case formulation" not in t.patient and "case formulation" not in t.clinician for t in record.turns)


def test_run_flag_turns_the_formulation_on_offline(tmp_path: Path):
    runner = CliRunner()
    base = ["run", "--clinician", "offline/screener", "--clinician", "offline/anchored", "--patient", "offline/patient",
            "--patient-mode", "tracked", "--turns", "12"]
    off_dir, on_dir = tmp_path / "off", tmp_path / "on"
    for run_dir in (off_dir, on_dir):
        run_dir.mkdir()
        write_generated_profiles(run_dir / "profiles.jsonl", 3)
    assert runner.invoke(app, [*base, "--run-dir", str(off_dir)]).exit_code == 0
    result = runner.invoke(app, [*base, "--formulation", "--run-dir", str(on_dir)])
    assert result.exit_code == 0, result.output

    def records(run_dir: Path) -> list[Conversation]:
        return [c for path in RunPaths(run_dir).conversation_files() for c in iter_records(path, Conversation)]

    assert all(c.formulation is None and "formulation" not in c.usage for c in records(off_dir))
    on = records(on_dir)
    assert len(on) == 6 and all(c.formulation["status"] == "ok" and c.usage["formulation"].calls == 1 for c in on)
    manifest = json.loads(RunPaths(on_dir).manifest.read_text())
    run_config = manifest["stages"]["run"]["config"]
    assert run_config["formulation"] is True and "formulation" in run_config["prompts"]
    # Switching it off on the same run folder is a changed configuration: refused without --force.
    refused = runner.invoke(app, [*base, "--no-formulation", "--run-dir", str(on_dir)])
    assert refused.exit_code == 2 and refused.output.startswith("error:") and "Traceback" not in refused.output


def test_stored_records_read_back_with_their_status():
    assert formulation_status(None) == "missing"
    assert formulation_status({"status": "ok", "repaired": False, "formulation": VALID}) == "ok"
    assert formulation_status({"status": "ok", "formulation": {"chief_complaint": "x"}}) == "invalid"  # edited by hand
    assert formulation_status({"status": "provider_error: exhausted", "error": "e"}) == "provider_error: exhausted"
    assert formulation_of({"status": "invalid", "error": "e"}) is None
