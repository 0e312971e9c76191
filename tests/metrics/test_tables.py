"""metrics/*.csv from a hand-built run folder: every table, judge errors excluded and counted."""

from __future__ import annotations

import csv

import pytest

from intake_eval.core.records import Usage
from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics.tables import CONVERSATION_COLUMNS, write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.judgment_builders import conversation, judgment, profile

CH, O, TP, OT = "closed_hypothesis", "open", "treatment_planning", "other"
HIDDEN = ("insomnia", "alcohol_use")


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def tables(tmp_path):
    paths = RunPaths(tmp_path / "run")
    append_record(paths.profiles, profile("P00000", alignment="masked", phenotype="bipolar_masked"))
    append_record(paths.profiles, profile("P00001", alignment="aligned", phenotype="trauma_substance"))
    good = [(OT, {}), (CH, {"insomnia": "AD"}), (CH, {"alcohol_use": "AD"}), (TP, {})]  # coverage 1.0, TP 3
    poor = [(OT, {"insomnia": "D"}, False), (O, {}), (TP, {}), (OT, {})]  # coverage 0, bleed .5, TP 2
    for pid in ("P00000", "P00001"):
        for clinician, rows in (("screener", good), ("anchored", poor)):
            convo = conversation([("q", "a")] * 3, profile_id=pid, clinician=clinician)
            convo.usage = {"clinician": Usage(calls=3, prompt_tokens=100, completion_tokens=20, cost_usd=0.01)}
            append_record(paths.conversations(clinician), convo)
            for judge in ("primary", "second"):
                # The second judge disagrees on the anchored clinician's P00001 opening.
                these = [(OT, {})] + rows[1:] if judge == "second" and clinician == "anchored" and pid == "P00001" else rows
                record = judgment(these, hidden=HIDDEN, conversation_id=convo.conversation_id, judge=judge,
                                  clinician=clinician, profile_id=pid)
                record.usage = Usage(calls=4, prompt_tokens=1000, completion_tokens=200, cost_usd=0.002)
                if judge == "primary" and clinician == "screener" and pid == "P00001":
                    # An earlier failed attempt, superseded later in the same (uncompacted) file.
                    failed = record.model_copy(update={"status": "judge_error", "errors": ["turn 2: bad"], "turns": []})
                    append_record(paths.judgments(judge, clinician), failed)
                append_record(paths.judgments(judge, clinician), record)
    # One conversation the primary judge could not label at all.
    broken = conversation([("q", "a")], profile_id="P00002", clinician="anchored")
    append_record(paths.conversations("anchored"), broken.model_copy(update={"status": "model_error"}))
    err = judgment([(OT, {})], hidden=HIDDEN, conversation_id="P00001.x", judge="primary", clinician="anchored",
                   profile_id="P00001", status="judge_error")
    append_record(paths.judgments("primary", "anchored"), err.model_copy(update={"conversation_id": "P00001.extra"}))
    # its conversation is on disk: a judgment of no conversation would be skipped as an orphan
    extra = conversation([("q", "a")] * 3, profile_id="P00001", clinician="anchored")
    append_record(paths.conversations("anchored"), extra.model_copy(update={"conversation_id": "P00001.extra"}))
    return {name: _read(path) for name, path in write_metrics(paths, stage_kinds()).items()}


def test_conversations_csv_one_row_per_conversation_and_judge(tables):
    rows = tables["conversations"]
    assert list(rows[0]) == list(CONVERSATION_COLUMNS)
    assert len(rows) == 2 * 2 * 2 + 1
    by = {(r["judge"], r["clinician"], r["profile_id"], r["status"]): r for r in rows}
    good = by[("primary", "screener", "P00001", "ok")]  # the later ok record superseded the error
    assert (good["active_coverage_rate"], good["bleed_rate"], good["first_treatment_planning_turn"],
            good["premature_closure_turn"], good["patient_leak_count"]) == ("1", "0", "3", "3", "0")
    assert good["alignment"] == "aligned" and good["n_hidden"] == "2" and good["caught_domains"] == "insomnia;alcohol_use"
    poor = by[("primary", "anchored", "P00000", "ok")]
    assert (poor["active_coverage_rate"], poor["bleed_rate"], poor["patient_leak_count"], poor["bled_domains"]) == (
        "0", "0.5", "1", "insomnia")
    error = by[("primary", "anchored", "P00001", "judge_error")]
    assert error["active_coverage_rate"] == "" and error["first_treatment_planning_turn"] == ""


def test_clinicians_headline_excludes_and_counts_judge_errors(tables):
    rows = {(r["judge"], r["clinician"]): r for r in tables["clinicians"]}
    anchored = rows[("primary", "anchored")]
    assert (anchored["n"], anchored["judge_errors"], anchored["conversation_failures"]) == ("2", "1", "1")
    assert anchored["mean_active_coverage"] == "0" and anchored["mean_bleed_rate"] == "0.5"
    assert anchored["median_first_treatment_planning_turn"] == "2" and anchored["first_treatment_planning_undefined"] == "0"
    assert anchored["judge_tokens"] == str(2 * 1200)  # the judge error's record carries no usage here
    screener = rows[("primary", "screener")]
    assert float(screener["mean_active_coverage"]) == 1.0 and screener["mean_active_coverage_ci_low"] == "1"
    assert screener["clinician_tokens"] == "240" and screener["patient_leak_count"] == "0"


def test_cells_domains_trajectories_masking(tables):
    cells = {(r["judge"], r["clinician"], r["phenotype"]): r for r in tables["cells"]}
    assert cells[("primary", "screener", "bipolar_masked")]["mean_active_coverage"] == "1"
    assert cells[("primary", "screener", "bipolar_masked")]["alignment"] == "masked"
    domains = {(r["judge"], r["clinician"], r["domain"]): r for r in tables["domains"]}
    assert domains[("primary", "anchored", "insomnia")]["bleed_rate"] == "1"
    assert domains[("primary", "screener", "alcohol_use")]["active_coverage_rate"] == "1"
    trajectory = {(r["judge"], r["clinician"], r["turn"]): r for r in tables["trajectories"]}
    assert [trajectory[("primary", "screener", str(t))]["mean_cumulative_coverage"] for t in range(4)] == ["0", "0.5", "1", "1"]
    assert trajectory[("primary", "anchored", "2")]["share_treatment_planning"] == "1"
    masking = {(r["judge"], r["clinician"], r["alignment"]): r for r in tables["masking"]}
    assert masking[("primary", "screener", "masked")]["difference_vs_aligned"] == "0"


def test_agreement_and_comparisons(tables):
    agreement = {r["label"]: r for r in tables["agreement"]}
    assert {r["judge_a"] for r in tables["agreement"]} == {"primary"}
    assert agreement["asked_about"]["raw_agreement"] == "1" and agreement["asked_about"]["conversations"] == "4"
    assert float(agreement["disclosed"]["raw_agreement"]) == pytest.approx(31 / 32)
    comparisons = [r for r in tables["comparisons"] if r["judge"] == "second" and r["metric"] == "active_coverage_rate"]
    assert len(comparisons) == 1
    row = comparisons[0]
    assert (row["clinician_a"], row["clinician_b"], row["n_pairs"]) == ("anchored", "screener", "2")
    assert row["mean_difference"] == "-1" and row["permutation_exact"] == "true"
