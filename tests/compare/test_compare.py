"""`intake-eval compare` on two offline runs of the same profiles (minimal vs screening condition),
with a second, deliberately contrary judge added to the first run."""

from __future__ import annotations

import json
import re
from html import unescape as html_unescape
from pathlib import Path
from urllib.parse import parse_qsl

import pandas as pd
import pytest

from tests.helpers.cli import invoke
from tests.helpers.offline_runs import offline_run

pytestmark = pytest.mark.slow  # offline studies end to end

CONTRARY = "contrary-judge"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("compare")
    return offline_run(folder, name="minimal", condition="minimal"), offline_run(folder, name="screening", condition="screening")


def add_contrary_judge(run_dir: Path) -> None:
    """A judge that credits the anchored clinician with everything and the screener with nothing."""
    source = run_dir / "judgments" / "offline__judge"
    target = run_dir / "judgments" / CONTRARY
    target.mkdir()
    for path in source.glob("*.jsonl"):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            record["judge"] = CONTRARY
            generous = record["clinician"] == "offline/anchored"
            for turn in record["turns"]:
                for label in turn["domains"].values():
                    label["asked_about"] = label["disclosed"] = generous and turn["turn"] >= 1
            lines.append(json.dumps(record))
        (target / path.name).write_text("\n".join(lines) + "\n")


def test_compare_pairs_the_runs_and_writes_html_and_markdown(runs, tmp_path):
    minimal, screening = runs
    result = invoke("compare", str(minimal), str(screening))
    assert result.exit_code == 0, result.output
    html = minimal / "compare" / "compare.html"
    assert str(html) == result.output.strip().splitlines()[-1]
    assert "robust to condition minimal → screening" in result.output
    page = html.read_text()
    assert "<style>" in page and "section class='card'" in page and "Paired differences" in page
    paired = pd.read_csv(minimal / "compare" / "compare_paired.csv")
    assert set(paired["metric"]) >= {"active_coverage_rate", "bleed_rate", "premature_closure_turn", "patient_leak_count"}
    coverage = paired[paired["metric"] == "active_coverage_rate"].set_index("entity")
    assert set(coverage.index) == {"offline/screener", "offline/anchored"}
    assert (coverage["n_pairs"] == 8).all()
    tables = {run: pd.read_csv(run / "metrics" / "conversations.csv") for run in runs}
    for clinician, row in coverage.iterrows():
        means = [t[t["clinician"] == clinician]["active_coverage_rate"].mean() for t in tables.values()]
        assert row["mean_a"] == pytest.approx(means[0]) and row["mean_b"] == pytest.approx(means[1])
        assert row["difference"] == pytest.approx(means[1] - means[0])
        assert row["ci_low"] <= row["difference"] <= row["ci_high"]
    markdown = (minimal / "compare" / "compare.md").read_text()
    assert markdown.startswith("# Comparison: minimal vs screening") and "Kendall" in markdown
    # each run's value opens that run's report viewer, filtered to the clinician's scored transcripts
    links = re.findall(r"<a class='to-viewer' href='([^']+)'>", page)
    assert len(links) == 2 * len(paired)
    for href in links:
        target, rest = href.split("?", 1)
        assert (html.parent / target).resolve().is_file() and rest.endswith("#transcript")
        params = dict(parse_qsl(html_unescape(rest.split("#")[0])))
        assert params["clinician"] in {"offline/screener", "offline/anchored"} and params["scored"] == "1"
    assert any("screening/report/index.html" in href and "condition=screening" in href for href in links)


def test_a_contrary_judge_flips_the_ranking_and_the_verdict_says_so(runs, tmp_path):
    minimal, screening = runs
    add_contrary_judge(minimal)
    out = tmp_path / "out"
    result = invoke("compare", str(minimal), str(screening), "--out", str(out))
    assert result.exit_code == 0, result.output
    markdown = (out / "compare.md").read_text()
    assert f"minimal · {CONTRARY}: depends on judge: ordering flips for offline/anchored vs offline/screener" in \
        result.output.replace("\n", " ")
    assert "| -1.00 |" in markdown  # Kendall's τ of the reversed ranking
    assert f"| minimal · {CONTRARY} | -1.00 | +1.00 | -1.00 |" in markdown  # its row of the τ matrix
    assert "robust to condition minimal → screening" in markdown
    assert "offline/anchored > offline/screener" in markdown  # the contrary judge's paired conclusion


def test_runs_of_other_profiles_are_refused_in_one_line(runs, tmp_path):
    other = offline_run(tmp_path, name="other", n=6)
    result = invoke("compare", str(runs[0]), str(other))
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "different generate config" in result.output
    single = invoke("compare", str(other))
    assert single.exit_code == 2 and "nothing to compare" in single.output


def test_one_run_with_two_judges_gets_the_judge_sensitivity_alone(runs, tmp_path):
    minimal = runs[0]
    if not (minimal / "judgments" / CONTRARY).exists():
        add_contrary_judge(minimal)
    result = invoke("compare", str(minimal), "--out", str(tmp_path / "one"))
    assert result.exit_code == 0, result.output
    assert "depends on judge: ordering flips" in result.output
    assert "One run: no run-to-run differences." in (tmp_path / "one" / "compare.html").read_text()


def test_the_report_of_a_run_with_two_judges_shows_the_judge_sensitivity(runs):
    minimal, screening = runs
    if not (minimal / "judgments" / CONTRARY).exists():
        add_contrary_judge(minimal)
    assert invoke("report", "--run-dir", str(minimal), "--quiet").exit_code == 0
    page = (minimal / "report" / "index.html").read_text()
    assert "Sensitivity to judge choice" in page
    assert "depends on judge: ordering flips for offline/anchored vs offline/screener" in page
    assert invoke("report", "--run-dir", str(screening), "--quiet").exit_code == 0
    assert "Sensitivity to judge choice" not in (screening / "report" / "index.html").read_text()  # one judge


def test_paired_tables_carry_holm_adjusted_p_and_state_the_interval(runs, tmp_path):
    from statsmodels.stats.multitest import multipletests

    minimal, screening = runs
    result = invoke("compare", str(minimal), str(screening), "--out", str(tmp_path / "holm"))
    assert result.exit_code == 0, result.output
    paired = pd.read_csv(tmp_path / "holm" / "compare_paired.csv")
    for _, family in paired.groupby(["run_a", "run_b"]):  # one paired table = one family
        defined = family[family["permutation_p"].notna()]
        _, expected, _, _ = multipletests(defined["permutation_p"], method="holm")
        assert list(defined["permutation_p_holm"]) == pytest.approx(list(expected), rel=1e-5)
    assert set(paired["ci_method"]) == {"profile bootstrap (profiles resampled with replacement; B=2000; 95% percentile)"}
    markdown = (tmp_path / "holm" / "compare.md").read_text()
    assert "| Holm-adjusted p |" in markdown and "Holm's step-down adjustment" in markdown
    assert "Conclusion (Holm-adjusted p < 0.05" in markdown
