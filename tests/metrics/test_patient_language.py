"""Population-level patient measures against hand-worked cases."""

from __future__ import annotations

import pytest

from intake_eval.metrics.patient_language import (
    Reply,
    check_targets,
    mattr,
    population_measures,
    repeated_phrasing_share,
    resolves_early,
)


def test_mattr_is_the_plain_type_token_ratio_below_the_window_and_the_window_mean_above_it():
    assert mattr([]) is None
    assert mattr("a b a c".split()) == pytest.approx(3 / 4)
    # window 3 over "a b a c c": windows (a b a)=2, (b a c)=3, (a c c)=2 types → (2+3+2)/(3×3)
    assert mattr("a b a c c".split(), window=3) == pytest.approx(7 / 9)


def test_repeated_phrasing_counts_five_grams_used_by_three_profiles():
    shared = "i have not been sleeping well"  # 2 five-grams, in three profiles' replies
    replies = [Reply("P1", shared, True), Reply("P2", f"well {shared}", True), Reply("P3", shared, True),
               Reply("P4", "one two three four five", True)]
    # distinct 5-grams: the two of `shared`, "well i have not been" (P2 only), "one two three four five" (P4)
    assert repeated_phrasing_share(replies) == pytest.approx(2 / 4)
    assert repeated_phrasing_share([Reply("P1", "too short", True)]) is None


def test_early_resolution_is_thanks_or_a_solved_problem_before_the_last_third():
    assert resolves_early(Reply("P1", "Thank you, that helps a lot.", early=True))
    assert resolves_early(Reply("P1", "Honestly I feel better already.", early=True))
    assert not resolves_early(Reply("P1", "Thank you.", early=False))
    assert not resolves_early(Reply("P1", "I still can't sleep.", early=True))


def test_population_measures_use_the_style_target_and_name_the_targets_missed():
    replies = [Reply("P1", "No.", True), Reply("P1", "I guess I've been tired, but it's fine.", True),
               Reply("P2", " ".join(["word"] * 40), True), Reply("P2", "Thanks, I feel better already.", True)]
    measures = population_measures(replies, "terse")  # target 1–20 words
    assert measures["replies"] == 4 and measures["profiles"] == 2
    assert measures["words_mean"] == pytest.approx((1 + 8 + 40 + 5) / 4)
    assert measures["length_on_target_share"] == pytest.approx(3 / 4)
    assert measures["early_resolution_share"] == pytest.approx(1 / 4)
    missed = check_targets(measures)
    assert "early_resolution_share 0.25 above 0.1" in missed
    assert check_targets(measures, {"early_resolution_share": (None, 0.5)}) != missed
