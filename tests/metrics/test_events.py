"""Leak-adjusted coverage and the per-domain event table (metrics/domain_events.csv).

A hand-worked judgment fixes the definitions; a seeded run folder of random judgments is then
re-computed from the raw JSON lines, independently of metrics.figures, and must match the CSVs
row by row."""

from __future__ import annotations

import csv
import json
import random

import pytest

from intake_eval.core.records import Usage
from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics import figures as metrics
from intake_eval.metrics.events import DOMAIN_EVENT_COLUMNS
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from tests.helpers.judgment_builders import conversation, judgment, profile

CH, O, TP, OT = "closed_hypothesis", "open", "treatment_planning", "other"
HIDDEN = ("insomnia", "alcohol_use", "panic", "ptsd")


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# ---- hand-worked

WORKED = [
    (OT, {"insomnia": "D"}),                       # 0: insomnia volunteered in the opening (a leak)
    (CH, {"alcohol_use": "A"}),                    # 1: alcohol asked, denied
    (CH, {"alcohol_use": "AD", "insomnia": "AD"}),  # 2: both caught
    (O, {"panic": "D"}),                           # 3: panic volunteered (a leak)
    (CH, {"panic": "AD", "ptsd": "A"}),            # 4: panic caught, ptsd asked and denied
    (TP, {}),                                      # 5: advice
]


def test_hand_worked_events_and_leak_adjusted_coverage():
    result = metrics.figures(metrics.turn_labels(judgment(WORKED, hidden=HIDDEN)), HIDDEN)
    events = {o.domain: (o.first_asked_turn, o.first_disclosed_turn, o.first_covered_turn, o.leaked)
              for o in result.outcomes}
    assert events == {
        "insomnia": (2, 0, 2, True),
        "alcohol_use": (1, 2, 2, False),
        "panic": (4, 3, 4, True),
        "ptsd": (4, None, None, False),
    }
    assert result.metrics.active_coverage_rate == 0.75  # insomnia, alcohol, panic of 4
    # insomnia and panic leaked: of alcohol and ptsd only alcohol was caught
    assert result.metrics.leak_adjusted_active_coverage_rate == 0.5
    assert result.metrics.overshared is True
    assert metrics.last_clinician_turn(metrics.turn_labels(judgment(WORKED, hidden=HIDDEN))) == 5


def test_a_denial_then_a_volunteered_disclosure_is_a_leak():
    rows = [(OT, {}), (CH, {"panic": "A"}), (O, {}), (O, {"panic": "D"})]
    outcome = metrics.domain_outcomes(judgment(rows, hidden=("panic",)), ("panic",))[0]
    assert (outcome.first_asked_turn, outcome.first_disclosed_turn, outcome.leaked) == (1, 3, True)
    assert metrics.leak_adjusted_active_coverage_rate(judgment(rows, hidden=("panic",)), ("panic",)) is None


def test_no_leak_leaves_active_coverage_unchanged_and_everything_leaked_is_undefined():
    asked = [(OT, {}), (CH, {"panic": "AD"}), (CH, {"ptsd": "A"})]
    m = metrics.conversation_metrics(judgment(asked, hidden=("panic", "ptsd")), ("panic", "ptsd"))
    assert (m.active_coverage_rate, m.leak_adjusted_active_coverage_rate, m.overshared) == (0.5, 0.5, False)
    leaked = [(OT, {"panic": "D", "ptsd": "D"}), (CH, {"panic": "AD"})]
    m = metrics.conversation_metrics(judgment(leaked, hidden=("panic", "ptsd")), ("panic", "ptsd"))
    assert (m.active_coverage_rate, m.leak_adjusted_active_coverage_rate, m.overshared) == (0.5, None, True)
    m = metrics.conversation_metrics(judgment([(OT, {})], hidden=()), ())
    assert (m.leak_adjusted_active_coverage_rate, m.overshared) == (None, False)


# ---- an independent re-computation from the raw records

def _random_rows(rng: random.Random, n_turns: int) -> list:
    rows = []
    for _ in range(n_turns + 1):
        marks = {d: rng.choice(["", "", "", "A", "D", "AD"]) for d in HIDDEN}
        rows.append((rng.choice([CH, O, TP, OT]), marks))
    return rows


@pytest.fixture
def run(tmp_path):
    rng = random.Random("leak-events")
    paths = RunPaths(tmp_path / "run")
    hidden_of = {"P00000": ("insomnia", "alcohol_use"), "P00001": ("insomnia", "panic"),
                 "P00002": ("alcohol_use", "insomnia", "panic")}
    for pid, hidden in hidden_of.items():
        append_record(paths.profiles, profile(pid, hidden=hidden))
    for pid in hidden_of:
        for clinician in ("screener", "anchored"):
            convo = conversation([("q", "a")] * 6, profile_id=pid, clinician=clinician)
            convo.usage = {"clinician": Usage(calls=6)}
            append_record(paths.conversations(clinician), convo)
            for judge in ("primary", "second"):
                record = judgment(_random_rows(rng, rng.randint(0, 6)), hidden=HIDDEN,
                                  conversation_id=convo.conversation_id, judge=judge, clinician=clinician, profile_id=pid)
                append_record(paths.judgments(judge, clinician), record)
    return paths, hidden_of


def _recompute(paths: RunPaths, hidden_of: dict) -> tuple[list[dict], dict]:
    """Events and the two new conversation columns straight from the JSON lines, the obvious way."""
    events, conversations = [], {}
    for path in sorted(paths.judgment_files()):
        for line in path.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            turns = sorted(data["turns"], key=lambda t: t["turn"])
            hidden = hidden_of[data["profile_id"]]
            leaked, caught = set(), set()
            for domain in hidden:
                asked = [t["turn"] for t in turns if t["domains"][domain]["asked_about"]]
                told = [t for t in turns if t["domains"][domain]["disclosed"]]
                both = [t["turn"] for t in told if t["domains"][domain]["asked_about"]]
                unasked = bool(told) and not told[0]["domains"][domain]["asked_about"]
                if unasked:
                    leaked.add(domain)
                if both:
                    caught.add(domain)
                events.append({
                    "conversation_id": data["conversation_id"], "judge": data["judge"], "domain": domain,
                    "first_asked_turn": str(asked[0]) if asked else "",
                    "first_disclosed_turn": str(told[0]["turn"]) if told else "",
                    "first_covered_turn": str(both[0]) if both else "",
                    "first_disclosure_unasked": str(unasked).lower(),
                    "actively_covered": str(bool(both)).lower(),
                    "last_turn": str(max([t["turn"] for t in turns if t["turn"] >= 1], default=0)),
                })
            kept = [d for d in hidden if d not in leaked]
            rate = len(caught - leaked) / len(kept) if kept else None
            conversations[(data["conversation_id"], data["judge"])] = (rate, str(bool(leaked)).lower(), data["clinician"])
    return events, conversations


def test_csvs_match_an_independent_recomputation_row_by_row(run):
    paths, hidden_of = run
    written = write_metrics(paths, stage_kinds())
    expected_events, expected_conversations = _recompute(paths, hidden_of)
    rows = _read(written["domain_events"])
    assert list(rows[0]) == list(DOMAIN_EVENT_COLUMNS)
    assert len(rows) == sum(len(h) for h in hidden_of.values()) * 2 * 2
    key = lambda r: (r["judge"], r["conversation_id"], r["domain"])
    got = sorted(({k: r[k] for k in expected_events[0]} for r in rows), key=key)
    assert got == sorted(expected_events, key=key)
    assert any(r["first_disclosure_unasked"] == "true" for r in rows)
    assert any(r["first_disclosure_unasked"] == "false" and r["actively_covered"] == "true" for r in rows)
    clinician_of = {r["conversation_id"]: r["clinician"] for r in _read(written["conversations"])}
    for row in _read(written["domains"]):
        these = [e for e in expected_events if e["judge"] == row["judge"] and e["domain"] == row["domain"]
                 and clinician_of[e["conversation_id"]] == row["clinician"]]
        leaked = sum(e["first_disclosure_unasked"] == "true" for e in these)
        assert float(row["leak_rate"]) == pytest.approx(leaked / len(these), abs=1e-5)
    conversations = _read(written["conversations"])
    assert len(conversations) == len(expected_conversations)
    for row in conversations:
        rate, overshared, _ = expected_conversations[(row["conversation_id"], row["judge"])]
        assert row["overshared"] == overshared
        if rate is None:
            assert row["leak_adjusted_active_coverage_rate"] == ""
        else:
            assert float(row["leak_adjusted_active_coverage_rate"]) == pytest.approx(rate, abs=1e-6)
    for row in _read(written["clinicians"]):
        arm = [v for (_, judge), v in expected_conversations.items()
               if judge == row["judge"] and v[2] == row["clinician"]]
        rates = [rate for rate, _, _ in arm if rate is not None]
        assert float(row["mean_leak_adjusted_active_coverage"]) == pytest.approx(sum(rates) / len(rates), abs=1e-5)
        assert int(row["conversations_overshared"]) == sum(1 for _, overshared, _ in arm if overshared == "true")


def _product_limit(units: list[tuple[int, bool]], turn: int) -> float:
    """S(turn) = Π over event turns u ≤ turn of (1 − events at u ÷ at risk at u): the textbook oracle."""
    survival = 1.0
    for u in sorted({t for t, seen in units if seen and t <= turn}):
        at_risk = sum(1 for t, _ in units if t >= u)
        survival *= 1 - sum(1 for t, seen in units if seen and t == u) / at_risk
    return survival


def test_probe_curves_match_a_product_limit_over_the_recomputed_events(run):
    paths, hidden_of = run
    written = write_metrics(paths, stage_kinds())
    events, _ = _recompute(paths, hidden_of)
    clinician_of = {r["conversation_id"]: r["clinician"] for r in _read(written["conversations"])}
    rows = [r for r in _read(written["probe_curves"]) if r["curve"] == "not_yet_asked"]
    assert rows
    for row in rows:
        units = [(int(e["first_asked_turn"]), True) if e["first_asked_turn"] else (int(e["last_turn"]), False)
                 for e in events if e["judge"] == row["judge"] and clinician_of[e["conversation_id"]] == row["clinician"]
                 and row["domain"] in ("all", e["domain"])]
        assert int(row["n"]) == len(units)
        assert float(row["survival"]) == pytest.approx(_product_limit(units, int(row["turn"])), abs=1e-5)
