"""The folder budget's holds by hand-worked figures: the billed-per-used-dollar overhead, and a
conversation's hold when every measured conversation cost the same (no spread to cover retries)."""

from __future__ import annotations

import pytest

from intake_eval.interview.budget import Budget
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.interview.cost_forecast import arm_of
from intake_eval.runner.budget import FolderBudget
from tests.helpers.convo_helpers import make_profile


def test_the_overhead_is_billed_dollars_per_dollar_of_answers_used():
    assert FolderBudget(limit=5.0).overhead == 1.0  # no ledger: nothing to scale by
    assert FolderBudget(limit=5.0, paid_for=lambda: (0.0, 0.0)).overhead == 1.0  # nothing billed yet
    assert FolderBudget(limit=5.0, paid_for=lambda: (4.0, 0.12)).overhead == pytest.approx(1.03)


def test_a_hold_with_no_spread_still_covers_the_retries_the_ledger_has_seen():
    item = PlannedConversation.of(make_profile(1), clinician="doc", condition="minimal", max_turns=3)
    measured = {arm_of(item): [0.0418] * 54}  # the first to finish: none retried, all alike
    plain = Budget(limit=5.0, measured=dict(measured))
    scaled = Budget(limit=5.0, measured=dict(measured), paid_for=lambda: (4.0, 0.12))
    assert plain.estimate(item) == pytest.approx(0.0418)
    assert scaled.estimate(item) == pytest.approx(0.0418 * 1.03)
    # 64 such holds in flight: the retries' 3 % is held, $0.080 more than mean holds would keep back
    assert 64 * (scaled.estimate(item) - plain.estimate(item)) == pytest.approx(0.0803, abs=1e-4)
