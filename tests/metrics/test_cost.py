"""Spend by role (metrics/cost.csv, cost_conversations.csv, cost_per_domain.csv), worked by hand."""

from __future__ import annotations

import csv

import pytest

from intake_eval.core.records import Usage
from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics.cost import COST_COLUMNS
from intake_eval.metrics.tables import write_metrics
from intake_eval.stage_kinds import stage_kinds
from intake_eval.report.build import build_report
from tests.helpers.judgment_builders import conversation, judgment, profile

CH, OT = "closed_hypothesis", "other"
HIDDEN = ("insomnia", "alcohol_use")


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _usage(calls, prompt, completion, cost, known=True):
    return Usage(calls=calls, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost, cost_known=known)


@pytest.fixture
def paths(tmp_path):
    paths = RunPaths(tmp_path / "run")
    for pid in ("P00000", "P00001", "P00002"):
        append_record(paths.profiles, profile(pid, hidden=HIDDEN))
    spend = {
        "P00000": {"clinician": _usage(12, 1000, 200, 0.010), "formulation": _usage(1, 300, 100, 0.002),
                   "patient": _usage(12, 800, 150, 0.005), "tracker": _usage(12, 400, 50, 0.001)},
        "P00001": {"clinician": _usage(12, 1200, 240, 0.012), "patient": _usage(12, 900, 160, 0.006)},
    }
    both = [(OT, {}), (CH, {"insomnia": "AD"}), (CH, {"alcohol_use": "AD"})]
    one = [(OT, {}), (CH, {"insomnia": "AD"}), (CH, {"alcohol_use": "A"})]
    none = [(OT, {}), (CH, {}), (CH, {})]
    labels = {("primary", "P00000"): both, ("primary", "P00001"): one,
              ("second", "P00000"): one, ("second", "P00001"): none}
    judge_spend = {"primary": _usage(13, 2000, 300, 0.020), "second": _usage(13, 2500, 400, 0.030)}
    for pid, roles in spend.items():
        convo = conversation([("q", "a")] * 2, profile_id=pid, clinician="c")
        convo.usage = roles
        append_record(paths.conversations("c"), convo)
        for judge in ("primary", "second"):
            record = judgment(labels[(judge, pid)], hidden=HIDDEN, conversation_id=convo.conversation_id,
                              judge=judge, clinician="c", profile_id=pid)
            record.usage = judge_spend[judge]
            append_record(paths.judgments(judge, "c"), record)
    # Another arm whose judge had no known price: its dollars are a lower bound.
    other = conversation([("q", "a")] * 2, profile_id="P00002", clinician="d")
    other.usage = {"clinician": _usage(12, 100, 10, 0.001)}
    append_record(paths.conversations("d"), other)
    record = judgment(both, hidden=HIDDEN, conversation_id=other.conversation_id, judge="primary", clinician="d",
                      profile_id="P00002")
    record.usage = _usage(13, 50, 5, 0.0, known=False)
    append_record(paths.judgments("primary", "d"), record)
    return paths


def test_cost_by_role_and_per_surfaced_domain_by_hand(paths):
    written = write_metrics(paths, stage_kinds())
    rows = _read(written["cost"])
    assert list(rows[0]) == list(COST_COLUMNS)
    c = {r["role"]: r for r in rows if r["clinician"] == "c"}
    assert list(c) == ["clinician", "formulation", "patient", "tracker", "judge", "all"]
    assert (c["clinician"]["tokens"], float(c["clinician"]["cost_usd"])) == ("2640", pytest.approx(0.022))
    assert (c["formulation"]["tokens"], c["tracker"]["tokens"], c["patient"]["tokens"]) == ("400", "450", "2010")
    # the judge role: both judges on both conversations
    assert (c["judge"]["calls"], c["judge"]["tokens"], float(c["judge"]["cost_usd"])) == ("52", "10400", pytest.approx(0.100))
    assert (c["all"]["calls"], c["all"]["tokens"], float(c["all"]["cost_usd"])) == ("113", "15900", pytest.approx(0.136))
    assert float(c["judge"]["share_of_cost"]) == pytest.approx(0.100 / 0.136, abs=1e-5)
    assert float(c["all"]["cost_usd_per_conversation"]) == pytest.approx(0.068)
    assert c["all"]["conversations"] == "2" and c["all"]["cost_known"] == "true"
    d = {r["role"]: r for r in rows if r["clinician"] == "d"}
    assert (d["judge"]["cost_known"], d["all"]["cost_known"], d["clinician"]["cost_known"]) == ("false", "false", "true")

    per_conversation = {r["profile_id"]: r for r in _read(written["cost_conversations"])}
    first = per_conversation["P00000"]
    assert float(first["total_cost_usd"]) == pytest.approx(0.068)  # 0.018 conversation + 0.050 both judges
    assert (first["judge_tokens"], first["total_tokens"]) == ("5200", str(1200 + 400 + 950 + 450 + 5200))
    assert per_conversation["P00001"]["formulation_tokens"] == "0"

    per_domain = {(r["judge"], r["clinician"]): r for r in _read(written["cost_per_domain"])}
    primary, second = per_domain[("primary", "c")], per_domain[("second", "c")]
    assert (primary["surfaced_domains"], primary["hidden_domains"]) == ("3", "4")
    assert float(primary["cost_usd_per_surfaced_domain"]) == pytest.approx(0.136 / 3, abs=1e-6)
    assert float(primary["calls_per_surfaced_domain"]) == pytest.approx(113 / 3, abs=1e-4)
    assert float(primary["tokens_per_surfaced_domain"]) == pytest.approx(15900 / 3, abs=1e-2)
    assert second["surfaced_domains"] == "1" and float(second["cost_usd_per_surfaced_domain"]) == pytest.approx(0.136)
    # the second judge never saw arm d: no surfaced domains there, an undefined ratio
    assert per_domain[("second", "d")]["surfaced_domains"] == "0"
    assert per_domain[("second", "d")]["cost_usd_per_surfaced_domain"] == ""


def test_cost_section_in_the_report(paths):
    page = build_report(paths.root).index.read_text(encoding="utf-8")
    section = page[page.index("Cost by role"):]
    assert "$0.14" in section  # the arm's all-role total
    assert "≥ $0.00" in section  # arm d: a judge without a known price
    assert "3/4" in section  # surfaced / hidden under the primary judge
