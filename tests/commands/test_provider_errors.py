"""What the commands say and how they exit when a provider fails, over real loopback HTTP.

`models --check` sends one tiny request per model; `run` shows the server's words once, stops
sending to an endpoint after three identical deterministic failures and says why; a refused
connection ends `judge` at once naming the api_base; `run --formulation` exits non-zero when
formulations fail; the structured-output level a server took is recorded in the manifest.
"""

from __future__ import annotations

import json
import re
import socket


from intake_eval.core.records import Conversation
from intake_eval.core.store import (
    RunPaths,
    append_record,
    iter_json_lines,
    iter_records,
)
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.cli import invoke
from tests.helpers.judgment_builders import conversation, profile
from tests.helpers.server_dialects import instance_of, llama_cpp_python, schema_sent

TURNS = [("How have you been sleeping lately?", "I lie awake for hours."), ("Anything else?", "Not really.")]


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def models_file(tmp_path, **aliases: str) -> str:
    path = tmp_path / "models.yaml"
    lines = ["models:"]
    for alias, fields in aliases.items():
        lines.append(f"  {alias}: {{{fields}}}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---------------------------------------------------------------- models --check

def test_models_check_prints_latency_or_the_servers_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCKED_KEY", "sk-check-secret-0000")

    def respond(body, index):
        if body["model"] == "locked":
            return Reply(status=401, error_message="Incorrect API key provided")
        return Reply(content="OK")

    with FakeOpenAIServer(respond) as server:
        models = models_file(tmp_path, good=f"model: openai/good, api_base: '{server.url}'",
                             locked=f"model: openai/locked, api_base: '{server.url}', api_key_env: LOCKED_KEY")
        both = invoke("models", "--models", models, "--check", "good", "--check", "locked", "--check", "offline/judge")
        sent = [body["model"] for body in server.requests]
        alone = invoke("models", "--models", models, "--check", "good")
    assert both.exit_code == 1
    output = flat(both.output)
    assert "Incorrect API key provided" in output and "LOCKED_KEY" in output and "sk-check-secret" not in output
    assert re.search(r"ok good \(openai/good @ \S+\) in \d+\.\d\d s: answered .OK.", output)
    assert "offline participant: no request needed" in output and "failed: locked" in output
    assert sorted(sent) == ["good", "locked"]  # one request each (a 401 is not retried), none for offline
    assert alone.exit_code == 0, alone.output


def test_models_check_names_a_server_that_is_not_running(tmp_path):
    base = f"http://127.0.0.1:{_free_port()}/v1"
    result = invoke("models", "--models", models_file(tmp_path, gone=f"model: openai/gone, api_base: '{base}'"),
                    "--check", "gone")
    assert result.exit_code == 1
    assert f"cannot connect to {base}: connection refused" in flat(result.output)


def test_models_check_takes_a_studys_models(tmp_path):
    result = invoke("models", "--study", "configs/demo.yaml")
    assert result.exit_code == 0, result.output
    assert "offline/screener" in result.output and "offline/judge" in result.output


# ---------------------------------------------------------------- run

def _profiles(run_dir, count):
    for index in range(1, count + 1):
        append_record(RunPaths(run_dir).profiles, make_profile(index))


def test_run_stops_sending_after_three_identical_401s_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("DOC_KEY", "sk-run-secret-1111")
    run_dir = tmp_path / "run"
    _profiles(run_dir, 8)
    with FakeOpenAIServer(lambda body, i: Reply(status=401, error_message="Incorrect API key provided")) as server:
        models = models_file(tmp_path, doc=f"model: openai/doc, api_base: '{server.url}', api_key_env: DOC_KEY")
        result = invoke("run", "--clinician", "doc", "--patient", "offline/patient", "--turns", "2",
                        "--concurrency", "1", "--models", models, "--run-dir", str(run_dir))
        assert server.request_count == 3  # then nothing more is sent
    output = flat(result.output)
    assert result.exit_code == 1
    assert output.count("provider: ") == 2  # the 401 once, then why the endpoint stopped
    assert "Incorrect API key provided" in output and "$DOC_KEY" in output and "sk-run-secret" not in output
    assert "stopped: stopped sending to openai/doc@" in output and "after 3 identical failures" in output
    assert "5 conversations not started" in output
    records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
    assert len(records) == 3 and all(r.status == "model_error" for r in records)
    stage = json.loads((run_dir / "manifest.json").read_text())["stages"]["run"]
    assert "after 3 identical failures" in stage["stopped_endpoints"][f"openai/doc@{server.url}"]


def test_run_formulation_exits_non_zero_when_formulations_fail(tmp_path):
    example = {"chief_complaint": "...", "problems": ["..."], "principal_diagnosis": {"name": "...", "icd10": "..."},
               "differential": [], "risk_level": "low", "risk_evidence": "..."}

    def respond(body, index):
        if "case formulation" in json.dumps(body["messages"]):
            return Reply(content=json.dumps(example))  # the example copied, before and after the repair
        return Reply(content="How have you been sleeping?")

    run_dir = tmp_path / "run"
    _profiles(run_dir, 1)
    with FakeOpenAIServer(respond) as server:
        models = models_file(tmp_path, doc=f"model: openai/doc, api_base: '{server.url}'")
        args = ["run", "--clinician", "doc", "--patient", "offline/patient", "--turns", "2", "--formulation",
                "--models", models, "--run-dir", str(run_dir)]
        first = invoke(*args)
        again = invoke(*args)
    assert first.exit_code == 1, first.output
    assert "1 formulations were not valid after one repair" in flat(first.output)
    record = next(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
    assert record.ok and record.formulation["status"] == "invalid" and "placeholder" in record.formulation["error"]
    assert again.exit_code == 0, again.output  # an invalid formulation is the model's answer: nothing left to do


# ---------------------------------------------------------------- judge

def _judged_run_folder(tmp_path, clinicians=("c1", "c2")) -> RunPaths:
    paths = RunPaths(tmp_path / "run")
    append_record(paths.profiles, profile())
    for clinician in clinicians:
        # distinct transcripts: identical judge prompts would be answered from the response cache
        turns = [(f"{question} ({clinician})", answer) for question, answer in TURNS]
        append_record(paths.conversations(clinician), conversation(turns, clinician=clinician))
    return paths


def test_judge_against_a_server_that_is_not_running_fails_fast_naming_it(tmp_path):
    paths = _judged_run_folder(tmp_path, clinicians=[f"c{index}" for index in range(5)])
    base = f"http://127.0.0.1:{_free_port()}/v1"
    models = models_file(tmp_path, j=f"model: openai/j, api_base: '{base}'")
    result = invoke("judge", "--judge", "j", "--models", models, "--run-dir", str(paths.root))
    assert result.exit_code == 2
    output = flat(result.output)
    assert f"cannot connect to {base}: connection refused" in output and "Traceback" not in output
    retries = json.loads(paths.manifest.read_text())["stages"]["judge:j"]["retries"]["j"]
    assert retries["by_reason"] == {"connection_refused": 3} and retries["retries"] == 0


def test_judge_on_a_llama_cpp_python_server_records_the_level_that_worked(tmp_path):
    paths = _judged_run_folder(tmp_path)
    answer = lambda body: json.dumps(instance_of(schema_sent(body), "The patient says so."))  # noqa: E731
    with FakeOpenAIServer(llama_cpp_python(answer)) as server:
        models = models_file(tmp_path, j=f"model: openai/j, api_base: '{server.url}', temperature: 0.0")
        result = invoke("judge", "--judge", "j", "--models", models, "--run-dir", str(paths.root))
        requests = server.request_count
    assert result.exit_code == 0, result.output
    assert requests == 1 + 2 * 3  # one refused json_schema, then every turn of both conversations once
    output = flat(result.output)
    assert "refused response_format json_schema" in output and "Input should be 'text' or 'json_object'" in output
    manifest = json.loads(paths.manifest.read_text())
    assert manifest["structured_output"][f"openai/j@{server.url}"]["level"] == "json_object_schema"
    statuses = {row["status"] for f in paths.judgment_files() for row in iter_json_lines(f)}
    assert statuses == {"ok"}


# ---------------------------------------------------------------- qc-patient

def test_qc_patient_exits_non_zero_when_probes_fail(tmp_path):
    from tests.trust.test_patient_qc import _run_dir

    run_dir = _run_dir(tmp_path)
    # The patient answers nothing visible: every probe is a patient error, excluded from the rates.
    with FakeOpenAIServer(lambda body, i: Reply(content="")) as server:
        models = models_file(tmp_path, pat=f"model: openai/pat, api_base: '{server.url}'")
        result = invoke("qc-patient", "--patient", "pat", "--n", "1", "--models", models, "--run-dir", str(run_dir))
    assert result.exit_code == 1, result.output
    assert "probes failed" in flat(result.output)
