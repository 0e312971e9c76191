"""`intake-eval judge --batch` for a Claude judge, against a loopback server implementing Anthropic's
Message Batches (tests/helpers/batchserver.py) and its Messages API for the online reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import iter_json_lines
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.litellm_backend import call_cost
from tests.helpers.batchserver import FakeBatchServer, kill_once_batch_is_polled
from tests.helpers.fakeserver import Reply
from tests.judge.test_batch import CLINICIANS
from tests.judge.test_batch import _same_labels as same_labels
from tests.commands.test_judge import _run_folder
from tests.judge.test_judging import _valid_answer

SONNET = "anthropic/claude-sonnet-4-6"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}


def _prompt(body: dict) -> str:
    return "".join(block.get("text", "") for block in body["messages"][0]["content"])


def _answer(body, _index):
    return Reply(content=_valid_answer({"messages": [{"content": _prompt(body)}]}), prompt_tokens=900,
                 completion_tokens=120, usage={"cache_read_input_tokens": 2048, "cache_creation_input_tokens": 300})


def _models(tmp_path) -> str:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  claude:\n    model: {SONNET}\n    temperature: 0.0\n    max_tokens: 2000\n"
                    "    api_key_env: ANTHROPIC_API_KEY\n")
    return str(path)


def _args(paths, models, *extra):
    return ["judge", "--judge", "claude", "--models", models, "--run-dir", str(paths.root), *extra]


def _judgments(paths) -> dict[str, dict]:
    return {r["conversation_id"]: r for c in CLINICIANS for r in iter_json_lines(paths.judgments("claude", c))}


@pytest.fixture
def claude_server(monkeypatch):
    """The hosted Claude route (key variable, price table) pointed at a loopback batch server."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-batch-test")
    with FakeBatchServer(_answer) as server:
        monkeypatch.setenv("INTAKE_EVAL_BASE_URL_ANTHROPIC", server.url.removesuffix("/v1"))
        yield server


def _online(tmp_path, server, models) -> dict[str, dict]:
    paths = _run_folder(tmp_path / "online")
    result = CliRunner().invoke(app, _args(paths, models))
    assert result.exit_code == 0, result.output
    assert server.paths and all(p == "/v1/messages" for p in server.paths)
    return _judgments(paths)


def _same_labels(batch: dict, online: dict) -> None:
    same_labels(batch, online, ("calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cache_write_tokens"))


def test_message_batches_give_the_online_judgments_at_half_price(tmp_path, claude_server):
    server = claude_server
    models = _models(tmp_path)
    online = _online(tmp_path, server, models)
    online_calls = server.request_count
    paths = _run_folder(tmp_path / "batch")
    result = CliRunner().invoke(app, _args(paths, models, "--batch", "--batch-poll", "0.05"))
    assert result.exit_code == 0, result.output
    assert server.request_count == online_calls  # nothing online: every request was in the batch
    assert len(server.batches) == 1 and next(iter(server.batches)).startswith("msgbatch_")
    headers = server.batch_headers[0]
    assert headers["x-api-key"] == "sk-ant-batch-test" and headers["anthropic-version"] == "2023-06-01"
    assert "anthropic-beta" not in headers  # the lines ask for the GA output_config.format: no beta header
    line = next(iter(server.batches.values()))["_lines"][0]
    assert line["params"]["model"] == "claude-sonnet-4-6" and "format" in line["params"]["output_config"]
    assert "ended" in result.output  # progress lines
    batch = _judgments(paths)
    _same_labels(batch, online)
    table = ModelSpec(model=SONNET)
    for cid, record in batch.items():
        usage = record["usage"]
        full, known = call_cost(table, usage["prompt_tokens"], usage["completion_tokens"],
                                cached_tokens=usage["cached_prompt_tokens"], cache_write_tokens=usage["cache_write_tokens"])
        # prices are linear in tokens, so the summed usage prices the conversation's calls
        assert known and full > 0 and usage["cost_usd"] == pytest.approx(full / 2)
        assert usage["cost_usd"] == pytest.approx(online[cid]["usage"]["cost_usd"] / 2)
    again = CliRunner().invoke(app, _args(paths, models, "--batch", "--batch-poll", "0.05"))
    assert again.exit_code == 0 and len(server.batches) == 1  # nothing left: nothing submitted


def test_a_failed_batch_line_is_asked_online(tmp_path, claude_server):
    server = claude_server
    failed: list[str] = []

    def respond(body, index):
        prompt = _prompt(body)
        if "Label turn 2 only" in prompt and not failed:
            failed.append(prompt)
            return Reply(status=529, error_message="Overloaded")
        return _answer(body, index)

    server.responder = respond
    paths = _run_folder(tmp_path)
    result = CliRunner().invoke(app, _args(paths, _models(tmp_path), "--batch", "--batch-poll", "0.05"))
    assert result.exit_code == 0, result.output
    assert [_prompt(body) for body in server.requests] == failed  # only the failed line went online
    assert all(record["status"] == "ok" for record in _judgments(paths).values())


def test_sigkill_between_submit_and_collect_does_not_resubmit(tmp_path, claude_server):
    server = claude_server
    models = _models(tmp_path)
    online = _online(tmp_path, server, models)
    server.hold = True
    paths = _run_folder(tmp_path / "batch")
    env = {**ENV, "ANTHROPIC_API_KEY": "sk-ant-batch-test",
           "INTAKE_EVAL_BASE_URL_ANTHROPIC": server.url.removesuffix("/v1")}
    command = [sys.executable, "-m", "intake_eval.cli", *_args(paths, models, "--batch", "--batch-poll", "0.05")]
    kill_once_batch_is_polled(server, command, env)
    assert not _judgments(paths)
    logged = [e for e in iter_json_lines(paths.stage_log) if e.get("event") == "judge_batch"]
    assert [e["batch_id"] for e in logged] == list(server.batches)
    server.hold = False
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert len(server.batches) == 1  # collected, not resubmitted
    _same_labels(_judgments(paths), online)
    assert json.loads(paths.manifest.read_text())["stages"]["judge:claude"]["status"] == "done"
