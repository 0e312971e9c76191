"""Judge calibration on a real run folder: a calibration pack, filled by a rule-following "annotator",
gives metrics/calibrated.csv with the PPI estimate next to the judge-only one."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

import intake_eval
from intake_eval.core.errors import IntakeEvalError
from tests.helpers.cli import invoke
from tests.helpers.offline_runs import offline_run

pytestmark = pytest.mark.slow  # offline studies end to end

LATE = 4  # the rule-following annotator: the judge is right, except that nothing after turn 4 counts as asked


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("calibration"))


def fill(run_dir: Path, target: Path, *, strict: bool, skip_conversation: str | None = None) -> Path:
    key = json.loads((run_dir / "annotations" / "key.json").read_text())
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item_id", "annotator", "asked_about", "disclosed", "question_type"])
        for item in key["items"]:
            if item["conversation_id"] == skip_conversation and item["turn"] == 1:
                continue
            asked = item["asked_about"] and not (strict and item["turn"] > LATE)
            writer.writerow([item["item_id"], "ann", "yes" if asked else "no", "yes" if item["disclosed"] else "no",
                             item["question_type"]])
    return target


def strict_truth(run_dir: Path) -> pd.Series:
    """Active coverage per clinician as the annotator's rule would rate every conversation."""
    run = intake_eval.load_run(run_dir)
    labels = run.turn_labels[run.turn_labels["hidden"]]
    hit = labels["asked_about"] & labels["disclosed"] & (labels["turn"] <= LATE)
    caught = labels.assign(hit=hit).groupby(["conversation_id", "domain"])["hit"].any().groupby("conversation_id").sum()
    conversations = run.conversations.set_index("conversation_id")
    rate = caught.reindex(conversations.index, fill_value=0) / conversations["n_hidden"]
    return rate.groupby(conversations["clinician"]).mean()


def test_export_samples_whole_conversations_per_arm_and_plans_the_labels(run_dir):
    result = invoke("annotate", "export", "--for-calibration", "--n", "5", "--ci-width", "0.2", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    assert "Labelled conversations needed for a 95% CI of width 0.20" in result.output
    assert "if 10% disagree" in result.output
    assert "run folder: billed" in result.output and "records' cost" in result.output  # the closing money line
    key = json.loads((run_dir / "annotations" / "key.json").read_text())
    assert key["mode"] == "calibration" and sorted(key["population"].values()) == [8, 8]
    assert sorted(len(ids) for ids in key["sampled"].values()) == [5, 5]
    sampled = {cid for ids in key["sampled"].values() for cid in ids}
    assert {item["conversation_id"] for item in key["items"]} <= sampled
    judged = intake_eval.load_run(run_dir).turn_labels
    expected = judged[judged["conversation_id"].isin(sampled) & judged["hidden"] & (judged["turn"] >= 1)]
    assert len(key["items"]) == len(expected)  # every clinician turn × hidden domain of each sampled conversation


def test_import_writes_the_calibrated_estimate_beside_the_judge_only_one(run_dir, tmp_path):
    assert invoke("annotate", "export", "--for-calibration", "--n", "5", "--run-dir", str(run_dir)).exit_code == 0
    key = json.loads((run_dir / "annotations" / "key.json").read_text())
    one = min(key["sampled"].values())[0]
    filled = fill(run_dir, tmp_path / "ann.csv", strict=True, skip_conversation=one)
    result = invoke("annotate", "import", str(filled), "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    assert "corrected for judge error" in result.output
    assert "run folder: billed" in result.output  # the closing money line
    table = pd.read_csv(run_dir / "metrics" / "calibrated.csv")
    arms = table[table["scope"] == "clinician"].set_index("clinician")
    assert sorted(arms["n_labelled"]) == [4, 5]  # the half-labelled conversation does not count
    assert arms["n_incomplete"].sum() == 1
    truth = strict_truth(run_dir)
    run = intake_eval.load_run(run_dir).conversations.set_index("conversation_id")
    for clinician, row in arms.iterrows():
        assert row["judge_mean"] == pytest.approx(run[run["clinician"] == clinician]["active_coverage_rate"].mean())
        assert row["calibrated_ci_low"] <= truth[clinician] + 1e-9 <= row["calibrated_ci_high"] + 2e-9
    # the estimate is the PPI formula over the labelled conversations
    screener = arms.loc["offline/screener"]
    assert screener["judge_bias"] == pytest.approx(screener["judge_mean"] - screener["calibrated_mean"], abs=1e-5)
    assert screener["judge_mean"] > truth["offline/screener"]  # the generous judge over-credits late questions
    report = invoke("report", "--run-dir", str(run_dir), "--quiet")
    assert report.exit_code == 0, report.output
    page = (run_dir / "report" / "index.html").read_text()
    assert "Judge calibration" in page and "Calibrated [95% CI]" in page
    summary = (run_dir / "report" / "summary.md").read_text()
    calibrated = f"{screener['calibrated_mean'] * 100:.1f}%"
    assert "## Judge calibration" in summary and calibrated in summary


def test_an_annotator_who_agrees_with_the_judge_changes_nothing(run_dir, tmp_path):
    assert invoke("annotate", "export", "--for-calibration", "--n", "8", "--run-dir", str(run_dir), "--force").exit_code == 0
    assert invoke("annotate", "import", str(fill(run_dir, tmp_path / "same.csv", strict=False)),
                  "--run-dir", str(run_dir)).exit_code == 0
    table = pd.read_csv(run_dir / "metrics" / "calibrated.csv")
    arms = table[table["scope"] == "clinician"]
    assert (arms["n_labelled"] == 8).all()  # everything labelled: the human mean is the answer
    assert (arms["calibrated_mean"] - arms["judge_mean"]).abs().max() < 1e-6


def test_a_plain_pack_is_not_calibrated_and_bad_flags_are_one_line(run_dir, tmp_path):
    bad = invoke("annotate", "export", "--for-calibration", "--ci-width", "2", "--run-dir", str(run_dir))
    assert bad.exit_code == 2 and "--ci-width 2" in bad.output
    capped = invoke("annotate", "export", "--for-calibration", "--n", "99999999999", "--run-dir", str(run_dir))
    assert capped.exit_code == 2 and "--n 99,999,999,999" in capped.output and "1,000,000" in capped.output
    (run_dir / "metrics" / "calibrated.csv").unlink(missing_ok=True)
    assert invoke("annotate", "export", "--n", "6", "--run-dir", str(run_dir), "--force").exit_code == 0
    imported = invoke("annotate", "import", str(fill(run_dir, tmp_path / "plain.csv", strict=True)), "--run-dir", str(run_dir))
    assert imported.exit_code == 0, imported.output
    assert "corrected for judge error" not in imported.output
    assert not (run_dir / "metrics" / "calibrated.csv").exists()
    from intake_eval.core.store import RunPaths
    from intake_eval.trust.calibration import import_calibration

    with pytest.raises(IntakeEvalError, match="not a calibration pack"):
        import_calibration(RunPaths(run_dir), [tmp_path / "plain.csv"])
