"""The trust sections of the report: patient QC, judge vs human annotation, repeated trials.

A synthetic run folder (real records) with a second trial per profile, patient QC from
`intake-eval qc-patient`, an annotation pack exported, filled by two annotators and imported;
then `intake-eval report`: every figure of the three CSVs must appear in index.html and summary.md.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import QUESTION_TYPES, Profile
from intake_eval.core.store import JsonlWriter, RunPaths, iter_records
from intake_eval.report import fmt
from intake_eval.report.trust_section import (
    annotation_rows,
    qc_domain_rows,
    qc_rows,
    trials_rows,
)
from tests.helpers.report_runs import make_conversation, make_judgment, synth_run

runner = CliRunner()
CLINICIANS = ("offline/screener", "offline/anchored")
JUDGES = ("offline/judge", "cross-judge")


def _invoke(*args: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output


def _add_second_trial(paths: RunPaths) -> None:
    profiles = list(iter_records(paths.profiles, Profile))
    rng = random.Random("trial-1")
    for clinician in CLINICIANS:
        conversations = JsonlWriter(paths.conversations(clinician))
        judgments = {judge: JsonlWriter(paths.judgments(judge, clinician)) for judge in JUDGES}
        for profile in profiles:
            conversation, plan = make_conversation(profile, clinician, 12, rng, trial=1)
            conversations.write(conversation)
            for k, judge in enumerate(JUDGES):
                judgment = make_judgment(conversation, profile, plan, judge, random.Random(conversation.conversation_id),
                                         noise=0.04 * k)
                judgment.trial = conversation.trial
                judgments[judge].write(judgment)
        for writer in (conversations, *judgments.values()):
            writer.close()


def _annotate(paths: RunPaths, tmp: Path) -> None:
    _invoke("annotate", "export", "--n", "24", "--judge", "offline/judge", "--run-dir", str(paths.root))
    key = {item["item_id"]: item for item in json.loads(paths.annotation_key.read_text())["items"]}
    with open(paths.annotation_sheet, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    files = []
    for name, flip in (("alice", 0.1), ("bob", 0.25)):
        rng = random.Random(name)
        for row in rows:
            truth = key[row["item_id"]]
            asked = truth["asked_about"] != (rng.random() < flip)
            disclosed = truth["disclosed"] != (rng.random() < flip)
            qtype = rng.choice(QUESTION_TYPES) if rng.random() < flip else truth["question_type"]
            row.update(annotator=name, asked_about="yes" if asked else "no", disclosed="yes" if disclosed else "no",
                       question_type=qtype)
        target = tmp / f"{name}.csv"
        with open(target, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        files.append(str(target))
    _invoke("annotate", "import", *files, "--run-dir", str(paths.root))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trust")
    paths = synth_run(tmp / "run", n_profiles=6, clinicians=CLINICIANS, judges=JUDGES)
    _add_second_trial(paths)
    _invoke("qc-patient", "--patient", "offline/patient", "--n", "3", "--run-dir", str(paths.root))
    _annotate(paths, tmp)
    _invoke("report", "--run-dir", str(paths.root))
    html = paths.report_index.read_text(encoding="utf-8")
    summary = paths.report_summary.read_text(encoding="utf-8")
    return paths, html, summary


def _table(path: Path):
    import pandas as pd

    return pd.read_csv(path)


def _escaped(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def test_patient_qc_rates_with_wilson_intervals_are_in_the_report(run):
    paths, html, summary = run
    table = _table(paths.metrics("patient_qc"))
    assert set(table["metric"]) == {"disclosure_recall", "leak_rate", "invention_rate"}
    assert 'id="patient-qc"' in html and "## Simulated patient QC" in summary
    (row,) = qc_rows(table)
    for metric, cell in zip(("disclosure_recall", "leak_rate", "invention_rate"), row[2:5]):
        source = table[table["metric"] == metric].iloc[0]
        assert cell.startswith(f"{fmt.pct(source['rate'])} {fmt.ci(source['ci_low'], source['ci_high'])}")
        assert f"({source['successes']}/{source['n']})" in cell
        assert _escaped(cell) in html and cell in summary


def test_patient_qc_per_domain_table(run):
    paths, html, _ = run
    table = _table(paths.metrics("patient_qc_domains"))
    rows = qc_domain_rows(table)
    assert {r[0] for r in rows} == set(table["domain"])
    recall = table[table["metric"] == "disclosure_recall"].iloc[0]
    missed = int(recall["n"]) - int(recall["successes"])
    (shown,) = [r for r in rows if r[0] == recall["domain"]]
    assert shown[3] == f"{fmt.pct(missed / recall['n'], 0)} ({missed}/{recall['n']})"
    assert "What the patient gets wrong, by domain" in html
    assert all(_escaped(cell) in html for cell in shown)
    assert 'id="extra-patient_qc_domains"' not in html  # shown inside the QC section, not twice


def test_judge_kappa_is_shown_next_to_the_human_baseline(run):
    paths, html, summary = run
    table = _table(paths.metrics("annotation_agreement"))
    assert set(table["comparison"]) == {"judge_vs_human", "human_vs_human"}
    assert 'id="annotation"' in html and "## Judge vs human annotation" in summary
    rows = annotation_rows(table)
    assert [r[0] for r in rows] == ["asked about", "disclosed", "question type"]
    human = table[(table["comparison"] == "human_vs_human") & (table["label"] == "disclosed")].iloc[0]
    judge = table[(table["comparison"] == "judge_vs_human") & (table["label"] == "disclosed") & (table["rater_b"] == "bob")].iloc[0]
    disclosed = rows[1]
    assert f"alice vs bob: {fmt.kappa(human['kappa'])}" in disclosed[2]
    assert f"offline/judge vs bob: {fmt.kappa(judge['kappa'])}" in disclosed[1]
    assert _escaped(disclosed[1]) in html and _escaped(disclosed[2]) in html
    assert disclosed[1] in summary and disclosed[2] in summary


def test_trials_section_shows_sd_nested_ci_and_consistency(run):
    paths, html, summary = run
    table = _table(paths.metrics("trials"))
    primary = table[table["judge"] == "offline/judge"]
    assert len(primary) == len(CLINICIANS) and (primary["trials"] == 2).all()
    assert 'id="trials"' in html and "## Repeated trials: stability" in summary
    for row, (_, source) in zip(trials_rows(primary), primary.iterrows()):
        assert row[4] == f"{source['between_trial_sd'] * 100:.1f} pts"
        assert row[6] == fmt.ci(source["ci_low"], source["ci_high"]) and row[7] == fmt.ci(source["naive_ci_low"], source["naive_ci_high"])
        assert row[8] == f"{source['caught_all']} / {source['caught_any']}" and row[9] == fmt.pct(source["consistency"])
        assert "| " + " | ".join(row) + " |" in summary
        assert all(_escaped(cell) in html for cell in row)


def test_judge_command_keeps_trials_csv_current(run, tmp_path):
    paths, _, _ = run
    paths.metrics("trials").unlink()
    _invoke("judge", "--judge", "offline/judge", "--mode", "conversation", "--run-dir", str(paths.root))
    judges = set(_table(paths.metrics("trials"))["judge"])
    assert judges == {"offline/judge", "cross-judge", "offline/judge+conversation"}
