"""The study's metrics on hand-worked transcripts (DESIGN.md definitions)."""

from __future__ import annotations

import pytest

from intake_eval.metrics.figures import (
    active_coverage_rate,
    bleed_rate,
    conversation_metrics,
    coverage_trajectory,
    domain_outcomes,
    first_treatment_planning_turn,
    patient_leak_count,
    premature_closure_turn,
)
from tests.helpers.judgment_builders import HIDDEN, judgment

O, CH, CL, TP, OT = "open", "closed_hypothesis", "clarifying", "treatment_planning", "other"


def test_worked_example_every_metric():
    # turn 0 opening bleeds ptsd; insomnia asked at 1 (not disclosed) then caught at 3;
    # alcohol asked and disclosed at 2; panic never asked but disclosed at 5 (bleed + leak);
    # TP at 4, probing again at 5, then TP/other to the end → closure at 6.
    j = judgment([
        (OT, {"ptsd": "D"}, False),
        (CH, {"insomnia": "A"}),
        (CH, {"alcohol_use": "AD"}),
        (CL, {"insomnia": "AD"}),
        (TP, {}),
        (O, {"panic": "D"}, False),
        (TP, {}),
        (OT, {}),
        (TP, {}),
    ])
    assert active_coverage_rate(j, HIDDEN) == pytest.approx(2 / 4)  # insomnia, alcohol
    assert bleed_rate(j, HIDDEN) == pytest.approx(2 / 4)  # ptsd (turn 0), panic
    assert first_treatment_planning_turn(j) == 4
    assert premature_closure_turn(j) == 6
    assert patient_leak_count(j) == 2
    m = conversation_metrics(j, HIDDEN)
    assert (m.n_hidden, m.n_turns) == (4, 8)
    assert m.question_types == {"closed_hypothesis": 2, "open": 1, "clarifying": 1, "treatment_planning": 3, "other": 1}


def test_domain_both_bled_and_later_caught_counts_in_both_rates():
    j = judgment([(OT, {"insomnia": "D"}), (CH, {"insomnia": "AD"}), (O, {})])
    assert active_coverage_rate(j, HIDDEN) == 0.25
    assert bleed_rate(j, HIDDEN) == 0.25
    outcome = {o.domain: o for o in domain_outcomes(j, HIDDEN)}["insomnia"]
    assert (outcome.actively_covered, outcome.bled, outcome.first_asked_turn, outcome.first_covered_turn) == (True, True, 1, 1)


def test_asked_and_disclosed_on_different_turns_is_not_active_coverage():
    # Asked at 1 (denied), disclosed unasked at 2: that is bleed, not active discovery.
    j = judgment([(OT, {}), (CH, {"alcohol_use": "A"}), (O, {"alcohol_use": "D"}, False)])
    assert active_coverage_rate(j, HIDDEN) == 0.0
    assert bleed_rate(j, HIDDEN) == 0.25


def test_zero_hidden_domains_disclosed():
    j = judgment([(OT, {}), (O, {}), (CH, {"insomnia": "A", "panic": "A"}), (CL, {}), (O, {})])
    assert active_coverage_rate(j, HIDDEN) == 0.0
    assert bleed_rate(j, HIDDEN) == 0.0
    assert patient_leak_count(j) == 0
    assert [c for _, c in coverage_trajectory(j, HIDDEN)] == [0.0] * 5


def test_all_undefined_turn_metrics_when_clinician_keeps_probing():
    j = judgment([(OT, {}), (O, {}), (CH, {}), (CL, {}), (CH, {})])
    assert first_treatment_planning_turn(j) is None
    assert premature_closure_turn(j) is None  # never closes: the last turn still probes
    row = conversation_metrics(j, HIDDEN).as_row()
    assert row["first_treatment_planning_turn"] is None and row["premature_closure_turn"] is None


def test_premature_closure_at_last_turn_only():
    j = judgment([(OT, {}), (CH, {}), (O, {}), (CL, {}), (OT, {})])
    assert premature_closure_turn(j) == 4
    assert first_treatment_planning_turn(j) is None  # 'other' closes but is not treatment planning


def test_turn_zero_never_counts_for_turn_metrics():
    # Turn 0 is 'other', and every clinician turn is TP: closure is turn 1, not 0.
    j = judgment([(OT, {}), (TP, {}), (TP, {}), (OT, {})])
    assert premature_closure_turn(j) == 1
    assert first_treatment_planning_turn(j) == 1


def test_closure_ignores_an_early_treatment_planning_turn_followed_by_probing():
    j = judgment([(OT, {}), (TP, {}), (OT, {}), (CH, {}), (TP, {}), (OT, {})])
    assert first_treatment_planning_turn(j) == 1
    assert premature_closure_turn(j) == 4


def test_ties_first_tp_and_closure_on_the_same_turn():
    j = judgment([(OT, {}), (CH, {}), (CH, {}), (TP, {}), (TP, {})])
    assert first_treatment_planning_turn(j) == premature_closure_turn(j) == 3


def test_bleed_on_turn_zero_only():
    j = judgment([(OT, {"panic": "D", "ptsd": "D"}, False), (O, {}), (O, {})])
    assert bleed_rate(j, HIDDEN) == 0.5
    assert active_coverage_rate(j, HIDDEN) == 0.0
    assert patient_leak_count(j) == 1


def test_trajectory_is_cumulative_and_monotone():
    j = judgment([(OT, {}), (CH, {"insomnia": "AD"}), (O, {}), (CH, {"panic": "AD", "ptsd": "A"}), (CH, {"insomnia": "AD"})])
    assert coverage_trajectory(j, HIDDEN) == [(0, 0.0), (1, 0.25), (2, 0.25), (3, 0.5), (4, 0.5)]


def test_no_hidden_domains_gives_undefined_rates_not_zero():
    j = judgment([(OT, {}), (CH, {})], hidden=())
    assert active_coverage_rate(j, ()) is None and bleed_rate(j, ()) is None
    assert coverage_trajectory(j, ()) == [(0, None), (1, None)]


def test_turn_order_in_the_record_does_not_matter():
    j = judgment([(OT, {}), (CH, {}), (TP, {}), (OT, {})])
    shuffled = j.model_copy(update={"turns": list(reversed(j.turns))})
    assert premature_closure_turn(shuffled) == premature_closure_turn(j) == 2
    assert first_treatment_planning_turn(shuffled) == 2
