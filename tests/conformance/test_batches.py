"""Batches in the providers' recorded shapes, through the real batch client and `judge --batch`.

Together creates a batch as ``{"job": {…}, "warning": …}`` and spells statuses in upper case
(together_batch_create_shape); OpenAI's and Anthropic's batch objects are their API references'
examples. A Together-served judge's `--batch` completes, its batch id is in the stage log, and a rerun
(after it finished, or after the polling deadline) creates no second batch. A server without a batch
API (vLLM answers FastAPI's 404 on /v1/files) is told at once, without a "rerun" that cannot help.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import iter_json_lines
from intake_eval.llm.anthropic_batch import AnthropicBatchClient
from intake_eval.llm.anthropic_http import anthropic_route
from intake_eval.llm.batch import BatchClient, batch_route
from intake_eval.llm.registry import resolve_spec
from tests.helpers.batchserver import FakeBatchServer, together_job
from tests.conformance.prices import table_dollars
from tests.conformance.replay import ReplayRequest, ReplayServer, recorded
from tests.helpers.fakeserver import Reply
from tests.commands.test_judge import _run_folder
from tests.judge.test_judging import _valid_answer

KIMI = "together_ai/moonshotai/Kimi-K2.6"
CLINICIANS = ("offline/screener", "offline/anchored")
# Derived: an uploaded file as OpenAI's API reference shows the file object (the fields our client reads: id)
FILE_OBJECT = {"status": 200, "headers": {}, "derived": True, "body": {
    "id": "file-abc123", "object": "file", "bytes": 120000, "created_at": 1677610602, "filename": "batch.jsonl",
    "purpose": "batch"}}


def _together_batch(job_id: str, status: str, output_file_id: str | None = None) -> dict:
    """Together's job object (together_batch_create_shape) with its placeholder id and status filled in."""
    job = dict(recorded("together_batch_create_shape")["body"]["job"])
    job.update(id=job_id, status=status, input_file_id="file-abc123", output_file_id=output_file_id)
    return job


def test_the_fake_batch_servers_together_dialect_has_togethers_recorded_shape():
    answer = recorded("together_batch_create_shape")["body"]
    fake = {"id": "b", "input_file_id": "f", "status": "validating", "endpoint": "/v1/chat/completions",
            "output_file_id": None, "error_file_id": None}
    assert set(together_job(fake)) == set(answer["job"]) and together_job(fake)["status"] == "VALIDATING"


def test_togethers_wrapped_creation_and_upper_case_statuses_are_read(tmp_path, monkeypatch):
    """The recorded creation answer (its placeholder id filled in), then IN_PROGRESS, then COMPLETED."""
    created = recorded("together_batch_create_shape")
    created["body"]["job"].update(id="batch-conformance-1", input_file_id="file-abc123")
    polls = [_together_batch("batch-conformance-1", "IN_PROGRESS"),
             _together_batch("batch-conformance-1", "COMPLETED", "file-out-1")]
    output = {"custom_id": "c1", "response": {"status_code": 200, "body": recorded("together_r1_think_inline")["body"]}}
    routes = {"files": FILE_OBJECT, "batches": created,
              "batch": [{"status": 200, "headers": {}, "body": poll} for poll in polls],
              "file_content": {"status": 200, "headers": {}, "body": json.dumps(output) + "\n"}}
    monkeypatch.setenv("TOGETHER_API_KEY", "together-conformance-key")
    with ReplayServer(routes) as server:
        for name, value in server.env("together_ai").items():
            monkeypatch.setenv(name, value)
        spec = resolve_spec(KIMI, {})
        client = BatchClient(spec, batch_route(spec))
        seen: list[str] = []

        async def go(path):
            async with client:
                batch_id, file_id = await client.submit(path)
                batch = await client.wait(batch_id, 0.01, lambda b: seen.append(b["status"]))
                return batch_id, file_id, batch, await client.results(batch)

        source = tmp_path / "lines.jsonl"
        source.write_text('{"custom_id": "c1"}\n')
        batch_id, file_id, batch, lines = asyncio.run(go(source))
        server_file = server.calls("files")[0].body
    assert (batch_id, file_id) == ("batch-conformance-1", "file-abc123")
    assert seen == ["in_progress", "completed"] and batch["status"] == "completed"
    assert b"batch-api" in server_file  # Together's purpose for a batch input file
    assert [line.custom_id for line in lines] == ["c1"] and lines[0].body["usage"]["completion_tokens"] == 197


def test_openais_and_anthropics_documented_batch_objects_are_read(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-conformance")
    with ReplayServer({"message_batch": recorded("anthropic_batch_object"), "files": FILE_OBJECT,
                       "batches": recorded("openai_batch_object")}) as server:
        for name, value in server.env("anthropic").items():
            monkeypatch.setenv(name, value)
        claude = resolve_spec("anthropic/claude-sonnet-4-5-20250929", {})
        gpt = resolve_spec("openai/served", {}).model_copy(update={"api_base": server.url, "api_key_env": None})

        async def go():
            async with AnthropicBatchClient(claude, anthropic_route(claude)) as anthropic, \
                    BatchClient(gpt, batch_route(gpt)) as openai:
                return await anthropic.get("msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"), await openai.create("file-abc123")

        message_batch, openai_batch = asyncio.run(go())
    assert message_batch["status"] == "in_progress"
    assert message_batch["request_counts"] == {"total": 200, "completed": 50, "failed": 50}
    assert openai_batch["id"] == "batch_abc123" and openai_batch["status"] == "validating"


def _answer(body, _index):
    return Reply(content=_valid_answer(body), prompt_tokens=700, completion_tokens=90, usage={"cached_tokens": 512})


def _together_judge(tmp_path, server, monkeypatch) -> str:
    monkeypatch.setenv("TOGETHER_API_KEY", "together-conformance-key")
    monkeypatch.setenv("INTAKE_EVAL_BASE_URL_TOGETHER_AI", server.url)
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  kimi:\n    model: {KIMI}\n    temperature: 0.0\n    max_tokens: 2000\n")
    return str(path)


def _judge(paths, models, *extra):
    return CliRunner().invoke(app, ["judge", "--judge", "kimi", "--models", models, "--run-dir", str(paths.root),
                                    "--batch", "--batch-poll", "0.05", *extra])


def _logged(paths) -> list[str]:
    return [entry["batch_id"] for entry in iter_json_lines(paths.stage_log) if entry.get("event") == "judge_batch"]


def test_a_together_served_judge_completes_and_its_rerun_creates_no_second_batch(tmp_path, monkeypatch):
    with FakeBatchServer(_answer, dialect="together") as server:
        models = _together_judge(tmp_path, server, monkeypatch)
        paths = _run_folder(tmp_path)
        first = _judge(paths, models)
        again = _judge(paths, models)
        assert server.request_count == 0  # every request went in the batch
    assert first.exit_code == 0, first.output
    assert again.exit_code == 0, again.output
    assert len(server.uploads) == 1 and len(server.batches) == 1 and _logged(paths) == list(server.batches)
    assert "COMPLETED" not in first.output and "completed" in first.output  # progress lines in one spelling
    assert "in_progress 0% done" in first.output  # Together reports a percentage, not request counts
    records = [r for c in CLINICIANS for r in iter_json_lines(paths.judgments("kimi", c))]
    assert len(records) == 2 and {r["status"] for r in records} == {"ok"}
    for record in records:
        usage = record["usage"]
        calls = usage["calls"]
        assert (usage["prompt_tokens"], usage["cached_prompt_tokens"], usage["completion_tokens"]) == (
            700 * calls, 512 * calls, 90 * calls)
        dollars = table_dollars(KIMI, 700, 90, cached=512) * calls / 2  # the batch rate: half
        assert usage["cost_usd"] == pytest.approx(dollars, rel=1e-6)


def test_the_polling_deadline_stops_and_a_rerun_collects_the_same_batch(tmp_path, monkeypatch):
    with FakeBatchServer(_answer, dialect="together", hold=True) as server:
        models = _together_judge(tmp_path, server, monkeypatch)
        paths = _run_folder(tmp_path)
        stopped = _judge(paths, models, "--batch-wait", "0.00005")  # 0.18 s
        server.hold = False
        collected = _judge(paths, models)
    assert stopped.exit_code == 2, stopped.output
    output = " ".join(stopped.output.split())
    assert "is still in_progress after" in output and "rerun the same command to collect it" in output
    assert collected.exit_code == 0, collected.output
    assert len(server.batches) == 1 and len(_logged(paths)) == 1  # the rerun paid nothing again


def test_a_server_without_a_batch_api_is_told_at_once(tmp_path):
    """vLLM serves chat completions only: /v1/files is FastAPI's 404 {"detail": "Not Found"}."""
    def chat(request: ReplayRequest) -> dict:
        return {"status": 200, "headers": {}, "body": {**recorded("openai_gpt4o_plain")["body"], "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                              "content": _valid_answer(request.body)}}]}}

    with ReplayServer({"chat": chat, "files": recorded("vllm_404_files_not_found")}) as server:
        path = tmp_path / "models.yaml"
        path.write_text(f"models:\n  vllm:\n    model: hosted_vllm/Qwen/Qwen3-8B\n    api_base: {server.url}\n")
        paths = _run_folder(tmp_path)
        result = CliRunner().invoke(app, ["judge", "--judge", "vllm", "--models", str(path), "--run-dir",
                                          str(paths.root), "--batch", "--batch-poll", "0.05"])
        routes = [request.route for request in server.requests]
        online = CliRunner().invoke(app, ["judge", "--judge", "vllm", "--models", str(path), "--run-dir",
                                          str(paths.root)])
    assert result.exit_code == 2
    output = " ".join(result.output.split())
    assert "/files answered HTTP 404 (Not Found): this server has no batch API; run without --batch" in output
    assert "rerun" not in output and "Traceback" not in output and routes == ["files"]
    assert _logged(paths) == [] and online.exit_code == 0, online.output  # without --batch it judges
