"""`intake-eval judge --batch` against a loopback server implementing the OpenAI batch protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.calls import read_ledger
from intake_eval.core.store import iter_json_lines
from tests.helpers.batchserver import FakeBatchServer, kill_once_batch_is_polled
from tests.helpers.fakeserver import Reply
from tests.commands.test_judge import _models_file, _run_folder
from tests.judge.test_judging import _valid_answer

PRICES = "    input_cost_per_token: 0.000002\n    output_cost_per_token: 0.00001\n"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
CLINICIANS = ("offline/screener", "offline/anchored")


def _answer(body, _index):
    return Reply(content=_valid_answer(body))


def _judgments(paths) -> dict[str, dict]:
    return {record["conversation_id"]: record for clinician in CLINICIANS
            for record in iter_json_lines(paths.judgments("fakejudge", clinician))}


def _args(paths, models, *extra):
    return ["judge", "--judge", "fakejudge", "--models", models, "--run-dir", str(paths.root), *extra]


def _online_reference(tmp_path, server, models) -> dict[str, dict]:
    paths = _run_folder(tmp_path / "online")
    result = CliRunner().invoke(app, _args(paths, models))
    assert result.exit_code == 0, result.output
    return _judgments(paths)


def _same_labels(batch: dict, online: dict, usage: tuple[str, ...] = ("calls", "prompt_tokens", "completion_tokens")) -> None:
    assert batch.keys() == online.keys() and batch
    for cid, record in batch.items():
        assert record["status"] == "ok" == online[cid]["status"]
        assert record["turns"] == online[cid]["turns"]
        for field in usage:
            assert record["usage"][field] == online[cid]["usage"][field], field


def test_batch_judgments_equal_online_and_cost_half(tmp_path):
    with FakeBatchServer(_answer) as server:
        models = _models_file(tmp_path, server, PRICES)
        online = _online_reference(tmp_path, server, models)
        online_calls = server.request_count
        paths = _run_folder(tmp_path / "batch")
        result = CliRunner().invoke(app, _args(paths, models, "--batch", "--batch-poll", "0.05"))
        assert result.exit_code == 0, result.output
        assert server.request_count == online_calls  # no online call: every request went in the batch
        distinct = len({json.dumps(body, sort_keys=True) for body in server.requests})  # both conversations alike
        assert len(server.uploads) == 1 and len(server.batches) == 1 and server.batch_lines == distinct
        again = CliRunner().invoke(app, _args(paths, models, "--batch", "--batch-poll", "0.05"))
        assert again.exit_code == 0 and len(server.batches) == 1  # nothing left: nothing submitted
    batch = _judgments(paths)
    _same_labels(batch, online)
    for cid, record in batch.items():
        assert record["usage"]["cost_usd"] > 0
        assert record["usage"]["cost_usd"] == pytest.approx(online[cid]["usage"]["cost_usd"] / 2)
    assert "batch batch_" in result.output and "completed" in result.output  # progress lines
    logged = [e for e in iter_json_lines(paths.stage_log) if e.get("event") == "judge_batch"]
    assert [(e["stage"], e["requests"]) for e in logged] == [("judge:fakejudge", distinct)]
    # the call ledger bills each batch answer once, at the batch rate (an answer both conversations use: once)
    ledger = read_ledger(paths.calls)
    assert ledger is not None and ledger.by_alias["fakejudge"].answers == distinct
    records = sum(record["usage"]["cost_usd"] for record in batch.values())
    assert records / 2 <= ledger.billed_usd < records


def test_the_models_file_sets_the_batch_rate(tmp_path):
    with FakeBatchServer(_answer) as server:
        models = _models_file(tmp_path, server, PRICES + "    batch_cost_factor: 0.25\n")
        online = _online_reference(tmp_path, server, models)
        paths = _run_folder(tmp_path / "batch")
        result = CliRunner().invoke(app, _args(paths, models, "--batch", "--batch-poll", "0.05"))
    assert result.exit_code == 0, result.output
    for cid, record in _judgments(paths).items():
        assert record["usage"]["cost_usd"] == pytest.approx(online[cid]["usage"]["cost_usd"] / 4)


def test_an_invalid_batch_answer_is_repaired_online(tmp_path):
    def respond(body, index):
        first_try = len(body["messages"]) == 1
        if first_try and "Label turn 1 only" in body["messages"][0]["content"]:
            return Reply(content="not json at all")
        return Reply(content=_valid_answer(body))

    with FakeBatchServer(respond) as server:
        paths = _run_folder(tmp_path)
        result = CliRunner().invoke(app, _args(paths, _models_file(tmp_path, server), "--batch", "--batch-poll", "0.05"))
        online = list(server.requests)
    assert result.exit_code == 0, result.output
    assert len(online) == 2 and all(len(body["messages"]) == 3 for body in online)  # one repair per conversation
    for record in _judgments(paths).values():
        assert record["status"] == "ok" and record["usage"]["calls"] == 4  # 3 turns + 1 repair


def test_sigkill_between_submit_and_collect_does_not_resubmit(tmp_path):
    with FakeBatchServer(_answer, hold=True) as server:
        models = _models_file(tmp_path, server)
        online = _online_reference(tmp_path, server, models)
        paths = _run_folder(tmp_path / "batch")
        command = [sys.executable, "-m", "intake_eval.cli", *_args(paths, models, "--batch", "--batch-poll", "0.05")]
        kill_once_batch_is_polled(server, command, ENV)
        assert not paths.judge_dir("fakejudge").exists() or not _judgments(paths)
        server.hold = False
        resumed = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert len(server.uploads) == 1 and len(server.batches) == 1  # collected, not resubmitted
    _same_labels(_judgments(paths), online)


def test_two_judges_and_a_provider_priced_by_the_price_table(tmp_path, monkeypatch):
    """Together through its real route (key variable, file purpose, litellm's prices), pointed at 127.0.0.1."""
    from intake_eval.llm.base import ModelSpec
    from intake_eval.llm.litellm_backend import call_cost

    together = "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"
    monkeypatch.setenv("TOGETHER_API_KEY", "together-test-key")
    with FakeBatchServer(_answer) as server:
        monkeypatch.setenv("INTAKE_EVAL_BASE_URL_TOGETHER_AI", server.url)
        models = _models_file(tmp_path, server, f"  tj:\n    model: {together}\n    temperature: 0.0\n"
                                                 "    max_tokens: 2000\n")
        paths = _run_folder(tmp_path)
        result = CliRunner().invoke(app, ["judge", "--judge", "tj", "--judge", "fakejudge", "--models", models,
                                          "--run-dir", str(paths.root), "--batch", "--batch-poll", "0.05"])
        assert result.exit_code == 0, result.output
        assert sorted(server.purposes) == ["batch", "batch-api"] and len(server.batches) == 2
        assert "Bearer together-test-key" in server.batch_auth and server.request_count == 0
    table = ModelSpec(model=together)
    tj = [r for c in CLINICIANS for r in iter_json_lines(paths.judgments("tj", c))]
    assert len(tj) == 2 and all(r["status"] == "ok" for r in tj)
    for record in tj:
        usage = record["usage"]
        full, known = call_cost(table, usage["prompt_tokens"], usage["completion_tokens"])
        assert known and full > 0 and usage["cost_usd"] == pytest.approx(full / 2, rel=1e-6)
    assert [r["turns"] for r in tj] == [r["turns"] for r in _judgments(paths).values()]


def test_a_judge_without_a_batch_api_is_one_line(tmp_path):
    paths = _run_folder(tmp_path)
    result = CliRunner().invoke(app, ["judge", "--judge", "offline/judge", "--batch", "--run-dir", str(paths.root)])
    assert result.exit_code == 2
    assert "--batch: judge 'offline/judge'" in result.output and "Traceback" not in result.output
    assert not paths.judge_dir("offline/judge").exists()
    assert json.loads(paths.manifest.read_text()).get("stages", {}).get("judge:offline/judge") is None \
        if paths.manifest.exists() else True


def test_requests_are_split_within_the_batch_caps(tmp_path):
    """Small caps force several batch files; the judgments are still those of one batch."""
    from intake_eval.judge import batch as judge_batch

    with FakeBatchServer(_answer) as server:
        models = _models_file(tmp_path, server)
        online = _online_reference(tmp_path, server, models)
        paths = _run_folder(tmp_path / "batch")
        from intake_eval.judge.stage import execute_judge
        from intake_eval.stage_kinds import stage_kinds

        settings = judge_batch.BatchSettings(poll_s=0.05, max_requests=2, max_bytes=10**9)
        execute_judge(paths, ["fakejudge"], models_file=models, batch=settings, kinds=stage_kinds())
        sizes = [len(server.files[b["input_file_id"]].splitlines()) for b in server.batches.values()]
        distinct = server.batch_lines
    assert distinct >= 3 and sizes == [2] * (distinct // 2) + [1] * (distinct % 2)  # two per file
    _same_labels(_judgments(paths), online)


def test_a_failed_batch_line_is_asked_online(tmp_path):
    seen: list[str] = []

    def respond(body, index):
        prompt = body["messages"][0]["content"]
        if "Label turn 2 only" in prompt and not seen:
            seen.append(prompt)
            return Reply(status=500, error_message="overloaded")
        return Reply(content=_valid_answer(body))

    with FakeBatchServer(respond) as server:
        paths = _run_folder(tmp_path)
        result = CliRunner().invoke(app, _args(paths, _models_file(tmp_path, server), "--batch", "--batch-poll", "0.05"))
        online = [body["messages"][0]["content"] for body in server.requests]
    assert result.exit_code == 0, result.output
    assert online and all(prompt == seen[0] for prompt in online)  # only the failed line went online
    assert all(record["status"] == "ok" for record in _judgments(paths).values())


def test_an_unreachable_batch_api_is_one_line_and_nothing_is_logged(tmp_path):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    paths = _run_folder(tmp_path)
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  fakejudge:\n    model: openai/fake-judge\n    api_base: http://127.0.0.1:{port}/v1\n")
    result = CliRunner().invoke(app, _args(paths, str(models), "--batch", "--batch-poll", "0.05"))
    assert result.exit_code == 2, result.output
    assert "the batch API at http://127.0.0.1" in result.output and "Traceback" not in result.output
    assert not [e for e in iter_json_lines(paths.stage_log) if e.get("event") == "judge_batch"]
