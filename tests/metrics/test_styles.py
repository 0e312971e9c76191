"""metrics/styles.csv and metrics/style_pairs.csv from a real offline run with two patient styles."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.metrics.stats import mean_ci, paired_difference_ci
from intake_eval.metrics.styles import change_word


@pytest.fixture(scope="module")
def styled_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("styles") / "run"
    runner = CliRunner()
    for args in (["generate", "--n", "8", "--run-dir", str(run)],
                 ["run", "--run-dir", str(run), "--patient", "offline/patient", "--clinician", "offline/screener",
                  "--clinician", "offline/drifting", "--patient-style", "forthcoming", "--patient-style", "guarded",
                  "--turns", "8"],
                 ["judge", "--run-dir", str(run), "--judge", "offline/judge"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    return run


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _coverage_by_profile(run: Path, clinician: str, style: str) -> dict[str, list[float | None]]:
    groups: dict[str, list[float | None]] = defaultdict(list)
    for row in _rows(run / "metrics" / "conversations.csv"):
        guarded = ".s-guarded." in row["conversation_id"]
        if row["clinician"] == clinician and guarded == (style == "guarded"):
            groups[row["profile_id"]].append(float(row["active_coverage_rate"]))
    return groups


def test_records_carry_the_style_and_every_arm_has_a_row_per_style(styled_run):
    styles = _rows(styled_run / "metrics" / "styles.csv")
    assert {(r["clinician"], r["patient_style"]) for r in styles} == {
        (c, s) for c in ("offline/screener", "offline/drifting") for s in ("forthcoming", "guarded")}
    assert all(r["arm"] == f"{r['clinician']} · minimal · prompted" and r["n"] == "8" for r in styles)
    drifting = next(r for r in styles if r["clinician"] == "offline/drifting" and r["patient_style"] == "guarded")
    expected = mean_ci(_coverage_by_profile(styled_run, "offline/drifting", "guarded"),
                       seed="style|offline/drifting|minimal|prompted|offline/judge|guarded|active_coverage_rate")
    assert float(drifting["active_coverage_rate_mean"]) == pytest.approx(expected.mean)
    assert float(drifting["active_coverage_rate_ci_low"]) == pytest.approx(expected.ci_low)


def test_each_style_is_paired_with_forthcoming_on_the_same_profiles(styled_run):
    pairs = _rows(styled_run / "metrics" / "style_pairs.csv")
    coverage = {r["clinician"]: r for r in pairs if r["metric"] == "active_coverage_rate"}
    assert set(coverage) == {"offline/screener", "offline/drifting"}
    for clinician, row in coverage.items():
        assert (row["style_a"], row["style_b"]) == ("guarded", "forthcoming")
        expected = paired_difference_ci(_coverage_by_profile(styled_run, clinician, "guarded"),
                                        _coverage_by_profile(styled_run, clinician, "forthcoming"),
                                        seed=f"style-pair|{clinician}|minimal|prompted|offline/judge|guarded|"
                                             "active_coverage_rate")
        assert float(row["difference"]) == pytest.approx(expected.mean)
        assert row["change"] == change_word(expected.ci_low, expected.ci_high)
    # the screener asks about every domain, and a guarded patient still discloses when asked
    assert float(coverage["offline/screener"]["difference"]) == 0.0


def test_a_run_without_styles_writes_no_style_tables(tmp_path):
    runner = CliRunner()
    run = tmp_path / "plain"
    for args in (["generate", "--n", "3", "--run-dir", str(run)],
                 ["run", "--run-dir", str(run), "--patient", "offline/patient", "--clinician", "offline/screener",
                  "--turns", "4"],
                 ["judge", "--run-dir", str(run), "--judge", "offline/judge"]):
        assert runner.invoke(app, args).exit_code == 0
    assert not (run / "metrics" / "styles.csv").exists()
    population = _rows(run / "metrics" / "patient_population.csv")
    assert [r["patient_style"] for r in population] == ["forthcoming"]


def test_change_words():
    assert change_word(-0.2, -0.01) == "drops"
    assert change_word(0.01, 0.2) == "rises"
    assert change_word(-0.1, 0.1) == "no detectable change"
    assert change_word(None, None) == "not estimable"
