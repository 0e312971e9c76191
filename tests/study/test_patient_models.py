"""Several patient models in one study, end to end: the offline patient and a loopback OpenAI-compatible
patient (real recorded chat-completions answers, tests/study/loopback_patient.py) interview the same
profiles; records carry the patient, the headline pools them, metrics/patient_models.csv breaks coverage
down per patient model with intervals, and the report states a patient-model sensitivity verdict."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, iter_records
from tests.study.loopback_patient import run_loopback_study

STUDY = """\
name: two-patients
seed: 11
profiles: {n: 6, mode: stratified}
generator: offline/generator
patient: {mode: prompted}
patients: [offline/patient, loop-patient]
clinicians: [offline/screener, offline/anchored]
judges: [offline/judge]
turns: 6
concurrency: 4
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def study_run(tmp_path_factory: pytest.TempPathFactory):
    study = run_loopback_study(tmp_path_factory.mktemp("patients"), STUDY)
    run_dir, env = study.run_dir, study.env
    estimate = CliRunner().invoke(app, ["estimate", str(study.config), "--models", str(study.models), "--json"], env=env)
    status = CliRunner().invoke(app, ["status", "--json", "--run-dir", str(run_dir)], env=env)
    text = CliRunner().invoke(app, ["status", "--run-dir", str(run_dir)], env=env)
    assert text.exit_code == 0, text.output
    assert "run with patient loop-patient: 12 ok, 0 failed, 0 not started" in text.output
    return run_dir, study.chat_calls, estimate, status


def test_each_patient_model_interviews_every_profile(study_run) -> None:
    run_dir, loop_calls, _estimate, _status = study_run
    conversations = [c for path in RunPaths(run_dir).conversation_files() for c in iter_records(path, Conversation)]
    by_patient: dict[str, set[tuple[str, str]]] = {}
    for conversation in conversations:
        assert conversation.ok, conversation.error
        by_patient.setdefault(conversation.patient, set()).add((conversation.profile_id, conversation.clinician))
        assert f".p-{conversation.patient.replace('/', '__')}." in conversation.conversation_id
    assert set(by_patient) == {"offline/patient", "loop-patient"}
    assert by_patient["offline/patient"] == by_patient["loop-patient"]
    assert len(by_patient["loop-patient"]) == 6 * 2
    # one opening per profile for the loopback patient, then one answer per clinician turn
    assert loop_calls == 6 + 6 * 2 * 6
    loop = next(c for c in conversations if c.patient == "loop-patient")
    assert loop.patient_model == "openai/loop-patient" and loop.usage["patient"].cost_usd > 0


def test_headline_pools_patient_models_and_the_breakdown_has_intervals(study_run) -> None:
    run_dir = study_run[0]
    metrics = run_dir / "metrics"
    breakdown = _rows(metrics / "patient_models.csv")
    assert {row["patient"] for row in breakdown} == {"offline/patient", "loop-patient"}
    for row in breakdown:
        assert row["n"] == "6" and row["mean_active_coverage_ci_low"] != "" and row["mean_active_coverage_ci_high"] != ""
    clinicians = {row["clinician"]: row for row in _rows(metrics / "clinicians.csv")}
    for clinician, headline in clinicians.items():
        per_patient = [float(row["mean_active_coverage"]) for row in breakdown if row["clinician"] == clinician]
        # equal weight per patient model: the pooled mean is the mean of the patient models' means
        assert float(headline["mean_active_coverage"]) == pytest.approx(sum(per_patient) / len(per_patient))
        assert headline["ci_method"].startswith("profile bootstrap pooled over patient models")
        assert headline["n"] == "12" and headline["n_profiles"] == "6"
    conversations = _rows(metrics / "conversations.csv")
    assert {row["patient"] for row in conversations} == {"offline/patient", "loop-patient"}


def test_report_shows_coverage_by_patient_model_and_a_sensitivity_verdict(study_run) -> None:
    run_dir = study_run[0]
    page = (run_dir / "report" / "index.html").read_text()
    assert "By patient model" in page and "loop-patient" in page
    assert "Sensitivity to the patient model" in page
    assert ("robust to patient model" in page) or ("depends on patient model" in page)
    summary = (run_dir / "report" / "summary.md").read_text()
    assert "## By patient model" in summary


def test_estimate_and_status_count_every_patient_model(study_run) -> None:
    _run_dir, _calls, estimate, status = study_run
    assert estimate.exit_code == 0, estimate.output
    data = json.loads(estimate.output)
    assert data["conversations"] == 6 * 2 * 2
    run_lines = [line for line in data["lines"] if line["stage"] == "run" and line["role"] == "patient"]
    assert {line["alias"] for line in run_lines} == {"offline/patient", "loop-patient"}
    assert status.exit_code == 0, status.output
    run = json.loads(status.output)["stages"]["run"]
    assert run["counts"]["planned"] == 6 * 2 * 2 and run["counts"]["ok"] == 24
    assert run["per_patient"] == {"offline/patient": {"ok": 12, "failed": 0, "not_started": 0},
                                  "loop-patient": {"ok": 12, "failed": 0, "not_started": 0}}


def test_patients_and_patient_model_together_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(STUDY.replace("patient: {mode: prompted}", "patient: {mode: prompted, model: offline/patient}"))
    result = CliRunner().invoke(app, ["estimate", str(config)])
    assert result.exit_code == 2 and "patients:" in result.output and "patient.model" in result.output


def test_the_generator_may_not_be_a_patient_model(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(STUDY.replace("generator: offline/generator", "generator: loop-patient"))
    result = CliRunner().invoke(app, ["estimate", str(config)])
    assert result.exit_code == 2 and "leakage guard" in result.output
