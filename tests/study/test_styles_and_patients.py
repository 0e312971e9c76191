"""Both patient axes in one study, end to end: two behaviour styles (forthcoming, guarded) crossed with two
patient models (the offline patient and a loopback OpenAI-compatible patient answering in the recorded
chat-completions shape). Every profile is interviewed once per patient model and style; ids carry both
segments; the report shows coverage by style and by patient model with intervals and a patient-model
sensitivity verdict; patient QC ran for every (patient model, style)."""

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

PROFILES, TURNS = 4, 4
STUDY = f"""\
name: styles-and-patients
seed: 5
profiles: {{n: {PROFILES}, mode: stratified}}
generator: offline/generator
patient: {{mode: prompted}}
patients: [offline/patient, loop-patient]
patient_styles: [forthcoming, guarded]
clinicians: [offline/drifting, offline/screener]
judges: [offline/judge]
turns: {TURNS}
concurrency: 4
qc: {{enabled: true, profiles: 2, max_leak_rate: 1.0, min_recall: null}}
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def crossed_study(tmp_path_factory: pytest.TempPathFactory):
    study = run_loopback_study(tmp_path_factory.mktemp("crossed"), STUDY)
    status = CliRunner().invoke(app, ["status", "--json", "--run-dir", str(study.run_dir)], env=study.env)
    assert status.exit_code == 0, status.output
    return study.run_dir, json.loads(status.output)


def test_every_profile_meets_every_patient_model_in_every_style(crossed_study) -> None:
    run_dir, status = crossed_study
    conversations = [c for path in RunPaths(run_dir).conversation_files() for c in iter_records(path, Conversation)]
    cells = {(c.patient, c.patient_style, c.profile_id, c.clinician) for c in conversations if c.ok}
    assert len(conversations) == len(cells) == PROFILES * 2 * 2 * 2
    for conversation in conversations:
        segment = ".s-guarded." if conversation.patient_style == "guarded" else None
        assert f".p-{conversation.patient.replace('/', '__')}." in conversation.conversation_id
        assert (segment in conversation.conversation_id) if segment else ".s-" not in conversation.conversation_id
    assert status["stages"]["run"]["counts"]["planned"] == PROFILES * 2 * 2 * 2
    qc_stages = [name for name in status["stages"] if name.startswith("qc-patient ")]
    assert len(qc_stages) == 4  # each patient model in each style


def test_coverage_by_style_and_by_patient_model_have_intervals(crossed_study) -> None:
    metrics = crossed_study[0] / "metrics"
    styles = _rows(metrics / "styles.csv")
    assert {row["patient_style"] for row in styles} == {"forthcoming", "guarded"}
    patients = _rows(metrics / "patient_models.csv")
    assert {row["patient"] for row in patients} == {"offline/patient", "loop-patient"}
    for row in patients:
        assert row["mean_active_coverage_ci_low"] != "" and row["mean_active_coverage_ci_high"] != ""
        assert row["n_profiles"] == str(PROFILES)


def test_the_report_has_both_breakdowns_and_a_patient_model_verdict(crossed_study) -> None:
    page = (crossed_study[0] / "report" / "index.html").read_text()
    assert "Patient behaviour styles" in page and "coverage with guarded patients" in page
    assert "By patient model" in page and "Sensitivity to the patient model" in page
    assert ("robust to patient model" in page) or ("depends on patient model" in page)
