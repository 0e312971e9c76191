"""`intake_eval.load_run`: typed records and DataFrames that equal the run's CSVs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import intake_eval
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Conversation, Judgment, Profile
from tests.helpers.offline_runs import offline_run

pytestmark = pytest.mark.slow  # offline studies end to end


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("api"))


def test_dataframes_equal_the_metrics_csvs(run_dir):
    run = intake_eval.load_run(run_dir)
    csvs = sorted(p.stem for p in (run_dir / "metrics").glob("*.csv"))
    assert {"conversations", "clinicians", "turn_labels", "cells", "domains"} <= set(csvs)
    assert sorted(run.metrics) == csvs
    for name in csvs:  # each CSV, plus the arm column where a table has clinician, condition and patient mode
        pd.testing.assert_frame_equal(run.metrics[name].drop(columns="arm", errors="ignore"),
                                      pd.read_csv(run_dir / "metrics" / f"{name}.csv"))
    pd.testing.assert_frame_equal(run.conversations.drop(columns="arm"), pd.read_csv(run_dir / "metrics" / "conversations.csv"))


def test_every_arm_table_offers_the_arm_column(run_dir):
    run = intake_eval.load_run(run_dir)
    for frame in (run.conversations, run.turn_labels, run.metrics["clinicians"]):
        expected = frame["clinician"] + " · " + frame["condition"] + " · " + frame["patient_mode"]
        assert list(frame["arm"]) == list(expected)
    # grouping by arm never pools two arms of one clinician (the README's example)
    by_arm = run.turn_labels.groupby("arm")["asked_about"].mean()
    assert len(by_arm) == len(run.conversations[["clinician", "condition", "patient_mode"]].drop_duplicates())


def test_records_are_typed_and_match_the_tables(run_dir):
    run = intake_eval.load_run(run_dir)
    assert len(run.records.profiles) == 8 and all(isinstance(p, Profile) for p in run.records.profiles)
    assert len(run.records.conversations) == 16 and all(isinstance(c, Conversation) for c in run.records.conversations)
    assert all(isinstance(j, Judgment) for j in run.records.judgments)
    assert sorted(c.conversation_id for c in run.records.conversations) == sorted(run.conversations["conversation_id"])


def test_turn_labels_are_long_form_and_rebuild_active_coverage(run_dir):
    run = intake_eval.load_run(run_dir)
    labels = run.turn_labels
    expected_rows = sum(len(t.domains) for j in run.records.judgments for t in j.turns)
    assert len(labels) == expected_rows
    assert not labels.duplicated(["conversation_id", "judge", "turn", "domain"]).any()
    assert labels["asked_about"].dtype == bool and labels["hidden"].dtype == bool
    # active coverage = hidden domains with some turn both asked about and disclosed, over the hidden count
    hidden = labels[labels["hidden"]]
    caught = (hidden.assign(hit=hidden["asked_about"] & hidden["disclosed"])
              .groupby(["conversation_id", "judge", "domain"])["hit"].any()
              .groupby(["conversation_id", "judge"]).sum())
    table = run.conversations.set_index(["conversation_id", "judge"])
    rebuilt = (caught.reindex(table.index, fill_value=0) / table["n_hidden"]).rename("active_coverage_rate")
    pd.testing.assert_series_equal(rebuilt, table["active_coverage_rate"], check_exact=False, check_dtype=False, atol=1e-6)


def test_an_old_metrics_folder_gains_turn_labels_and_a_missing_folder_is_one_error(run_dir, tmp_path):
    (run_dir / "metrics" / "turn_labels.csv").unlink()
    assert len(intake_eval.load_run(run_dir).turn_labels) > 0
    with pytest.raises(IntakeEvalError, match="no such run folder"):
        intake_eval.load_run(tmp_path / "nowhere")
    with pytest.raises(IntakeEvalError, match="no such metrics table"):
        intake_eval.load_run(run_dir).table("nothing")


def test_import_intake_eval_stays_light():
    code = "import sys, intake_eval; print(any(m.startswith(('pandas', 'intake_eval.api')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_tables_are_read_only_when_used(run_dir):
    run = intake_eval.load_run(run_dir)
    assert "turn_labels" in run.metrics and len(run.metrics) == len(list((run_dir / "metrics").glob("*.csv")))
    assert len(run.conversations)
    assert sorted(run.metrics._read) == ["conversations"]
