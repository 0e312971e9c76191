"""`intake-eval judge` end to end through the CLI, against the loopback server and offline/judge."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, append_record, iter_json_lines
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.judgment_builders import conversation, profile
from tests.judge.test_judging import _valid_answer

TURNS = [("How have you been sleeping lately?", "I lie awake for hours before I finally drift off."),
         ("It might help to keep a regular bedtime.", "Okay, I can try that.")]


def _run_folder(tmp_path, clinicians=("offline/screener", "offline/anchored")) -> RunPaths:
    paths = RunPaths(tmp_path / "run")
    append_record(paths.profiles, profile())
    for clinician in clinicians:
        # distinct transcripts: a judge's calls go in turn order, so identical ones would be answered
        # from the response cache
        turns = [(f"{question} ({clinician})", answer) for question, answer in TURNS]
        append_record(paths.conversations(clinician), conversation(turns, clinician=clinician))
    return paths


def _models_file(tmp_path, server, extra: str = "") -> str:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  fakejudge:\n    model: openai/fake-judge\n    api_base: {server.url}\n"
                    f"    temperature: 0.0\n    max_tokens: 2000\n{extra}")
    return str(path)


def test_judge_with_a_provider_writes_judgments_metrics_and_manifest(tmp_path):
    paths = _run_folder(tmp_path)
    # The very first request fails with a 500: retried, and counted in the manifest.
    respond = lambda body, i: Reply(status=500) if i == 0 else Reply(content=_valid_answer(body))  # noqa: E731
    with FakeOpenAIServer(respond) as server:
        args = ["judge", "--judge", "fakejudge", "--models", _models_file(tmp_path, server), "--run-dir", str(paths.root)]
        first = CliRunner().invoke(app, args)
        calls = server.request_count
        retries = json.loads(paths.manifest.read_text())["stages"]["judge:fakejudge"]["retries"]["fakejudge"]
        again = CliRunner().invoke(app, args)
        assert server.request_count == calls  # resume: nothing left to judge
    assert first.exit_code == 0, first.output
    assert calls == 2 * 3 + 1  # two conversations × (opening + 2 turns), plus the retried 500
    assert retries["retries"] == 1 and retries["attempts"] == calls
    assert "2 judged ok" in first.output and "2 already done" in again.output
    records = list(iter_json_lines(paths.judgments("fakejudge", "offline/screener")))
    assert [r["status"] for r in records] == ["ok"]
    for name in ("conversations", "cells", "domains", "trajectories", "agreement", "clinicians", "comparisons", "masking"):
        assert paths.metrics(name).exists()
    manifest = json.loads(paths.manifest.read_text())
    stage = manifest["stages"]["judge:fakejudge"]
    assert stage["status"] == "done" and stage["config"]["mode"] == "per-turn" and stage["counts"]["done"] == 2
    assert "judge_turn" in stage["config"]["prompts"]


def test_a_rejected_key_stops_with_one_error_line_and_the_reason_recorded(tmp_path):
    paths = _run_folder(tmp_path, clinicians=[f"doc{index}" for index in range(6)])
    with FakeOpenAIServer(lambda body, i: Reply(status=401, error_message="invalid api key")) as server:
        result = CliRunner().invoke(app, ["judge", "--judge", "fakejudge", "--models", _models_file(tmp_path, server),
                                          "--run-dir", str(paths.root), "--concurrency", "1"])
        sent = server.request_count
    assert result.exit_code == 2
    assert "error: judge fakejudge stopped" in result.output and "Traceback" not in result.output
    records = [r for f in paths.judgment_files() for r in iter_json_lines(f)]
    assert records and all(r["status"] == "provider_error: fatal" for r in records)
    # three identical refusals stop the judge instead of failing every conversation
    assert len(records) == 3 and sent == 3


def test_bad_input_is_one_clear_line(tmp_path, monkeypatch):
    runner = CliRunner()
    empty = tmp_path / "empty"
    result = runner.invoke(app, ["judge", "--judge", "offline/judge", "--mode", "bogus", "--run-dir", str(empty)])
    assert result.exit_code == 2 and "error: --mode bogus" in result.output
    result = runner.invoke(app, ["judge", "--judge", "offline/judge", "--run-dir", str(empty)])
    assert result.exit_code == 2 and "no profiles here yet" in result.output
    paths = _run_folder(tmp_path)
    result = runner.invoke(app, ["judge", "--judge", "no-such-judge", "--run-dir", str(paths.root)])
    assert result.exit_code == 2 and "unknown model 'no-such-judge'" in result.output
    monkeypatch.delenv("INTAKE_TEST_UNSET_KEY", raising=False)
    with FakeOpenAIServer() as server:
        models = _models_file(tmp_path, server, "    api_key_env: INTAKE_TEST_UNSET_KEY\n")
        result = runner.invoke(app, ["judge", "--judge", "fakejudge", "--models", models, "--run-dir", str(paths.root)])
    assert result.exit_code == 2 and "INTAKE_TEST_UNSET_KEY" in result.output
    result = runner.invoke(app, ["judge", "--judge", "offline/judge", "--judge", "offline/judge", "--run-dir", str(paths.root)])
    assert result.exit_code == 2 and "given twice" in result.output


def test_offline_judge_in_both_modes_side_by_side(tmp_path):
    paths = _run_folder(tmp_path)
    runner = CliRunner()
    per_turn = runner.invoke(app, ["judge", "--judge", "offline/judge", "--run-dir", str(paths.root)])
    whole = runner.invoke(app, ["judge", "--judge", "offline/judge", "--mode", "conversation", "--run-dir", str(paths.root)])
    assert per_turn.exit_code == 0, per_turn.output
    assert whole.exit_code == 0, whole.output
    labels = {row["judge"] for f in paths.judgment_files() for row in iter_json_lines(f)}
    assert labels == {"offline/judge", "offline/judge+conversation"}
    agreement = paths.metrics("agreement").read_text()
    assert "offline/judge,offline/judge+conversation" in agreement


def test_the_generator_may_not_judge(tmp_path):
    from intake_eval.core.manifest import Manifest

    paths = _run_folder(tmp_path)
    manifest = Manifest(paths)
    manifest.record_models("generator", [{"alias": "fakejudge", "model": "openai/fake-judge"}])
    manifest.save()
    with FakeOpenAIServer(lambda body, i: Reply(content=_valid_answer(body))) as server:
        result = CliRunner().invoke(app, ["judge", "--judge", "fakejudge", "--models", _models_file(tmp_path, server),
                                          "--run-dir", str(paths.root)])
        assert server.request_count == 0
    assert result.exit_code == 2 and "leakage guard" in result.output
    assert not paths.judgment_files()


def test_limit_judges_a_stable_subset_and_a_changed_judge_needs_force(tmp_path):
    paths = _run_folder(tmp_path)
    runner = CliRunner()
    with FakeOpenAIServer(lambda body, i: Reply(content=_valid_answer(body))) as server:
        models = _models_file(tmp_path, server)
        base = ["judge", "--judge", "fakejudge", "--models", models, "--run-dir", str(paths.root)]
        limited = runner.invoke(app, [*base, "--limit", "1"])
        assert limited.exit_code == 0, limited.output
        assert sum(1 for f in paths.judgment_files() for _ in iter_json_lines(f)) == 1
        assert json.loads(paths.manifest.read_text())["stages"]["judge:fakejudge"]["status"] == "partial"
        changed = tmp_path / "changed.yaml"
        changed.write_text(open(models).read().replace("openai/fake-judge", "openai/other-judge"))
        base_changed = ["judge", "--judge", "fakejudge", "--models", str(changed), "--run-dir", str(paths.root)]
        refused = runner.invoke(app, base_changed)
        assert refused.exit_code == 2 and "--force" in refused.output and "other-judge" in refused.output
        forced = runner.invoke(app, [*base_changed, "--force"])
        assert forced.exit_code == 0, forced.output
    assert list((paths.root / "superseded").glob("judge:fakejudge-*/fakejudge/*.jsonl"))
    records = [r for f in paths.judgment_files() for r in iter_json_lines(f)]
    assert len(records) == 2 and {r["judge_model"] for r in records} == {"openai/other-judge"}
