"""qc-patient --patient-style: recall, leaks and how the patient spoke, per style, side by side."""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.errors import IntakeEvalError
from intake_eval.trust.qc_result import QCResult, Rate
from intake_eval.trust.qc_population import population_gate
from tests.study.loopback_patient import loopback_patient, models_file_text


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_qc_patient_reports_recall_leaks_and_the_population_measures_per_style(tmp_path):
    runner = CliRunner()
    run = tmp_path / "run"
    assert runner.invoke(app, ["generate", "--n", "4", "--run-dir", str(run)]).exit_code == 0
    result = runner.invoke(app, ["qc-patient", "--run-dir", str(run), "--patient", "offline/patient", "--n", "4",
                                 "--patient-style", "guarded"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for shown in ("disclosure_recall", "leak_rate", "guarded", "words mean", "mattr", "early resolution share",
                  "repeated phrasing share", "1–35 words"):
        assert shown in result.output
    assert (run / "qc" / "patient_offline__patient_prompted_guarded.jsonl").exists()
    # the default style next to it: both kept, each in its own rows
    assert runner.invoke(app, ["qc-patient", "--run-dir", str(run), "--patient", "offline/patient", "--n", "4"]).exit_code == 0
    rates = _rows(run / "metrics" / "patient_qc.csv")
    assert {(r["patient_style"], r["metric"]) for r in rates} >= {("guarded", "disclosure_recall"),
                                                                  ("forthcoming", "disclosure_recall")}
    recall = {r["patient_style"]: float(r["rate"]) for r in rates if r["metric"] == "disclosure_recall"}
    assert recall == {"guarded": 1.0, "forthcoming": 1.0}  # a guarded patient still discloses when asked
    population = {r["patient_style"]: r for r in _rows(run / "metrics" / "patient_qc_population.csv")}
    assert set(population) == {"guarded", "forthcoming"}
    assert float(population["guarded"]["words_mean"]) < float(population["forthcoming"]["words_mean"])
    assert population["guarded"]["words_target_high"] == "35"


def test_an_unknown_style_is_one_line():
    result = CliRunner().invoke(app, ["qc-patient", "--patient", "offline/patient", "--patient-style", "shy"])
    assert result.exit_code == 2 and "--patient-style shy: unknown patient style" in result.output


def test_the_population_gate_names_what_is_missed():
    result = QCResult("p", "m", "prompted", "j", 1, {"leak_rate": Rate(0, 1), "disclosure_recall": Rate(1, 1),
                                                      "invention_rate": Rate(0, 1)}, {}, style="terse",
                      population={"length_on_target_share": 0.4, "mattr": 0.95})
    population_gate(result, {})
    population_gate(result, {"mattr": (None, 0.97)})
    try:
        population_gate(result, {"length_on_target_share": (0.6, None), "mattr": (None, 0.9)})
    except IntakeEvalError as exc:
        assert "terse" in exc.message and "length_on_target_share 0.40 below 0.6" in exc.message
        assert "mattr 0.95 above 0.9" in exc.message
    else:
        raise AssertionError("the gate let a missed limit through")

def test_qc_patient_checks_every_patient_model_given(tmp_path):
    """--patient repeated: each patient model probed on the same profiles, each in its own rows."""
    runner = CliRunner()
    run = tmp_path / "run"
    assert runner.invoke(app, ["generate", "--n", "3", "--run-dir", str(run)]).exit_code == 0
    with loopback_patient() as server:
        models = tmp_path / "models.yaml"
        models.write_text(models_file_text(server))
        result = runner.invoke(app, ["qc-patient", "--run-dir", str(run), "--models", str(models), "--n", "3",
                                     "--patient", "offline/patient", "--patient", "loop-patient"],
                               env={"LOOP_KEY": "sk-loopback"}, terminal_width=200)
        assert result.exit_code == 0, result.output
        assert len(server.calls("chat")) > 0
    rates = _rows(run / "metrics" / "patient_qc.csv")
    recall = {r["patient"]: float(r["rate"]) for r in rates if r["metric"] == "disclosure_recall"}
    assert set(recall) == {"offline/patient", "loop-patient"}
    assert recall["offline/patient"] == 1.0 and recall["loop-patient"] < 1.0  # the loopback patient never discloses
    twice = runner.invoke(app, ["qc-patient", "--run-dir", str(run), "--patient", "offline/patient",
                                "--patient", "offline/patient"])
    assert twice.exit_code == 2 and "--patient: the same patient model is given twice" in twice.output
