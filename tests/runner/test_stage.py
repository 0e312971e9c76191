"""The stage runner's guarantees, tried as a user would (CLI, real files, a priced loopback server):

1. the config guard covers what an alias *means* (provider id, parameters), not only its name;
2. usage, spend and retries are facts of the run folder, summed from the records and the stage log
   across invocations, no-op reruns and formulation-only reruns;
3. the report's cost columns include the formulation calls;
4. a stage whose process died shows "interrupted", not "running".
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.core.run_lock import RunLock
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.commands.test_run_loopback import setup_run, study_server

PRICE = 1e-6


def cli(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def offline_models(path: Path, clinician: str, temperature: float = 0.7) -> Path:
    path.write_text(f"models:\n  clin: {{model: {clinician}, temperature: {temperature}}}\n")
    return path


def generated(tmp_path: Path, n: int = 3) -> Path:
    run_dir = tmp_path / "run"
    assert cli("generate", "--n", str(n), "--run-dir", str(run_dir)).exit_code == 0
    return run_dir


def records_cost(run_dir: Path, roles: tuple[str, ...] = ("clinician", "formulation", "patient", "tracker")) -> float:
    total = 0.0
    for path in RunPaths(run_dir).conversation_files():
        for data in iter_json_lines(path):
            total += sum(data["usage"].get(role, {}).get("cost_usd", 0.0) for role in roles)
    return total


def test_an_alias_that_changes_meaning_is_refused_naming_the_difference(tmp_path):
    run_dir = generated(tmp_path)
    a = offline_models(tmp_path / "a.yaml", "offline/screener")
    b = offline_models(tmp_path / "b.yaml", "offline/anchored")
    base = ["run", "--clinician", "clin", "--patient", "offline/patient", "--run-dir", str(run_dir)]
    assert cli(*base, "--models", str(a), "--limit", "1").exit_code == 0
    before = RunPaths(run_dir).conversations("clin").read_bytes()
    refused = cli(*base, "--models", str(b), "--limit", "2")
    assert refused.exit_code == 2
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and "clinician clin: model" in lines[-1]
    assert "offline/screener" in lines[-1] and "offline/anchored" in lines[-1]
    assert RunPaths(run_dir).conversations("clin").read_bytes() == before  # nothing mixed in
    warmer = offline_models(tmp_path / "c.yaml", "offline/screener", temperature=1.0)
    refused = cli(*base, "--models", str(warmer), "--limit", "2")
    assert refused.exit_code == 2 and "temperature" in refused.output
    # the same meaning under the same name resumes; --force starts over with the new one
    assert cli(*base, "--models", str(a), "--limit", "2").exit_code == 0
    forced = cli(*base, "--models", str(b), "--limit", "1", "--force")
    assert forced.exit_code == 0, forced.output
    models = json.loads(RunPaths(run_dir).manifest.read_text())["stages"]["run"]["additive_models"]["clinician"]
    assert models["clin"]["model"] == "offline/anchored"


def test_a_judge_whose_parameters_change_is_refused(tmp_path):
    run_dir = generated(tmp_path, n=2)
    assert cli("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--run-dir",
               str(run_dir)).exit_code == 0
    judge = tmp_path / "judge.yaml"
    judge.write_text("models:\n  j: {model: offline/judge, max_tokens: 900}\n")
    assert cli("judge", "--judge", "j", "--models", str(judge), "--run-dir", str(run_dir)).exit_code == 0
    judge.write_text("models:\n  j: {model: offline/judge, max_tokens: 400}\n")
    refused = cli("judge", "--judge", "j", "--models", str(judge), "--run-dir", str(run_dir))
    assert refused.exit_code == 2 and "models.judge.j.max_tokens: 900 → 400" in refused.output


def test_spend_usage_and_retries_are_summed_from_the_records_across_invocations(tmp_path):
    first_request = {"seen": False}
    inner = study_server()

    def respond(body, index):  # one 500 in the whole run: retried, and counted once forever
        if not first_request["seen"]:
            first_request["seen"] = True
            return Reply(status=500)
        return inner.responder(body, index)

    with FakeOpenAIServer(respond) as server:
        run_dir, models = setup_run(tmp_path, server, cost=PRICE)
        base = ["run", "--clinician", "doc", "--patient", "pat", "--turns", "2", "--models", str(models),
                "--run-dir", str(run_dir)]
        assert cli(*base, "--limit", "1").exit_code == 0
        assert cli(*base).exit_code == 0  # the second profile
        assert cli(*base).exit_code == 0  # a no-op rerun
        assert cli(*base, "--formulation").exit_code in (0, 1)  # formulations only (their answers may be invalid)
        requests = server.request_count
    manifest = json.loads(RunPaths(run_dir).manifest.read_text())
    stage = manifest["stages"]["run"]
    usage = stage["usage"]
    records = [data for path in RunPaths(run_dir).conversation_files() for data in iter_json_lines(path)]
    formulation_calls = sum(data["usage"]["formulation"]["calls"] for data in records)
    assert formulation_calls >= 2  # one request each (plus a repair when the answer is invalid)
    assert usage["doc"]["calls"] == 2 * 2 + formulation_calls  # two conversations × two turns, and formulations
    assert usage["pat"]["calls"] == 2 * 3  # opening + two replies each
    assert sum(u["calls"] for u in usage.values()) + 1 == requests  # every request but the retried 500
    spent = sum(u["cost_usd"] for u in usage.values())
    assert abs(spent - records_cost(run_dir)) < 1e-9 and spent > 0
    assert stage["retries"]["doc"]["retries"] + stage["retries"].get("pat", {}).get("retries", 0) == 1
    shown = cli("status", "--run-dir", str(run_dir), "--json")
    facts = json.loads(shown.output)["stages"]["run"]
    assert abs(sum(u["cost_usd"] for u in facts["usage"].values()) - spent) < 1e-9
    assert sum(r["retries"] for r in facts["retries"].values()) == 1


def test_report_costs_include_formulation_and_tracker_calls(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server, cost=PRICE)
        result = cli("run", "--clinician", "doc", "--patient", "pat", "--patient-mode", "tracked", "--turns", "2",
                     "--formulation", "--models", str(models), "--run-dir", str(run_dir))
        assert result.exit_code in (0, 1), result.output
    assert cli("judge", "--judge", "offline/judge", "--run-dir", str(run_dir)).exit_code == 0
    assert cli("report", "--quiet", "--run-dir", str(run_dir)).exit_code == 0
    paths = RunPaths(run_dir)
    with open(paths.metrics("clinicians"), encoding="utf-8") as handle:
        import csv

        row = next(csv.DictReader(handle))
    assert abs(float(row["clinician_cost_usd"]) - records_cost(run_dir, ("clinician", "formulation"))) < 1e-9
    with open(paths.report_headline, encoding="utf-8") as handle:
        headline = next(csv.DictReader(handle))
    assert abs(float(headline["cost_usd"]) - records_cost(run_dir)) < 1e-9  # the offline judge costs nothing


def test_a_stage_whose_process_died_shows_interrupted(tmp_path):
    run_dir = generated(tmp_path, n=2)
    paths = RunPaths(run_dir)
    manifest = json.loads(paths.manifest.read_text())
    manifest["stages"]["generate"]["status"] = "running"  # what a SIGKILL mid-stage leaves behind
    manifest["stages"]["generate"].pop("counts", None)
    paths.manifest.write_text(json.dumps(manifest))
    facts = json.loads(cli("status", "--run-dir", str(run_dir), "--json").output)["stages"]["generate"]
    assert facts["status"] == "interrupted" and facts["counts"]["done"] == 2
    with RunLock(paths):  # a live holder: the stage really is running
        facts = json.loads(cli("status", "--run-dir", str(run_dir), "--json").output)["stages"]["generate"]
    assert facts["status"] == "running"
