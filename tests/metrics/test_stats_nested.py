"""The interval every figure uses (profile bootstrap, nested with trials), A − B intervals, and Holm."""

from __future__ import annotations

import numpy as np
import pytest

from intake_eval.metrics.stats import (
    NESTED_BOOTSTRAP,
    PROFILE_BOOTSTRAP,
    bootstrap_mean_ci,
    holm,
    mean_ci,
    nested_bootstrap_ci,
    paired_difference_ci,
)


def _brute_nested(groups: dict[str, list[float]], n_boot: int = 20000) -> tuple[float, float]:
    """Two-stage bootstrap drawn profile by profile and trial by trial (the definition)."""
    rng = np.random.default_rng(11)
    keys = sorted(groups)
    means = np.empty(n_boot)
    for b in range(n_boot):
        total = count = 0.0
        for k in rng.integers(0, len(keys), size=len(keys)):
            values = groups[keys[k]]
            drawn = rng.choice(values, size=len(values), replace=True)
            total += drawn.sum()
            count += len(values)
        means[b] = total / count
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _brute_paired(a: dict[str, list[float]], b: dict[str, list[float]], n_boot: int = 20000) -> tuple[float, float]:
    rng = np.random.default_rng(12)
    keys = sorted(a.keys() & b.keys())
    means = np.empty(n_boot)
    for r in range(n_boot):
        diffs = []
        for k in rng.integers(0, len(keys), size=len(keys)):
            xs, ys = a[keys[k]], b[keys[k]]
            diffs.append(rng.choice(xs, size=len(xs)).mean() - rng.choice(ys, size=len(ys)).mean())
        means[r] = np.mean(diffs)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _coverage_groups(seed: int, profiles: int, trials: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(profiles):
        skill = rng.choice([0.2, 0.5, 0.8])  # profiles differ; trials vary around the profile
        out[f"P{i:03d}"] = [float(v) for v in rng.binomial(4, skill, size=trials) / 4]
    return out


@pytest.mark.parametrize("profiles", [12, 80])  # per-profile draws (many classes) and class-wise draws
def test_nested_bootstrap_matches_two_stage_resampling(profiles):
    groups = _coverage_groups(3, profiles, 3)
    estimate = nested_bootstrap_ci(groups, seed="s")
    low, high = _brute_nested(groups)
    assert estimate.method == NESTED_BOOTSTRAP
    assert estimate.mean == pytest.approx(np.mean([v for vs in groups.values() for v in vs]))
    assert estimate.ci_low == pytest.approx(low, abs=0.012) and estimate.ci_high == pytest.approx(high, abs=0.012)
    assert nested_bootstrap_ci(groups, seed="s") == estimate  # seeded


def test_nested_interval_is_wider_than_the_profile_one_when_trials_vary():
    groups = {f"P{i}": [0.0, 1.0] for i in range(30)}  # every profile identical: only the trials vary
    profile_only = bootstrap_mean_ci(groups, seed="s")
    nested = nested_bootstrap_ci(groups, seed="s")
    assert profile_only.ci_low == profile_only.ci_high == 0.5  # resampling profiles alone sees no spread
    assert nested.ci_low < 0.45 and nested.ci_high > 0.55


def test_mean_ci_declares_its_method():
    single = mean_ci({"a": [0.2], "b": [0.6], "c": [None, 0.4]}, seed="s")
    assert single.method == PROFILE_BOOTSTRAP and single == bootstrap_mean_ci({"a": [0.2], "b": [0.6], "c": [0.4]}, seed="s")
    repeated = mean_ci({"a": [0.2, 0.4], "b": [0.6]}, seed="s")
    assert repeated.method == NESTED_BOOTSTRAP and repeated.mean == pytest.approx(0.4)


def test_paired_difference_without_trials_is_the_bootstrap_of_the_differences():
    a = {"P1": [0.8], "P2": [0.6], "P3": [1.0], "P4": [0.4], "P5": [0.9]}
    b = {"P1": [0.2], "P2": [0.6], "P3": [0.5], "P4": [0.5], "P5": [0.1], "only-b": [0.0]}
    found = paired_difference_ci(a, b, seed="x")
    # hand-worked mean of A − B over the five shared profiles: (0.6 + 0 + 0.5 − 0.1 + 0.8) / 5 = 0.36
    assert found.mean == pytest.approx(0.36) and found.n_groups == 5 and found.method == PROFILE_BOOTSTRAP
    reference = bootstrap_mean_ci({k: [a[k][0] - b[k][0]] for k in a}, seed="x")
    assert (found.ci_low, found.ci_high) == (reference.ci_low, reference.ci_high)


def test_paired_difference_with_trials_matches_nested_resampling():
    a = _coverage_groups(5, 40, 3)
    b = {k: [max(0.0, v - 0.25) for v in values] for k, values in _coverage_groups(6, 40, 3).items()}
    found = paired_difference_ci(a, b, seed="x")
    assert found.method == NESTED_BOOTSTRAP
    assert found.mean == pytest.approx(np.mean([np.mean(a[k]) - np.mean(b[k]) for k in a]))
    low, high = _brute_paired(a, b)
    assert found.ci_low == pytest.approx(low, abs=0.012) and found.ci_high == pytest.approx(high, abs=0.012)


def test_holm_against_a_hand_worked_family():
    # sorted p: 0.005, 0.01, 0.03, 0.04 (m = 4) → 4·0.005 = 0.02, 3·0.01 = 0.03, 2·0.03 = 0.06,
    # 1·0.04 = 0.04 raised to the running maximum 0.06; an undefined p stays out of the family.
    assert holm([0.01, 0.04, None, 0.03, 0.005]) == pytest.approx([0.03, 0.06, None, 0.06, 0.02])
    assert holm([0.6, 0.5]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([None]) == [None] and holm([]) == []


def test_holm_is_statsmodels_multipletests_to_the_bit():
    import random

    from statsmodels.stats.multitest import multipletests  # type: ignore[import-untyped]  # statsmodels ships no type information

    rng = random.Random(11)
    for _ in range(200):
        family = [rng.choice([rng.random(), rng.random() / 50, 0.01, 0.3, 1.0]) for _ in range(rng.randint(1, 12))]
        assert holm(family) == [float(p) for p in multipletests(family, method="holm")[1]]


def test_nested_bootstrap_with_unequal_trial_counts():
    rng = np.random.default_rng(9)
    groups = {f"P{i:02d}": [float(v) for v in rng.choice([0.0, 0.25, 0.5, 1.0], size=1 + i % 4)] for i in range(30)}
    estimate = nested_bootstrap_ci(groups, seed="u")
    low, high = _brute_nested(groups)
    assert estimate.mean == pytest.approx(np.mean([v for vs in groups.values() for v in vs]))  # conversation-weighted
    assert estimate.ci_low == pytest.approx(low, abs=0.015) and estimate.ci_high == pytest.approx(high, abs=0.015)
