"""The recorded provider errors replayed through the real commands: what `run` sends, says and records
when the account is out of credit, a request is refused by a content policy, or a per-day quota is used
up; and the alias guard over the whole api_base, and the parameters extra_params may not replace."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, append_record, iter_records
from tests.conformance.replay import ReplayServer, recorded
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer


def flat(text: str) -> str:
    return " ".join(text.split())


def _run(run_dir, clinician: str, *extra: str):
    return CliRunner().invoke(app, ["run", "--clinician", clinician, "--patient", "offline/patient", "--turns", "2",
                                    "--concurrency", "1", "--run-dir", str(run_dir), *extra])


def _profiles(run_dir, count: int) -> None:
    for index in range(1, count + 1):
        append_record(RunPaths(run_dir).profiles, make_profile(index))


def _replayed_run(tmp_path, monkeypatch, recording: str, provider: str, model: str):
    run_dir = tmp_path / "run"
    _profiles(run_dir, 3)
    monkeypatch.setenv({"openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}[provider], "sk-replay-secret-77")
    with ReplayServer({"chat": recorded(recording)}) as server:
        for name, value in server.env(provider).items():
            monkeypatch.setenv(name, value)
        result = _run(run_dir, model)
        sent = len(server.calls("chat"))
    records = list(iter_records(RunPaths(run_dir).conversations(model), Conversation))
    return result, flat(result.output), sent, records, json.loads((run_dir / "manifest.json").read_text())


def test_run_stops_at_once_when_the_account_is_out_of_credit(tmp_path, monkeypatch):
    result, output, sent, records, manifest = _replayed_run(
        tmp_path, monkeypatch, "openai_429_insufficient_quota", "openai", "openai/gpt-4o")
    assert sent == 1  # no retries, no second conversation: 1 request, not 8 per conversation
    assert result.exit_code == 1
    assert "insufficient_quota — billing" in output and "add credit" in output and "sk-replay-secret" not in output
    assert "2 conversations not started" in output
    assert len(records) == 1 and records[0].status == "model_error"
    assert "billing" in next(iter(manifest["stages"]["run"]["stopped_endpoints"].values()))


def test_a_content_policy_refusal_fails_that_conversation_only(tmp_path, monkeypatch):
    result, output, sent, records, manifest = _replayed_run(
        tmp_path, monkeypatch, "openai_400_safety_system", "openai", "openai/gpt-4o")
    assert sent == 3 and len(records) == 3  # every conversation went ahead: different prompts, same words
    # the provider declined the request: a refusal, counted as one (status refused, its words kept)
    assert {record.status for record in records} == {"refused"}
    assert all("content policy refused this request" in record.refusal for record in records)
    assert "stopped sending" not in output and "stopped_endpoints" not in manifest["stages"]["run"]
    assert "content policy refused this request" in output and result.exit_code == 1


def test_a_used_up_daily_gemini_quota_stops_the_endpoint_and_is_shown_as_text(tmp_path, monkeypatch):
    result, output, sent, records, _ = _replayed_run(
        tmp_path, monkeypatch, "gemini_compat_429_retryinfo_array", "gemini", "gemini/gemini-2.5-flash")
    assert sent == 1 and result.exit_code == 1
    assert "a per-day quota is used up" in output and "You exceeded your current quota" in output
    assert "[{" not in output and "'error'" not in output


def _models(tmp_path, base: str, extra: str = "") -> str:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  doc:\n    model: openai/local\n    api_base: {base}\n{extra}")
    return str(path)


def test_the_alias_guard_tells_two_servers_on_one_machine_apart(tmp_path):
    """The README's own example: `openai/local` on port 8080 and on port 8000 are two models."""
    run_dir = tmp_path / "run"
    _profiles(run_dir, 1)
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        started = _run(run_dir, "doc", "--models", _models(tmp_path, first.url))
        _profiles(run_dir, 2)  # one more profile, so the rerun has work to do
        moved = _run(run_dir, "doc", "--models", _models(tmp_path, second.url))
        sent_to_second = second.request_count
    assert started.exit_code == 0, started.output
    assert f"127.0.0.1:{first.port}/v1" in (run_dir / "manifest.json").read_text()  # the port is kept
    assert moved.exit_code != 0 and sent_to_second == 0
    output = flat(moved.output)
    assert "different models" in output and f"//127.0.0.1:{second.port}/v1" in output


def test_extra_params_may_not_replace_what_the_records_name(tmp_path):
    for key, value in (("model", "other-model"), ("max_tokens", 4000), ("stream", True), ("n", 3)):
        models = _models(tmp_path, "http://127.0.0.1:9/v1", f"    extra_params:\n      {key}: {json.dumps(value)}\n")
        result = _run(tmp_path / "run", "doc", "--models", models)
        assert result.exit_code == 2
        assert f"models.doc.extra_params.{key}: may not be set here" in flat(result.output), key
        assert "Traceback" not in result.output


def test_the_manifest_and_the_guard_keep_the_whole_api_base_but_no_password():
    from intake_eval.llm.base import ModelSpec
    from intake_eval.runner.stage import guarded_spec

    spec = ModelSpec(alias="doc", model="openai/local", api_base="https://reader:pw-4411@gateway.example:8443/v1")
    assert guarded_spec(spec)["api_base"] == spec.public_dict()["api_base"] == "https://***@gateway.example:8443/v1"
    plain = ModelSpec(alias="doc", model="openai/local", api_base="http://127.0.0.1:8080/v1")
    assert guarded_spec(plain)["api_base"] == "http://127.0.0.1:8080/v1"


def test_a_claude_judge_whose_server_refuses_both_schema_fields_judges_with_the_prompt(tmp_path, monkeypatch):
    """A proxy that knows neither output_config (derived refusal, see test_structured) nor the beta header
    (the recorded Vertex rejection): the judge degrades to the prompt, finishes, and the manifest says so."""
    from tests.conformance.test_structured import OUTPUT_CONFIG_UNKNOWN, claude_level
    from tests.commands.test_judge import _run_folder
    from tests.judge.test_judging import _valid_answer

    def respond(request) -> dict:
        level = claude_level(request)
        if level == "json_schema":
            return OUTPUT_CONFIG_UNKNOWN
        if level == "json_schema_beta":
            return recorded("anthropic_400_beta_header_rejected")
        prompt = "".join(block.get("text", "") for block in request.body["messages"][0]["content"])
        answer = recorded("anthropic_cache_read_write")  # variation: its text replaced by a valid label
        answer["body"]["content"] = [{"type": "text", "text": _valid_answer({"messages": [{"content": prompt}]})}]
        return answer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance")
    with ReplayServer({"messages": respond}) as server:
        for name, value in server.env("anthropic").items():
            monkeypatch.setenv(name, value)
        paths = _run_folder(tmp_path)
        models = tmp_path / "models.yaml"
        models.write_text("models:\n  claude:\n    model: anthropic/claude-sonnet-4-5-20250929\n    temperature: 0.0\n"
                          "    max_tokens: 2000\n")
        result = CliRunner().invoke(app, ["judge", "--judge", "claude", "--models", str(models), "--run-dir",
                                          str(paths.root)])
        levels = [claude_level(request) for request in server.requests]
    assert result.exit_code == 0, result.output
    assert levels[:2] == ["json_schema", "json_schema_beta"] and set(levels[2:]) == {"prompt"}
    state = next(iter(json.loads(paths.manifest.read_text())["structured_output"].values()))
    assert state["level"] == "prompt" and set(state["rejected"]) == {"json_schema", "json_schema_beta"}
    assert "stopped" not in flat(result.output)
