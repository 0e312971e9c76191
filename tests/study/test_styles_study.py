"""An offline study with two patient styles, end to end: config, QC per style, run, judge, report, estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.study.config import load_study_config
from tests.helpers.offline_runs import STUDY, offline_run

STYLES = "patient_styles: [forthcoming, guarded]\nqc: {enabled: true, profiles: 3, max_early_resolution: 0.5}\n"


@pytest.fixture(scope="module")
def styled_study(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("study"), name="styled", n=6, extra=STYLES)


def test_the_study_runs_every_clinician_with_every_style_and_says_so_in_the_manifest(styled_study):
    manifest = json.loads((styled_study / "manifest.json").read_text())
    run = manifest["stages"]["run"]
    assert run["counts"]["planned"] == 6 * 2 * 2 and run["counts"]["ok"] == 24
    assert run["config"]["patient_styles"] == ["forthcoming", "guarded"]
    assert {"qc-patient offline/patient tracked offline/judge",
            "qc-patient offline/patient tracked guarded offline/judge"} <= set(manifest["stages"])


def test_the_report_shows_coverage_by_style_with_intervals_and_what_the_style_changed(styled_study):
    page = (styled_study / "report" / "index.html").read_text()
    assert "Patient behaviour styles" in page and "Does coverage hold up?" in page
    assert "coverage with guarded patients" in page
    assert "words per reply on average" in page  # what the style changed in the patients' speech
    assert "How the patient spoke" in page and "PSI-Bench" in page
    summary = (styled_study / "report" / "summary.md").read_text()
    assert "offline/screener · minimal · tracked: coverage with guarded patients holds up" in summary


def test_a_style_the_study_does_not_know_is_one_line_naming_the_key(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(STUDY.format(name="bad", n=2, condition="minimal", judges="[offline/judge]")
                      + "patient_styles: [forthcoming, shy]\n")
    with pytest.raises(IntakeEvalError, match="patient_styles.*shy"):
        load_study_config(config)


def test_conversations_and_estimated_calls_multiply_with_styles(tmp_path):
    from intake_eval.study.pipeline import estimate_config

    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    base = STUDY.format(name="est", n=4, condition="minimal", judges="[offline/judge]")
    one.write_text(base)
    two.write_text(base + "patient_styles: [forthcoming, guarded]\n")
    assert load_study_config(two).conversation_count == 2 * load_study_config(one).conversation_count
    calls = {}
    for name, path in (("one", one), ("two", two)):
        estimate = estimate_config(path)
        calls[name] = {line.stage: 0 for line in estimate.lines}
        for line in estimate.lines:
            calls[name][line.stage] += line.calls
    assert calls["two"]["run"] == pytest.approx(2 * calls["one"]["run"], rel=0.2)
    assert calls["two"]["judge"] == pytest.approx(2 * calls["one"]["judge"], rel=0.2)


def test_status_says_the_styles_multiply_the_conversations(styled_study):
    from typer.testing import CliRunner

    from intake_eval.cli import app

    result = CliRunner().invoke(app, ["status", "--run-dir", str(styled_study)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "patient styles: forthcoming, guarded" in result.output
    assert "24 conversations planned (12 per style)" in result.output
