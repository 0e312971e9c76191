"""Answers without visible text and answers cut at the cap, replayed from REAL recorded provider answers.

Each recording in ../shared/conformance/ is served by a loopback server (tests/conformance/replay.py)
to the real HTTP client inside the real `intake-eval run` / `judge` / `status` / `report` commands; the
assertions are on the conversation records, their reasons, and the counts in status and metrics/.
A variation of a recording is built here from the recorded body, with a comment saying what changed.
"""

from __future__ import annotations

import asyncio
import copy
import csv
import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation, Judgment
from intake_eval.core.store import RunPaths, append_record, iter_records
from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend
from tests.conformance.replay import ReplayRequest, ReplayServer, recorded
from tests.helpers.convo_helpers import make_profile

TURNS = "3"


def _by_model(answers: dict[str, Any]):
    """The chat route: each model id gets its recording (a list is played in order, the last repeated)."""
    played: dict[str, int] = {}

    def answer(request: ReplayRequest) -> dict[str, Any]:
        chosen = answers[request.body["model"]]
        if isinstance(chosen, list):
            index = played.get(request.body["model"], 0)
            played[request.body["model"]] = index + 1
            return chosen[min(index, len(chosen) - 1)]
        return chosen

    return answer


def _setup(tmp_path: Path, server: ReplayServer, extra: str = "") -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    append_record(RunPaths(run_dir).profiles, make_profile(1))
    models = tmp_path / "models.yaml"
    models.write_text("models:\n"
                      f"  doc: {{model: openai/doc, api_base: '{server.url}', max_tokens: 100}}\n"
                      f"  pat: {{model: openai/pat, api_base: '{server.url}'}}\n"
                      f"  judge-x: {{model: openai/judge-x, api_base: '{server.url}'}}\n" + extra)
    return run_dir, models


def _cli(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _run(run_dir: Path, models: Path, *flags: str, clinician: str = "doc", patient: str = "offline/patient"):
    return _cli("run", "--clinician", clinician, "--patient", patient, "--turns", TURNS, "--run-dir", str(run_dir),
                "--models", str(models), *flags)


def _conversation(run_dir: Path, clinician: str = "doc") -> Conversation:
    (record,) = list(iter_records(RunPaths(run_dir).conversations(clinician), Conversation))
    return record


def _status_answers(run_dir: Path) -> dict[str, Any]:
    result = _cli("status", "--json", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["answers"]


def _metrics(run_dir: Path, name: str) -> list[dict[str, str]]:
    with open(RunPaths(run_dir).metrics(name), newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_content_filter_with_empty_content_fails_the_conversation_as_refused_not_ended(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_content_filter_empty")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        result = _run(run_dir, models)
        calls = len(server.calls("chat"))
    record = _conversation(run_dir)
    assert record.status == "refused" and record.termination == "refused" and not record.ok
    assert record.failed_role == "clinician" and record.turns == []
    assert "finish_reason=content_filter" in record.error and record.error.startswith("clinician doc at turn 1")
    assert calls == 1  # a filter is not asked again: the same request is filtered again
    assert record.usage["clinician"].prompt_tokens == 1296  # the refused call was paid for and is counted
    assert "1 failed: clinician refused" in result.output and result.exit_code == 1
    assert "1 conversations failed (refused: 1)" in result.output and "add --no-cache" in " ".join(result.output.split())
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert (arm["conversations"], arm["ok"], arm["clinician_refused"], arm["clinician_empty_answer"]) == (1, 0, 1, 0)
    _cli("report", "--run-dir", str(run_dir))
    (row,) = _metrics(run_dir, "answers")
    assert (row["clinician"], row["clinician_refused"], row["failed"]) == ("doc", "1", "1")
    (per_conversation,) = _metrics(run_dir, "answers_by_conversation")
    assert per_conversation["status"] == "refused" and per_conversation["failed_role"] == "clinician"
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    banner = "doc: 1 of 1 conversations failed on an answer without visible text (1 refused, 0 empty)"
    assert 'id="answers-banner"' in page and banner in page
    assert banner in (run_dir / "report" / "summary.md").read_text(encoding="utf-8")


def test_openai_message_refusal_is_read_and_its_words_kept(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openai_refusal_docs")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
    record = _conversation(run_dir)
    assert record.status == "refused"
    assert record.refusal == "I'm sorry, I cannot assist with that request."
    assert "I'm sorry, I cannot assist with that request." in record.error


def test_the_refusal_field_is_read_through_litellm_too(tmp_path):
    spec = ModelSpec(alias="doc", model="openai/doc", api_base="")
    with ReplayServer({"chat": recorded("openai_refusal_docs")}) as server:
        spec = spec.model_copy(update={"api_base": server.url})
        backend = ProviderBackend(spec, client="litellm")
        result = asyncio.run(backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}])))
    assert result.refusal == "I'm sorry, I cannot assist with that request." and result.finish_reason == "stop"


def test_whitespace_is_sampled_once_more_then_the_conversation_fails_as_empty(tmp_path):
    plain = recorded("openai_gpt4o_plain")
    blank = copy.deepcopy(plain)
    blank["body"]["choices"][0]["message"]["content"] = "  \n "  # changed: the visible text is whitespace only
    with ReplayServer({"chat": _by_model({"doc": blank})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
        calls = len(server.calls("chat"))
    record = _conversation(run_dir)
    assert record.status == "empty_answer" and record.failed_role == "clinician" and calls == 2
    assert "no visible text" in record.error and "after 2 samples" in record.error
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert arm["clinician_empty_answer"] == 1 and arm["clinician_refused"] == 0


def test_an_empty_answer_followed_by_a_real_one_is_a_normal_turn(tmp_path):
    plain = recorded("openai_gpt4o_plain")
    null = copy.deepcopy(plain)
    null["body"]["choices"][0]["message"]["content"] = None  # changed: content null (no text at all)
    with ReplayServer({"chat": _by_model({"doc": [null, plain]})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
        sent = [call.body for call in server.calls("chat")]
    record = _conversation(run_dir)
    assert record.ok and len(record.turns) == int(TURNS)
    assert record.turns[0].clinician == "The capital of France is Paris."
    assert sent[0] == sent[1]  # the same request again: a fresh sample, not a different question
    assert record.usage["clinician"].calls == int(TURNS) + 1


def test_a_tool_call_only_answer_is_no_answer(tmp_path):
    plain = recorded("openai_gpt4o_plain")
    tool = copy.deepcopy(plain)
    # changed: the answer is one tool call and no content, finish_reason tool_calls
    tool["body"]["choices"][0]["message"].update(content=None, tool_calls=[
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}])
    tool["body"]["choices"][0]["finish_reason"] = "tool_calls"
    with ReplayServer({"chat": _by_model({"doc": tool})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
    record = _conversation(run_dir)
    assert record.status == "empty_answer" and "tool call only" in record.error


def test_a_reasoning_model_cut_mid_thought_has_no_visible_text(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("together_r1_length_midthink")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
        calls = len(server.calls("chat"))
    record = _conversation(run_dir)
    assert record.status == "empty_after_length" and record.failed_role == "clinician" and calls == 1
    assert "max_tokens=100" in record.error


def test_a_visible_answer_cut_at_the_cap_is_kept_and_flagged_per_turn_and_role(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_gemini_length_visible")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        result = _run(run_dir, models)
    record = _conversation(run_dir)
    assert record.ok and len(record.turns) == int(TURNS)
    assert all(turn.truncated == ["clinician"] for turn in record.turns)
    assert all(turn.finish_reason == {"clinician": "length", "patient": "stop"} for turn in record.turns)
    assert record.truncated == {"clinician": int(TURNS)} and record.opening_finish_reason == "stop"
    assert "3 clinician answers cut at the token cap (100%)" in result.output
    shown = CliRunner().invoke(app, ["show", record.conversation_id, "--run-dir", str(run_dir)],
                               env={"COLUMNS": "1000"}).output  # no wrapping inside the phrases looked for
    assert "answers cut at the token cap: clinician 3" in shown and shown.count("(cut at the token cap)") == 3
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert (arm["clinician_truncated"], arm["clinician_answers"], arm["clinician_truncated_share"]) == (3, 3, 1.0)
    assert (arm["patient_truncated"], arm["patient_truncated_share"]) == (0, 0.0)
    _cli("report", "--run-dir", str(run_dir))
    (per_conversation,) = _metrics(run_dir, "answers_by_conversation")
    assert per_conversation["clinician_truncated"] == "3" and per_conversation["patient_truncated"] == "0"
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert "doc: 3 of 3 clinician answers (100%) were cut at the token cap and kept" in page
    _cli("judge", "--judge", "offline/judge", "--run-dir", str(run_dir), "--models", str(models))
    _cli("report", "--run-dir", str(run_dir))
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'data-metric="no_text"[^>]*>0<span class="sub">100(\.0)?% cut</span>', page)
    shards = "".join(path.read_text(encoding="utf-8") for path in (run_dir / "report" / "conversations").glob("*.js"))
    assert shards.count('"x": ["clinician"]') + shards.count('"x":["clinician"]') == int(TURNS)


def test_on_truncation_fail_fails_the_conversation_at_the_first_cut(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_gemini_length_visible")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, "--on-truncation", "fail")
    record = _conversation(run_dir)
    assert record.status == "truncated" and record.failed_role == "clinician" and record.turns == []
    assert "max_tokens=100" in record.error and "finish_reason=length" in record.error
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert arm["failed_truncated"] == 1
    bad = _run(run_dir, models, "--on-truncation", "sometimes")
    assert bad.exit_code == 2 and "--on-truncation sometimes" in bad.output


def test_the_patient_refusing_is_the_patients_failure_with_its_reason(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openai_gpt4o_plain"),
                                          "pat": recorded("openrouter_content_filter_empty")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, patient="pat")
    record = _conversation(run_dir)
    assert record.status == "refused" and record.failed_role == "patient" and record.opening == ""
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert (arm["patient_refused"], arm["clinician_refused"]) == (1, 0)


def test_llamacpp_server_answer_cut_at_the_cap_is_flagged(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("llamacpp_xllamacpp_real_0")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
    record = _conversation(run_dir)
    assert record.ok and record.truncated == {"clinician": int(TURNS)}


def test_claude_stop_reason_refusal_is_a_refusal(tmp_path):
    claude = recorded("anthropic_cache_read")
    # changed: Claude declined — stop_reason refusal, no text blocks
    claude["body"]["stop_reason"] = "refusal"
    claude["body"]["content"] = []
    with ReplayServer({"messages": claude}) as server:
        run_dir, models = _setup(tmp_path, server, extra=(
            f"  claude: {{model: anthropic/claude-sonnet-4-5, api_base: '{server.root}', max_tokens: 100}}\n"))
        _run(run_dir, models, clinician="claude")
        calls = len(server.calls("messages"))
    record = _conversation(run_dir, "claude")
    assert record.status == "refused" and record.refusal == "stop_reason: refusal" and calls == 1
    assert "finish_reason=content_filter" in record.error


def test_a_judge_refusal_is_kept_counted_and_never_read_as_labels(tmp_path):
    with ReplayServer({"chat": _by_model({"judge-x": recorded("openai_refusal_docs")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, clinician="offline/screener")
        _cli("judge", "--judge", "judge-x", "--run-dir", str(run_dir), "--models", str(models))
        calls = len(server.calls("chat"))
    (judgment,) = list(iter_records(RunPaths(run_dir).judgments_dir / "judge-x" / "offline__screener.jsonl", Judgment))
    assert judgment.status == "refused" and judgment.turns == []
    assert "I'm sorry, I cannot assist with that request." in judgment.errors[0]
    assert calls == 1  # neither repaired nor the other turns asked: the conversation is retried as a whole
    judges = _status_answers(run_dir)["judges"]
    assert judges == [{"judge": "judge-x", "clinician": "offline/screener", "judgments": 1, "ok": 0, "refused": 1,
                       "judge_error": 0, "provider_error": 0, "truncated_answers": 0}]


def test_an_empty_opening_sampled_again_keeps_the_usage_of_both_answers(tmp_path):
    plain = recorded("openai_gpt4o_plain")
    blank = copy.deepcopy(plain)
    blank["body"]["choices"][0]["message"]["content"] = ""  # changed: empty content, finish_reason still stop
    with ReplayServer({"chat": _by_model({"doc": plain, "pat": [blank, plain]})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, patient="pat")
        patient_calls = [call for call in server.calls("chat") if call.body["model"] == "pat"]
    record = _conversation(run_dir)
    assert record.ok and record.opening == "The capital of France is Paris."
    recorded_prompt = plain["body"]["usage"]["prompt_tokens"]
    assert len(patient_calls) == 2 + int(TURNS)
    assert record.usage["patient"].prompt_tokens == recorded_prompt * len(patient_calls)


def test_a_refusing_tracker_is_the_trackers_failure(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openai_gpt4o_plain"),
                                          "trk": recorded("openai_refusal_docs")})}) as server:
        run_dir, models = _setup(tmp_path, server, extra=f"  trk: {{model: openai/trk, api_base: '{server.url}'}}\n")
        _run(run_dir, models, "--patient-mode", "tracked", "--tracker", "trk")
        tracker_calls = [call for call in server.calls("chat") if call.body["model"] == "trk"]
    record = _conversation(run_dir)
    assert record.status == "refused" and record.failed_role == "tracker" and len(tracker_calls) == 1
    assert record.error.startswith("tracker trk at turn 1")
    assert record.refusal == "I'm sorry, I cannot assist with that request."
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert (arm["tracker_refused"], arm["clinician_refused"], arm["patient_refused"]) == (1, 0, 0)


def test_a_refused_formulation_is_recorded_with_its_words_and_counted(tmp_path):
    def doc(request: ReplayRequest) -> dict[str, Any]:
        # the formulation asks for JSON against a schema; the recording is OpenAI's structured-output refusal
        return recorded("openai_refusal_docs" if "response_format" in request.body else "openai_gpt4o_plain")

    with ReplayServer({"chat": doc}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, "--formulation")
    record = _conversation(run_dir)
    assert record.ok and record.formulation["status"] == "refused"
    assert record.formulation["refusal"] == "I'm sorry, I cannot assist with that request."
    assert record.formulation["finish_reason"] == "stop"
    (arm,) = _status_answers(run_dir)["clinicians"]
    assert arm["formulation_refused"] == 1


def test_a_judge_answer_cut_at_the_cap_is_counted_and_named_in_the_judge_error(tmp_path):
    with ReplayServer({"chat": _by_model({"judge-x": recorded("openrouter_gemini_length_visible")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, clinician="offline/screener")
        _cli("judge", "--judge", "judge-x", "--run-dir", str(run_dir), "--models", str(models))
    (judgment,) = list(iter_records(RunPaths(run_dir).judgments_dir / "judge-x" / "offline__screener.jsonl", Judgment))
    assert judgment.status == "judge_error" and judgment.truncated == 2 * (int(TURNS) + 1)  # each turn and its repair
    assert all("cut at the token cap" in error for error in judgment.errors)
    (row,) = _status_answers(run_dir)["judges"]
    assert (row["judge_error"], row["truncated_answers"]) == (1, 2 * (int(TURNS) + 1))


def test_a_study_config_sets_the_truncation_policy(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_gemini_length_visible")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        config = tmp_path / "study.yaml"
        config.write_text("name: cut\nprofiles: {n: 1}\npatient: {model: offline/patient}\nclinicians: [doc]\n"
                          f"judges: [offline/judge]\nturns: {TURNS}\non_truncation: fail\n")
        _cli("study", str(config), "--run-dir", str(tmp_path / "study"), "--models", str(models))
        bad = tmp_path / "bad.yaml"
        bad.write_text(config.read_text().replace("on_truncation: fail", "on_truncation: sometimes"))
        refused = _cli("study", str(bad), "--run-dir", str(tmp_path / "other"), "--models", str(models))
    (record,) = list(iter_records(RunPaths(tmp_path / "study").conversations("doc"), Conversation))
    assert record.status == "truncated" and record.failed_role == "clinician"
    assert refused.exit_code == 2 and "on_truncation" in refused.output


def test_offline_participants_say_why_they_stopped(tmp_path):
    with ReplayServer() as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, clinician="offline/screener")
    record = _conversation(run_dir, "offline/screener")
    assert record.opening_finish_reason == "stop" and record.truncated == {}
    assert all(turn.finish_reason == {"clinician": "stop", "patient": "stop"} and turn.truncated == []
               for turn in record.turns)


def test_models_check_says_the_model_refused(tmp_path):
    with ReplayServer({"chat": recorded("openai_refusal_docs")}) as server:
        _, models = _setup(tmp_path, server)
        result = CliRunner().invoke(app, ["models", "--check", "doc", "--models", str(models)], env={"COLUMNS": "400"})
    assert "reachable; the model refused (finish_reason=stop): I'm sorry, I cannot assist with that request." \
        in " ".join(result.output.split())


def test_a_rerun_replays_a_refusal_from_the_cache_and_no_cache_asks_again(tmp_path):
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_content_filter_empty")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
        _run(run_dir, models)
        after_rerun = len(server.calls("chat"))
        _run(run_dir, models, "--no-cache")
        after_no_cache = len(server.calls("chat"))
    assert (after_rerun, after_no_cache) == (1, 2)
    assert _conversation(run_dir).status == "refused"


def test_a_judge_request_rejected_by_a_content_policy_is_a_refused_judgment(tmp_path):
    with ReplayServer({"chat": _by_model({"judge-x": recorded("openai_400_safety_system")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models, clinician="offline/screener")
        _cli("judge", "--judge", "judge-x", "--run-dir", str(run_dir), "--models", str(models))
    (judgment,) = list(iter_records(RunPaths(run_dir).judgments_dir / "judge-x" / "offline__screener.jsonl", Judgment))
    assert judgment.status == "refused" and "content policy refused this request" in judgment.errors[0]
