"""`judge --batch-out` / `--batch-in`: batch files for cluster engines. The output file is replayed in the
shape vLLM's `vllm run-batch` writes (``BatchRequestOutput`` / ``BatchResponseData`` of
vllm/entrypoints/openai/protocol.py: ``{id, custom_id, response: {status_code, request_id, body:
ChatCompletionResponse}, error}``), built here from that protocol, not from our own writer; the labels
equal online judging's, missing and failed lines leave their conversations pending, and reading the same
file again adds nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.calls import read_ledger
from intake_eval.core.store import iter_json_lines
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.commands.test_judge import _models_file, _run_folder
from tests.judge.test_judging import _valid_answer

PRICE_IN, PRICE_OUT = 0.000002, 0.00001
PRICES = f"    input_cost_per_token: {PRICE_IN}\n    output_cost_per_token: {PRICE_OUT}\n"
CLINICIANS = ("offline/screener", "offline/anchored")


def vllm_output_line(request: dict[str, Any], *, failed: bool = False) -> dict[str, Any]:
    """One line of `vllm run-batch`'s output file for one input line (run_batch.py's success and error lines)."""
    if failed:
        return {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": request["custom_id"],
                "response": {"status_code": 400, "request_id": f"vllm-batch-{uuid.uuid4().hex}"},
                "error": "The model does not support Chat Completions API"}
    content = _valid_answer(request["body"])
    prompt_tokens = sum(len(str(message["content"])) for message in request["body"]["messages"]) // 4
    completion_tokens = len(content) // 4
    body = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": 1764100000,
            "model": request["body"]["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "reasoning_content": None, "content": content,
                                                 "tool_calls": []},
                         "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                      "completion_tokens": completion_tokens, "prompt_tokens_details": None},
            "prompt_logprobs": None, "kv_transfer_params": None}
    return {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": request["custom_id"],
            "response": {"status_code": 200, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": body},
            "error": None}


def engine_output(requests: Path, target: Path, *, skip: frozenset[str] = frozenset(),
                  fail: frozenset[str] = frozenset()) -> Path:
    lines = [json.loads(text) for text in requests.read_text().splitlines()]
    with target.open("w") as handle:
        for line in lines:
            if line["custom_id"] not in skip:
                handle.write(json.dumps(vllm_output_line(line, failed=line["custom_id"] in fail)) + "\n")
    return target


def judgments(paths) -> dict[str, dict]:
    return {record["conversation_id"]: record for clinician in CLINICIANS
            for record in iter_json_lines(paths.judgments("fakejudge", clinician))}


def judge(paths, models: str, *extra: str):
    result = CliRunner().invoke(app, ["judge", "--judge", "fakejudge", "--models", models, "--run-dir",
                                      str(paths.root), *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.fixture
def online(tmp_path):
    """The same folder judged online (the reference), a fresh folder to judge by files, and the server."""
    with FakeOpenAIServer(lambda body, _index: Reply(content=_valid_answer(body))) as server:
        models = _models_file(tmp_path, server, PRICES)
        reference = _run_folder(tmp_path / "online")
        assert judge(reference, models).exit_code == 0
        yield judgments(reference), _run_folder(tmp_path / "files"), models, server


def test_batch_out_writes_the_openai_batch_input_format_and_judges_nothing(online, tmp_path):
    _reference, paths, models, server = online
    served = server.request_count
    requests = tmp_path / "requests.jsonl"
    result = judge(paths, models, "--batch-out", str(requests))
    assert result.exit_code != 0 or "requests written" in result.output, result.output
    assert "requests written to" in result.output
    lines = [json.loads(text) for text in requests.read_text().splitlines()]
    assert lines and {tuple(sorted(line)) for line in lines} == {("body", "custom_id", "method", "url")}
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert len({line["custom_id"] for line in lines}) == len(lines)
    assert all(line["body"]["model"] == "fake-judge" and line["body"]["messages"] for line in lines)
    assert server.request_count == served and not judgments(paths)


def test_batch_in_judges_what_the_file_answers_like_online_and_leaves_the_rest_pending(online, tmp_path):
    reference, paths, models, server = online
    requests = tmp_path / "requests.jsonl"
    assert "requests written" in judge(paths, models, "--batch-out", str(requests)).output
    lines = [json.loads(text) for text in requests.read_text().splitlines()]
    # the patient's opening (turn 0) is one request both conversations share; the others name their clinician
    by_conversation: dict[str, set[str]] = {clinician: set() for clinician in CLINICIANS}
    for line in lines:
        for clinician in CLINICIANS:
            if f"({clinician})" in json.dumps(line["body"]) or "(offline/" not in json.dumps(line["body"]):
                by_conversation[clinician].add(line["custom_id"])
    own = sorted(by_conversation["offline/anchored"] - by_conversation["offline/screener"])
    missing, failed = own[:1], own[1:2]
    partial = engine_output(requests, tmp_path / "partial.jsonl", skip=frozenset(missing), fail=frozenset(failed))
    served = server.request_count

    first = judge(paths, models, "--batch-in", str(partial))
    assert server.request_count == served  # every answer came from the file; none needed repair online
    said = " ".join(first.output.split())
    assert "1 failed lines, 1 missing" in said and "1 conversations judged from it, 1 left pending" in said, said
    assert first.exit_code == 1 and "1 conversations left pending" in said  # pending is not done
    assert "does not support Chat Completions" in said
    judged = judgments(paths)
    assert list(judged) == [cid for cid in reference if ".offline__screener." in cid]
    for cid, record in judged.items():
        assert record["status"] == "ok" and record["turns"] == reference[cid]["turns"]
    # priced at the alias's prices (no provider batch discount), recorded in the call ledger as billed
    outputs = {json.loads(text)["custom_id"]: json.loads(text) for text in partial.read_text().splitlines()}
    expected = sum(outputs[key]["response"]["body"]["usage"]["prompt_tokens"] * PRICE_IN
                   + outputs[key]["response"]["body"]["usage"]["completion_tokens"] * PRICE_OUT
                   for key in by_conversation["offline/screener"])
    record = next(iter(judged.values()))
    assert record["usage"]["cost_usd"] == pytest.approx(expected)
    ledger = read_ledger(paths.calls)
    assert ledger is not None and ledger.by_alias["fakejudge"].answers == len(by_conversation["offline/screener"])
    assert ledger.billed_usd == pytest.approx(expected)

    # the same file again adds nothing: no record, no ledger line, no request
    before = {path.name: path.read_bytes() for path in paths.judgments_dir.rglob("*.jsonl")}
    ledger_before = paths.calls.read_bytes()
    again = judge(paths, models, "--batch-in", str(partial))
    assert {path.name: path.read_bytes() for path in paths.judgments_dir.rglob("*.jsonl")} == before
    assert paths.calls.read_bytes() == ledger_before and server.request_count == served
    assert "0 conversations judged from it, 1 left pending" in " ".join(again.output.split())

    # the engine's next output file answers the rest: every conversation judged, labels equal online
    rest = tmp_path / "rest.jsonl"
    assert "requests written" in judge(paths, models, "--batch-out", str(rest)).output
    assert {json.loads(text)["custom_id"] for text in rest.read_text().splitlines()} == by_conversation["offline/anchored"]
    done = judge(paths, models, "--batch-in", str(engine_output(rest, tmp_path / "rest-out.jsonl")))
    assert done.exit_code == 0, done.output
    assert {cid: r["turns"] for cid, r in judgments(paths).items()} == {cid: r["turns"] for cid, r in reference.items()}


def test_a_judge_without_an_openai_route_and_both_flags_are_one_line(online, tmp_path):
    _reference, paths, models, _server = online
    both = judge(paths, models, "--batch-out", str(tmp_path / "a"), "--batch-in", str(tmp_path / "b"))
    assert both.exit_code == 2 and "--batch-out and --batch-in" in both.output
    offline = CliRunner().invoke(app, ["judge", "--judge", "offline/judge", "--run-dir", str(paths.root),
                                       "--batch-out", str(tmp_path / "c")])
    assert offline.exit_code == 2 and "no OpenAI-compatible route" in offline.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["files", "models.yaml", "online"]  # no file left
    unreadable = judge(paths, models, "--batch-in", str(tmp_path / "absent.jsonl"))
    assert unreadable.exit_code == 2 and "--batch-in" in unreadable.output and "absent.jsonl" in unreadable.output
