"""The declared metrics (metrics/registry) are what every table shows: each declared column is present in
metrics/conversations.csv, metrics/clinicians.csv, report/headline.csv, the page's headline and summary.md;
a metric declared in a test appears in all of them with nothing else edited; hidden_asked_rate on a
hand-worked transcript and against domains.csv's asked_rate."""

from __future__ import annotations

import csv
import dataclasses
import re
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths
from intake_eval.metrics import registry
from intake_eval.metrics.figures import figures, turn_labels
from intake_eval.report import fmt
from tests.helpers.judgment_builders import HIDDEN, judgment
from tests.helpers.report_runs import synth_run

runner = CliRunner()
DESIGN = Path(__file__).resolve().parents[3] / "shared" / "DESIGN.md"


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def _report(root: Path) -> None:
    result = runner.invoke(app, ["report", "--run-dir", str(root)])
    assert result.exit_code == 0, result.output


def _headline_cells(html: str) -> dict[str, dict[str, str]]:
    """data-arm → data-metric → data-value of the page's headline table."""
    table = html[html.index('id="headline-table"'):]
    table = table[:table.index("</table>")]
    rows = {}
    for arm, body in re.findall(r'<tr data-arm="([^"]+)">(.*?)</tr>', table, re.S):
        rows[arm] = dict(re.findall(r'data-metric="([^"]+)" data-value="([^"]*)"', body))
    return rows


def assert_declared_columns_everywhere(paths: RunPaths) -> None:
    """Every declared metric column is in every table that lays it out (none silently dropped)."""
    conversations, clinicians = _header(paths.metrics("conversations")), _header(paths.metrics("clinicians"))
    headline = _header(paths.report_headline)
    html = paths.report_index.read_text(encoding="utf-8")
    summary = paths.report_summary.read_text(encoding="utf-8")
    cells = _headline_cells(html)
    assert cells
    for metric in registry.METRICS:
        assert metric.name in conversations, metric.name
        if metric.aggregate is not None:
            missing = [c for c in metric.aggregate.columns() if c not in clinicians]
            assert not missing, (metric.name, missing)
        if metric.headline:
            keys = [c.key for c in metric.aggregate.headline_columns(metric.short)]
            assert set(keys) <= set(headline), (metric.name, keys)
            assert all(keys[0] in row for row in cells.values()), metric.name
            assert f"<th>{metric.header()}" in html and metric.definition in html
            summary_header = next(line for line in summary.splitlines() if line.startswith("| Clinician |"))
            assert f"| {metric.plain_header()[:1].upper()}{metric.plain_header()[1:]} |" in summary_header


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory) -> RunPaths:
    root = tmp_path_factory.mktemp("registry") / "run"
    paths = synth_run(root, n_profiles=8, clinicians=("offline/screener", "offline/anchored"), failures=1)
    _report(root)
    return paths


def test_every_declared_metric_column_is_written_and_shown(reported_run: RunPaths):
    assert_declared_columns_everywhere(reported_run)


def test_the_check_fails_when_a_declared_column_is_missing(reported_run: RunPaths, tmp_path: Path):
    """The column check can fail: drop mean_bleed_rate from a copy of clinicians.csv."""
    import shutil

    copy = RunPaths(tmp_path / "copy")
    shutil.copytree(reported_run.root, copy.root)
    rows = _csv(copy.metrics("clinicians"))
    columns = [c for c in rows[0] if c != "mean_bleed_rate"]
    with open(copy.metrics("clinicians"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(AssertionError, match="bleed_rate"):
        assert_declared_columns_everywhere(copy)


def test_headline_numbers_are_the_declared_aggregates_of_clinicians_csv(reported_run: RunPaths):
    primary = {(r["clinician"]): r for r in _csv(reported_run.metrics("clinicians")) if r["judge"] == "offline/judge"}
    headline = {r["clinician"]: r for r in _csv(reported_run.report_headline)}
    for column in registry.headline_columns():
        for clinician, row in headline.items():
            expected = primary[clinician][column.column]
            assert (row[column.key] == expected == "") or float(row[column.key]) == pytest.approx(float(expected)), \
                (clinician, column)


def test_definitions_are_design_md_sentences():
    if not DESIGN.exists():
        pytest.skip("the shared DESIGN.md is not next to this checkout")
    design = DESIGN.read_text(encoding="utf-8")
    stated = dict(re.findall(r"^- (\w+)(?: \([^)]*\))?: (.+)$", design, re.M))
    for name in ("active_coverage_rate", "bleed_rate", "first_treatment_planning_turn", "premature_closure_turn",
                 "patient_leak_count"):
        assert registry.by_name()[name].definition == stated[name]


def test_hidden_asked_rate_on_a_worked_transcript():
    # insomnia asked (not disclosed) at 1; alcohol asked and disclosed at 2; panic disclosed unasked at 3;
    # ptsd never mentioned: asked about 2 of 4 hidden domains, whatever the patient disclosed.
    j = judgment([("other", {}), ("closed_hypothesis", {"insomnia": "A"}), ("closed_hypothesis", {"alcohol_use": "AD"}),
                  ("open", {"panic": "D"}), ("treatment_planning", {})])
    labels = turn_labels(j)
    row = registry.metric_row(registry.Judged(labels, HIDDEN, figures(labels, HIDDEN)))
    assert row["hidden_asked_rate"] == pytest.approx(2 / 4)
    assert row["active_coverage_rate"] == pytest.approx(1 / 4) and row["bleed_rate"] == pytest.approx(1 / 4)
    none_hidden = registry.metric_row(registry.Judged(labels, (), figures(labels, ())))
    assert none_hidden["hidden_asked_rate"] is None  # undefined, never 0


def test_hidden_asked_rate_agrees_with_domains_csv(reported_run: RunPaths):
    """Summed over an arm's conversations, hidden_asked_rate × n_hidden counts what domains.csv's asked_rate counts."""
    asked, hidden = defaultdict(float), defaultdict(int)
    for row in _csv(reported_run.metrics("conversations")):
        if row["status"] == "ok":
            key = (row["judge"], row["clinician"])
            asked[key] += float(row["hidden_asked_rate"]) * int(row["n_hidden"])
            hidden[key] += int(row["n_hidden"])
    by_domain, domain_n = defaultdict(float), defaultdict(int)
    for row in _csv(reported_run.metrics("domains")):
        key = (row["judge"], row["clinician"])
        by_domain[key] += float(row["asked_rate"]) * int(row["n"])
        domain_n[key] += int(row["n"])
    assert asked and set(asked) == set(by_domain)
    for key in asked:
        assert asked[key] == pytest.approx(by_domain[key], rel=1e-5) and hidden[key] == domain_n[key]


def _closed_share(judged: registry.Judged) -> float | None:
    clinician = [t for t in judged.turns if t.turn >= 1]
    return sum(t.question_type == "closed_hypothesis" for t in clinician) / len(clinician) if clinician else None


def test_a_metric_declared_once_appears_in_every_table(tmp_path: Path, monkeypatch):
    """The payoff: one declaration (with its computation) and the metric is in conversations.csv,
    clinicians.csv, report/headline.csv, the page's headline and summary.md."""
    closed = registry.Metric("closed_question_share", "clinician turns whose question_type is closed_hypothesis, "
                             "÷ clinician turns.", _closed_share, "closed questions",
                             aggregate=registry.Mean("mean_closed_question_share"), short="closed", headline=True,
                             generation=4)
    monkeypatch.setattr(registry, "METRICS", (*registry.METRICS, closed))
    paths = synth_run(tmp_path / "run", n_profiles=6)
    _report(paths.root)
    assert_declared_columns_everywhere(paths)
    assert _header(paths.metrics("conversations"))[-1] == "closed_question_share"  # a new generation goes last
    assert _header(paths.metrics("clinicians"))[-1] == "mean_closed_question_share"
    by_arm = defaultdict(list)
    for row in _csv(paths.metrics("conversations")):
        if row["status"] == "ok":
            turns = int(row["n_turns"])
            assert float(row["closed_question_share"]) == pytest.approx(int(row["n_closed_hypothesis"]) / turns, rel=1e-5)
            by_arm[(row["judge"], row["clinician"])].append(float(row["closed_question_share"]))
    for row in _csv(paths.metrics("clinicians")):
        values = by_arm[(row["judge"], row["clinician"])]
        assert float(row["mean_closed_question_share"]) == pytest.approx(sum(values) / len(values), rel=1e-5)
    cells = _headline_cells(paths.report_index.read_text(encoding="utf-8"))
    headline = {r["arm"]: r for r in _csv(paths.report_headline)}
    for arm, row in cells.items():
        assert float(row["closed_mean"]) == pytest.approx(float(headline[arm]["closed_mean"]))
    summary = paths.report_summary.read_text(encoding="utf-8")
    shown = fmt.pct(float(next(iter(headline.values()))["closed_mean"]))
    assert "| Closed questions |" in summary and shown in summary


def test_compare_tests_exactly_the_declared_compared_metrics():
    compared = registry.compared_metrics()
    assert list(compared) == ["active_coverage_rate", "bleed_rate", "first_treatment_planning_turn",
                              "premature_closure_turn", "patient_leak_count"]
    assert all(dataclasses.is_dataclass(m) and m.aggregate is not None for m in compared.values())
