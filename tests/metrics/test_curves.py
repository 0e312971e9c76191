"""Time-to-first-probe and still-probing curves (metrics/probe_curves.csv) against hand-computed
Kaplan–Meier estimates and Greenwood log-log bands."""

from __future__ import annotations

import csv
import math

import pytest

from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics.curves import PROBE_CURVE_COLUMNS, kaplan_meier
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from intake_eval.report.build import build_report
from tests.helpers.judgment_builders import conversation, judgment, profile

CH, O, TP, OT = "closed_hypothesis", "open", "treatment_planning", "other"


def _band(survival: float, greenwood_sum: float) -> tuple[float, float]:
    """The log-log 95 % band by hand: S ** exp(± z · sqrt(Σ d/(n(n−d))) / |log S|)."""
    spread = 1.959963984540054 * math.sqrt(greenwood_sum) / abs(math.log(survival))
    return survival ** math.exp(spread), survival ** math.exp(-spread)


def test_kaplan_meier_matches_the_hand_computed_case():
    # Five units: events at turns 2, 3, 3; censored at 3 and 5 (still at risk at 3: censoring follows events).
    points = kaplan_meier([2, 3, 3, 3, 5], [True, True, True, False, False], horizon=6)
    assert [p.turn for p in points] == list(range(7))
    assert [p.at_risk for p in points] == [5, 5, 5, 4, 1, 1, 0]
    assert [p.events for p in points] == [0, 0, 1, 2, 0, 0, 0]
    assert [p.censored for p in points] == [0, 0, 0, 1, 0, 1, 0]
    # S(2) = 4/5; S(3) = 4/5 · (1 − 2/4) = 0.4, flat after
    assert [p.survival for p in points] == pytest.approx([1, 1, 0.8, 0.4, 0.4, 0.4, 0.4])
    low, high = _band(0.8, 1 / (5 * 4))
    assert (points[2].ci_low, points[2].ci_high) == (pytest.approx(low), pytest.approx(high))
    low, high = _band(0.4, 1 / (5 * 4) + 2 / (4 * 2))
    assert (points[3].ci_low, points[3].ci_high) == (pytest.approx(low), pytest.approx(high))
    assert points[0].ci_low == points[0].ci_high == 1


def test_curve_at_zero_has_an_empty_band_and_no_events_stays_at_one():
    points = kaplan_meier([1, 2], [True, True], horizon=2)
    assert [p.survival for p in points] == pytest.approx([1, 0.5, 0])
    assert points[2].ci_low is None and points[2].ci_high is None
    flat = kaplan_meier([3, 4], [False, False], horizon=4)
    assert [p.survival for p in flat] == [1.0] * 5
    assert [p.censored for p in flat] == [0, 0, 0, 1, 1]


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_probe_curves_csv_from_a_run_folder_and_its_report_section(tmp_path):
    paths = RunPaths(tmp_path / "run")
    hidden = ("insomnia", "alcohol_use")
    append_record(paths.profiles, profile("P00000", hidden=hidden))
    append_record(paths.profiles, profile("P00001", hidden=hidden))
    # A: insomnia asked at 1, alcohol at 3, advice from 4 (closes at 4). B: insomnia at 2, alcohol never, still probing at 3.
    a = [(OT, {}), (CH, {"insomnia": "AD"}), (O, {}), (CH, {"alcohol_use": "A"}), (TP, {})]
    b = [(OT, {}), (O, {}), (CH, {"insomnia": "A"}), (O, {})]
    for pid, rows in (("P00000", a), ("P00001", b)):
        convo = conversation([("q", "a")] * (len(rows) - 1), profile_id=pid, clinician="c")
        append_record(paths.conversations("c"), convo)
        append_record(paths.judgments("j", "c"), judgment(rows, hidden=hidden, conversation_id=convo.conversation_id,
                                                           clinician="c", profile_id=pid))
    rows = _read(write_metrics(paths, stage_kinds())["probe_curves"])
    assert list(rows[0]) == list(PROBE_CURVE_COLUMNS)
    curve = lambda name, domain: [r for r in rows if r["curve"] == name and r["domain"] == domain]
    pooled = curve("not_yet_asked", "all")
    # units (1, asked) (3, asked) (2, asked) (3, censored): S = 1, 3/4, 1/2, 1/4 at turns 0..3
    assert [float(r["survival"]) for r in pooled] == pytest.approx([1, 0.75, 0.5, 0.25])
    assert [int(r["at_risk"]) for r in pooled] == [4, 4, 3, 2]
    assert {r["n"] for r in pooled} == {"4"}
    alcohol = curve("not_yet_asked", "alcohol_use")
    assert [float(r["survival"]) for r in alcohol] == pytest.approx([1, 1, 1, 0.5])
    probing = curve("still_probing", "all")
    # A closes at 4, B never closes (censored at 3): S = 1 up to 3, 0 at 4
    assert [float(r["survival"]) for r in probing] == pytest.approx([1, 1, 1, 1, 0])
    assert probing[-1]["ci_low"] == "" and probing[-1]["events"] == "1"
    page = build_report(paths.root).index.read_text(encoding="utf-8")
    section = page[page.index("When domains get probed"):]
    assert "Leak-adjusted active coverage" in section
    assert "Conversations still probing" in section and "<svg" in section
    assert "alcohol_use" in section and "50.0% (n=2)" in section  # alcohol asked by the end in 1 of 2
