"""`intake-eval report` on real run folders (synthetic records written with the store)."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths
from intake_eval.report import fmt
from tests.helpers.report_runs import synth_run

runner = CliRunner()


def _run_report(root: Path, *extra: str):
    result = runner.invoke(app, ["report", "--run-dir", str(root), *extra])
    assert result.exit_code == 0, result.output
    return result


class _Headline(HTMLParser):
    """Collects data-metric/data-value cells per headline row (data-arm)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, dict[str, str]]] = {}
        self._arm: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-arm" in attrs:
            self._arm = attrs["data-arm"]
            self.rows[self._arm] = {}
        elif tag == "td" and self._arm and "data-metric" in attrs:
            self.rows[self._arm][attrs["data-metric"]] = attrs

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._arm = None


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _ie_data(html: str) -> dict:
    match = re.search(r"window\.IE_DATA = (\{.*?\});</script>", html, re.S)
    assert match, "IE_DATA missing"
    return json.loads(match.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> RunPaths:
    root = tmp_path_factory.mktemp("report") / "study"
    paths = synth_run(root, n_profiles=14, clinicians=("offline/screener", "offline/anchored", "llama-3.3-70b"),
                      failures=1, judge_errors=1)
    _run_report(root)
    return paths


def test_report_writes_a_self_contained_page_summary_and_shards(full_run: RunPaths):
    html = full_run.report_index.read_text(encoding="utf-8")
    for section in ("headline", "matrix", "domains", "trajectories", "agreement", "profiles", "transcript", "provenance"):
        assert f'id="{section}"' in html
    assert html.count("<svg") >= 5  # forest, matrix, domains, trajectory, question mix
    assert not re.search(r'(src|href)="(https?:)?//', html), "the page must not reference the network"
    shards = sorted(full_run.report_shards_dir.glob("*.js"))
    assert shards and all(s.read_text(encoding="utf-8").startswith("IE_SHARD(") for s in shards)
    data = _ie_data(html)
    assert {c[1] for c in data["convs"]} == {s.stem for s in shards}
    assert len(data["convs"]) == 14 * 3
    assert data["primary"] == "offline/judge" and data["judges"] == ["offline/judge", "cross-judge"]
    assert len(html) < 400_000  # transcripts live in the shards, not the page
    assert full_run.metrics("clinicians").exists() and full_run.report_summary.exists()
    assert "ab12cd34ab12" in html  # config hash in the provenance footer


def test_numbers_agree_between_html_csv_and_markdown(full_run: RunPaths):
    parser = _Headline()
    parser.feed(full_run.report_index.read_text(encoding="utf-8"))
    clinicians = {r["clinician"]: r for r in _csv(full_run.metrics("clinicians")) if r["judge"] == "offline/judge"}
    headline = {r["arm"]: r for r in _csv(full_run.report_headline)}
    summary = full_run.report_summary.read_text(encoding="utf-8")
    assert set(parser.rows) == set(clinicians) == set(headline)
    for arm, cells in parser.rows.items():
        source = clinicians[arm]
        pairs = {"coverage_mean": "mean_active_coverage", "bleed_mean": "mean_bleed_rate",
                 "first_tp_median": "median_first_treatment_planning_turn",
                 "closure_median": "median_premature_closure_turn", "leak_total": "patient_leak_count",
                 "failures": "conversation_failures", "n_scored": "n"}
        for metric, column in pairs.items():
            shown, expected = cells[metric]["data-value"], source[column]
            assert (shown == expected == "") or float(shown) == pytest.approx(float(expected), abs=1e-12), (arm, metric)
            assert float(headline[arm][metric] or "nan") == pytest.approx(float(expected or "nan"), nan_ok=True)
        assert float(cells["coverage_mean"]["data-ci-low"]) == pytest.approx(float(source["mean_active_coverage_ci_low"]))
        assert float(cells["coverage_mean"]["data-ci-high"]) == pytest.approx(float(source["mean_active_coverage_ci_high"]))
        assert int(cells["closure_median"]["data-never"]) == int(source["premature_closure_undefined"])
        # The Markdown row for this arm carries the same formatted numbers.
        line = next(l for l in summary.splitlines() if l.startswith(f"| {arm} |"))
        cov = fmt.pct(float(source["mean_active_coverage"]))
        ci = fmt.ci(float(source["mean_active_coverage_ci_low"]), float(source["mean_active_coverage_ci_high"]))
        assert f"| {cov} {ci} |" in line
        assert f"| {fmt.turn(float(source['median_first_treatment_planning_turn']))} ({source['first_treatment_planning_undefined']}) |" in line
    screener, anchored = (float(clinicians[c]["mean_active_coverage"]) for c in ("offline/screener", "offline/anchored"))
    assert screener > 0.8 > 0.3 > anchored
    # the failed conversation and the judge error are counted in every view
    assert parser.rows["offline/screener"]["failures"]["data-value"] == "1"
    assert parser.rows["offline/screener"]["judge_errors"]["data-value"] == "1"


def test_drilldown_squares_match_caught_domains(full_run: RunPaths):
    data = _ie_data(full_run.report_index.read_text(encoding="utf-8"))
    rows = {r["conversation_id"]: r for r in _csv(full_run.metrics("conversations")) if r["judge"] == "offline/judge"}
    checked = 0
    for cid, _shard, _arm, pid, status, codes, _trial, coverage in data["convs"]:
        row = rows.get(cid)
        if not codes:
            assert status != "ok" or row is None or row["status"] != "ok"
            continue
        hidden = data["profiles"][pid][2]
        caught = {d for d, code in zip(hidden, codes) if code == "3"}
        assert caught == set(filter(None, row["caught_domains"].split(";")))
        assert coverage == pytest.approx(float(row["active_coverage_rate"]))
        checked += 1
    assert checked >= 30


def test_matrix_and_markdown_list_every_phenotype_hardest_first(full_run: RunPaths):
    cells = [r for r in _csv(full_run.metrics("cells")) if r["judge"] == "offline/judge"]
    summary = full_run.report_summary.read_text(encoding="utf-8")
    section = summary.split("## Coverage matrix")[1].split("###")[0]
    names = [l.split("|")[1].strip().rstrip(" ▲") for l in section.splitlines() if l.startswith("| ") and "Phenotype" not in l and ":---" not in l]
    assert set(names) == {r["phenotype"] for r in cells}
    weighted = {p: sum(float(r["mean_active_coverage"]) * int(r["n"]) for r in cells if r["phenotype"] == p)
                / sum(int(r["n"]) for r in cells if r["phenotype"] == p) for p in names}
    assert [weighted[p] for p in names] == sorted(weighted[p] for p in names)
    assert "▲" in section  # masked phenotypes are marked


def test_partial_run_one_clinician_one_judge_says_what_is_missing(tmp_path: Path):
    paths = synth_run(tmp_path / "partial", n_profiles=6, clinicians=("offline/screener",), judges=("offline/judge",))
    # a conversation that was run but not judged yet, and a profile with no conversation
    lines = paths.judgments("offline/judge", "offline/screener").read_text(encoding="utf-8").splitlines()
    paths.judgments("offline/judge", "offline/screener").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    result = _run_report(paths.root)
    assert result.stdout.strip().endswith("index.html")
    html = paths.report_index.read_text(encoding="utf-8")
    assert "1 of 6 finished conversations not judged yet" in html
    assert "Agreement needs two judges" in html
    assert "not judged yet" in paths.report_summary.read_text(encoding="utf-8")


def test_conversations_without_judgments_still_give_a_transcript_report(tmp_path: Path):
    paths = synth_run(tmp_path / "early", n_profiles=3, clinicians=("offline/anchored",), judges=())
    result = _run_report(paths.root)
    html = paths.report_index.read_text(encoding="utf-8")
    assert "no judgments yet" in html and "no judgments yet" in result.output
    assert len(_ie_data(html)["convs"]) == 3


def test_stale_metrics_are_recomputed(tmp_path: Path):
    paths = synth_run(tmp_path / "stale", n_profiles=4, clinicians=("offline/screener",), judges=("offline/judge",))
    _run_report(paths.root)
    paths.metrics("clinicians").write_text("judge,clinician\nbogus,bogus\n", encoding="utf-8")
    import os
    import time

    old = time.time() - 100
    os.utime(paths.metrics("conversations"), (old, old))  # older than the judgments → refreshed
    _run_report(paths.root)
    assert "bogus" not in paths.metrics("clinicians").read_text(encoding="utf-8")


def test_optional_metric_tables_get_their_own_section(tmp_path: Path):
    paths = synth_run(tmp_path / "extra", n_profiles=4, clinicians=("offline/screener",), judges=("offline/judge",))
    _run_report(paths.root)
    paths.metrics("safety").write_text("clinician,suicide_screening_rate,n\noffline/screener,0.75,4\n", encoding="utf-8")
    _run_report(paths.root, "--quiet")
    html = paths.report_index.read_text(encoding="utf-8")
    assert 'id="extra-safety"' in html and "Safety-critical screening" in html and "75.0%" in html


def test_bad_input_is_one_clear_line(tmp_path: Path):
    result = runner.invoke(app, ["report", "--run-dir", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error:") and "no such run folder" in result.output
    assert "Traceback" not in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["report", "--run-dir", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no conversations yet" in result.output
    paths = synth_run(tmp_path / "run", n_profiles=2, clinicians=("offline/screener",), judges=("offline/judge",))
    result = runner.invoke(app, ["report", "--run-dir", str(paths.root), "--judge", "gemini"])
    assert result.exit_code == 2 and "--judge gemini" in result.output and "offline/judge" in result.output


def test_judge_option_switches_the_primary_judge(tmp_path: Path):
    paths = synth_run(tmp_path / "two", n_profiles=5, clinicians=("offline/screener",), judges=("offline/judge", "cross-judge"))
    _run_report(paths.root, "--judge", "cross-judge", "--quiet")
    data = _ie_data(paths.report_index.read_text(encoding="utf-8"))
    assert data["primary"] == "cross-judge"
    assert "judge: cross-judge" in paths.report_summary.read_text(encoding="utf-8").lower() or \
        "Primary judge: cross-judge" in paths.report_summary.read_text(encoding="utf-8")


def test_help_is_there():
    result = runner.invoke(app, ["report", "--help"])
    assert result.exit_code == 0 and "--run-dir" in result.output and "--open" in result.output


def test_parallel_shard_writing_gives_the_same_files(tmp_path: Path, monkeypatch):
    from intake_eval.report import shards
    from intake_eval.report.build import build_report

    paths = synth_run(tmp_path / "par", n_profiles=25, clinicians=("offline/screener", "offline/anchored"))
    build_report(paths.root)
    serial = {p.name: p.read_bytes() for p in paths.report_shards_dir.glob("*.js")}
    monkeypatch.setattr(shards, "PARALLEL_MIN_CONVERSATIONS", 1)
    build_report(paths.root)
    parallel = {p.name: p.read_bytes() for p in paths.report_shards_dir.glob("*.js")}
    assert len(serial) == 3 and serial == parallel


def test_unchanged_run_keeps_its_shards_and_a_changed_one_rewrites_them(tmp_path: Path):
    import random

    from intake_eval.core.store import append_record
    from intake_eval.report.build import build_report
    from tests.helpers.report_runs import make_conversation, make_profile

    paths = synth_run(tmp_path / "cache", n_profiles=4, clinicians=("offline/screener",), judges=("offline/judge",))
    build_report(paths.root)
    shard = next(paths.report_shards_dir.glob("*.js"))
    first = shard.stat().st_mtime_ns
    build_report(paths.root)
    assert shard.stat().st_mtime_ns == first  # inputs unchanged: shards kept
    profile = make_profile(99, random.Random("x"))
    append_record(paths.profiles, profile)
    conv, _ = make_conversation(profile, "offline/screener", 12, random.Random("x"))
    append_record(paths.conversations("offline/screener"), conv)
    build_report(paths.root)
    data = _ie_data(paths.report_index.read_text(encoding="utf-8"))
    assert conv.conversation_id in {c[0] for c in data["convs"]}
    shard_of = {c[0]: c[1] for c in data["convs"]}
    text = (paths.report_shards_dir / f"{shard_of[conv.conversation_id]}.js").read_text(encoding="utf-8")
    assert conv.conversation_id in text


def test_primary_judge_comes_from_the_manifest(tmp_path: Path):
    paths = synth_run(tmp_path / "order", n_profiles=3, clinicians=("offline/screener",), judges=("zeta-judge", "alpha-judge"))
    _run_report(paths.root, "--quiet")
    data = _ie_data(paths.report_index.read_text(encoding="utf-8"))
    assert data["judges"] == ["zeta-judge", "alpha-judge"]  # the first --judge, not the alphabetical first
