"""Diagnosis-to-domain matching and the diagnosis scores, on hand-worked cases; the metrics writer on a
hand-built run folder; and the offline study end to end (the screener's recall gap over the anchored)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.catalog.load import load_catalog
from intake_eval.cli import app
from intake_eval.core.formulation import Formulation
from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics.clinical import diagnosis_clinician_rows
from intake_eval.metrics.diagnosis import (
    map_diagnosis,
    map_formulation,
    matcher_for,
    score_formulation,
)
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.judgment_builders import conversation, judgment, profile


@pytest.fixture(scope="module")
def matcher():
    return matcher_for(load_catalog())


@pytest.mark.parametrize(("name", "icd10", "domain", "method"), [
    ("Social phobia", "", "social_anxiety", "name"),  # a catalog synonym
    ("GAD", "", "generalized_anxiety", "name"),  # an acronym, case-sensitive
    ("Depression", "", "depression", "name"),  # the domain id
    ("Major depressive disorder, recurrent, moderate", "", "depression", "name_contains"),
    ("Passive suicidal ideation", "", "suicidality", "name_contains"),
    ("Bipolar disorder", "F31.81", "hypomania", "icd10"),  # the specific code beats a generic name
    ("Alcohol use disorder, severe", "f10.20", "alcohol_use", "icd10"),
    ("Generalized anxiety", "F411", "generalized_anxiety", "icd10"),  # a code without its dot
    ("Trauma-related symptoms", "F43.1", "ptsd", "icd10_prefix"),
    ("Major depresive disorder", "", "depression", "fuzzy"),  # a typo
    ("Bipolar I disorder, current episode manic", "", "mania", "name"),  # a phenotype's principal diagnosis
])
def test_diagnoses_map_to_catalog_domains(matcher, name, icd10, domain, method):
    mapped = map_diagnosis(matcher, name, icd10)
    assert (mapped.domain, mapped.method) == (domain, method)


def test_a_code_two_domains_share_is_resolved_by_the_name(matcher):
    harm = map_diagnosis(matcher, "Postpartum OCD", "F42.2")
    plain = map_diagnosis(matcher, "Obsessive-compulsive disorder", "F42.2")
    assert harm.domain == "intrusive_harm_thoughts" and plain.domain == "ocd"
    assert set(harm.candidates) == {"ocd", "intrusive_harm_thoughts"}


@pytest.mark.parametrize(("name", "icd10", "method"), [
    ("Adjustment disorder with mixed anxiety and depressed mood", "F43.23", "unmapped"),  # not a catalog domain
    ("Diagnosis deferred", "R69", "unmapped"),
    ("Psychosis ruled out", "", "negated"),
    ("No evidence of mania", "", "negated"),
])
def test_unknown_or_negated_diagnoses_are_unmapped_and_recorded(matcher, name, icd10, method):
    mapped = map_diagnosis(matcher, name, icd10)
    assert mapped.domain is None and mapped.method == method


def _formulation(principal: tuple[str, str], *differential: tuple[str, str]) -> Formulation:
    return Formulation(chief_complaint="low mood", principal_diagnosis={"name": principal[0], "icd10": principal[1]},
                       differential=[{"name": n, "icd10": c} for n, c in differential], risk_level="low")


def test_scores_on_a_hand_worked_case(matcher):
    # Truth: presents with depression; hidden hypomania (the principal diagnosis: bipolar masked), GAD, alcohol, insomnia.
    formulation = _formulation(("Major depressive disorder", "F32.1"), ("Generalized anxiety disorder", "F41.1"),
                               ("Alcohol use disorder", ""), ("ADHD", ""), ("Adjustment disorder", "F43.2"))
    mappings = map_formulation(matcher, formulation)
    score = score_formulation(mappings, principal_domain="hypomania", presenting="depression",
                              hidden=["hypomania", "generalized_anxiety", "alcohol_use", "insomnia"],
                              actively_covered={"generalized_anxiety", "insomnia"})
    assert [m.slot for m in mappings] == ["principal"] + [f"differential[{i}]" for i in range(4)]
    assert score.principal_mapped == "depression" and score.principal_hit is False
    assert score.named_domains == ["depression", "generalized_anxiety", "alcohol_use", "adhd"]
    assert score.recalled == ["generalized_anxiety", "alcohol_use"] and score.missed == ["hypomania", "insomnia"]
    assert score.comorbidity_recall == 2 / 4
    # Precision leaves out the presenting concern: {GAD, alcohol, ADHD} named, two of them hidden.
    assert score.false_positives == ["adhd"] and score.comorbidity_precision == 2 / 3
    # Alcohol was named but never actively surfaced: one of the two recalled domains is unearned.
    assert score.unearned == ["alcohol_use"] and score.unearned_share == 1 / 2
    assert score.unmapped == ["Adjustment disorder"]


def test_scores_when_only_the_presenting_concern_is_named(matcher):
    mappings = map_formulation(matcher, _formulation(("Major depressive disorder", "F32.1"), ("Dysthymia", "F34.1")))
    score = score_formulation(mappings, principal_domain="depression", presenting="depression",
                              hidden=["insomnia", "panic"], actively_covered=set())
    assert score.principal_hit is True and score.comorbidity_recall == 0.0
    assert score.comorbidity_precision is None and score.unearned_share is None  # undefined, not 0


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_writer_on_a_hand_built_run(tmp_path: Path):
    paths = RunPaths(tmp_path / "run")
    truth = profile(hidden=("insomnia", "alcohol_use", "panic"))  # trauma_substance: principal domain ptsd
    append_record(paths.profiles, truth)
    convo = conversation([("How is your sleep?", "I lie awake for hours."), ("Any panic?", "No.")])
    convo.formulation = {"status": "ok", "repaired": True, "formulation": _formulation(
        ("Posttraumatic stress disorder", "F43.10"), ("Insomnia disorder", "F51.01"), ("Alcohol use disorder", "F10.10"),
        ("Chronic worry", "")).model_dump()}
    failed = conversation([("How is your sleep?", "Bad.")], clinician="offline/anchored")
    failed.formulation = {"status": "invalid", "error": "formulation: risk_level: bad"}
    append_record(paths.conversations(convo.clinician), convo)
    append_record(paths.conversations(failed.clinician), failed)
    hidden = ("insomnia", "alcohol_use", "panic")
    marks = [("other", {}), ("closed_hypothesis", {"insomnia": "AD"}), ("closed_hypothesis", {"panic": "A"})]
    append_record(paths.judgments("j", convo.clinician), judgment(marks, hidden=hidden, conversation_id=convo.conversation_id,
                                                                  clinician=convo.clinician))
    append_record(paths.judgments("j", failed.clinician), judgment(marks[:2], hidden=hidden, clinician=failed.clinician,
                                                                   conversation_id=failed.conversation_id))
    written = write_metrics(paths, stage_kinds())
    assert {"diagnosis", "diagnosis_clinicians", "safety", "safety_clinicians"} <= set(written)
    rows = {r["clinician"]: r for r in _read(written["diagnosis"])}
    ok, bad = rows["offline/screener"], rows["offline/anchored"]
    assert (ok["formulation_status"], ok["formulation_repaired"], ok["principal_hit"]) == ("ok", "true", "true")
    assert ok["recalled_domains"] == "insomnia;alcohol_use" and float(ok["comorbidity_recall"]) == pytest.approx(2 / 3)
    # named besides the presenting depression: ptsd, insomnia, alcohol_use, generalized_anxiety → 2 of 4 hidden
    assert float(ok["comorbidity_precision"]) == 0.5 and ok["false_positive_domains"] == "ptsd;generalized_anxiety"
    assert float(ok["unearned_share"]) == 0.5 and ok["unearned_domains"] == "alcohol_use"
    assert float(ok["active_coverage_rate"]) == pytest.approx(1 / 3)
    mapping = json.loads(ok["mapping"])
    assert mapping[0] == {"slot": "principal", "name": "Posttraumatic stress disorder", "icd10": "F43.10",
                          "domain": "ptsd", "method": "icd10"}
    assert mapping[3]["domain"] == "generalized_anxiety" and mapping[3]["method"] == "name"
    assert bad["formulation_status"] == "invalid" and bad["comorbidity_recall"] == ""
    aggregates = {r["clinician"]: r for r in _read(written["diagnosis_clinicians"])}
    assert aggregates["offline/anchored"]["formulation_failures"] == "1" and aggregates["offline/anchored"]["scored"] == "0"
    assert aggregates["offline/screener"]["formulations_repaired"] == "1"
    assert float(aggregates["offline/screener"]["mean_comorbidity_recall"]) == pytest.approx(2 / 3)


def test_clinician_aggregates_on_hand_worked_rows():
    def row(profile_id, recall, precision, hit, status="ok", formulation="ok"):
        return {"judge": "j", "clinician": "c", "condition": "minimal", "patient_mode": "tracked", "profile_id": profile_id,
                "status": status, "formulation_status": formulation, "formulation_repaired": False,
                "principal_hit": hit, "comorbidity_recall": recall, "comorbidity_precision": precision,
                "unearned_share": 0.0, "active_coverage_rate": 0.5, "n_diagnoses": 3, "n_unmapped": 1}
    rows = [row("P1", 0.5, 1.0, True), row("P2", 1.0, None, False), row("P3", None, None, None, formulation="invalid"),
            row("P4", None, None, None, status="judge_error"), row("P5", None, None, None, formulation="missing")]
    [out] = diagnosis_clinician_rows(rows)
    assert (out["conversations"], out["judge_errors"], out["formulation_failures"], out["scored"]) == (5, 1, 1, 2)
    assert out["formulations_missing"] == 1
    assert out["mean_comorbidity_recall"] == pytest.approx(0.75) and out["principal_hit_rate"] == pytest.approx(0.5)
    assert out["mean_comorbidity_precision"] == 1.0 and out["precision_undefined"] == 1
    assert (out["diagnoses"], out["unmapped_diagnoses"], out["unmapped_share"]) == (6, 2, pytest.approx(1 / 3))


DEMO_SMALL = """
name: small
seed: 7
profiles: {n: 10, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener, offline/anchored]
turns: 12
judges: [offline/judge]
formulation: true
concurrency: 8
qc: {enabled: false}
"""


def test_offline_study_shows_the_recall_gap_and_the_screening_gap(tmp_path: Path):
    config = tmp_path / "small.yaml"
    config.write_text(DEMO_SMALL, encoding="utf-8")
    result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    paths = RunPaths(tmp_path / "run")
    diagnosis = {r["clinician"]: r for r in _read(paths.metrics("diagnosis_clinicians"))}
    safety = {r["clinician"]: r for r in _read(paths.metrics("safety_clinicians"))}
    screener, anchored = diagnosis["offline/screener"], diagnosis["offline/anchored"]
    assert screener["scored"] == anchored["scored"] == "10"
    assert float(screener["mean_comorbidity_recall"]) >= float(anchored["mean_comorbidity_recall"]) + 0.6
    assert float(safety["offline/anchored"]["suicide_screen_rate"]) <= 0.2
    assert float(safety["offline/screener"]["suicide_screen_rate"]) == 1.0
    html = paths.report_index.read_text(encoding="utf-8")
    assert 'id="safety"' in html and 'id="diagnosis"' in html and "under-estimated" in html
    summary = paths.report_summary.read_text(encoding="utf-8")
    assert "## Safety-critical screening" in summary and "## Coverage vs diagnosis" in summary

