"""Bootstrap CIs over profiles, medians with undefined counts, paired comparisons."""

from __future__ import annotations

import itertools

import pytest
from scipy.stats import wilcoxon

from intake_eval.metrics.stats import (
    bootstrap_mean_ci,
    median_with_undefined,
    paired_comparison,
    paired_permutation_p,
)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    groups = {f"P{i:05d}": [0.2 * (i % 5), 0.2 * ((i + 1) % 5)] for i in range(40)}
    first = bootstrap_mean_ci(groups, seed="clinician-a")
    again = bootstrap_mean_ci(groups, seed="clinician-a")
    other = bootstrap_mean_ci(groups, seed="clinician-b")
    assert first == again
    assert first.ci_low < first.mean < first.ci_high
    assert first.mean == pytest.approx(0.4)
    assert (first.n, first.n_groups) == (80, 40)
    assert other.ci_low != first.ci_low or other.ci_high != first.ci_high


def test_bootstrap_resamples_profiles_not_conversations():
    # Every profile's trials are identical within the profile: the CI reflects 3 profiles, so it
    # is as wide as the spread of the profile means, whatever the number of trials.
    few = bootstrap_mean_ci({"a": [0.0], "b": [0.5], "c": [1.0]}, seed="s")
    many = bootstrap_mean_ci({"a": [0.0] * 50, "b": [0.5] * 50, "c": [1.0] * 50}, seed="s")
    assert (few.ci_low, few.ci_high) == (many.ci_low, many.ci_high)
    assert many.ci_low < 0.3 and many.ci_high > 0.7


def test_bootstrap_degenerate_inputs():
    assert bootstrap_mean_ci({}, seed="s").mean is None
    assert bootstrap_mean_ci({"a": [None]}, seed="s").n == 0
    one = bootstrap_mean_ci({"a": [0.25, 0.75]}, seed="s")
    assert (one.mean, one.ci_low, one.ci_high, one.n_groups) == (0.5, 0.5, 0.5, 1)


def test_median_with_undefined_counts():
    summary = median_with_undefined([6, None, 8, 7, None])
    assert (summary.median, summary.n_defined, summary.n_undefined) == (7, 3, 2)
    assert median_with_undefined([None, None]).median is None
    assert median_with_undefined([6, 7]).median == 6.5  # a tie between two middle values


def test_paired_comparison_matches_scipy_and_exact_permutation():
    a = {f"P{i}": v for i, v in enumerate([0.8, 0.6, 1.0, 0.4, 0.8, 0.6, 1.0, 0.8])}
    b = {f"P{i}": v for i, v in enumerate([0.2, 0.4, 0.2, 0.4, 0.0, 0.2, 0.6, 0.0])}
    b["extra"] = 0.5  # a profile only one clinician ran is not paired
    result = paired_comparison(a, b, seed="x")
    keys = sorted(a)
    # With a zero difference and tied magnitudes the normal approximation is the valid choice.
    reference = wilcoxon([a[k] for k in keys], [b[k] for k in keys], zero_method="wilcox", method="approx")
    assert result.n_pairs == 8 and result.n_nonzero == 7
    assert result.wilcoxon_p == pytest.approx(reference.pvalue)
    assert result.mean_difference == pytest.approx(sum(a[k] - b[k] for k in keys) / 8)
    assert result.permutation_exact
    # Exact sign-flip p by brute force.
    diffs = [a[k] - b[k] for k in keys]
    observed = abs(sum(diffs)) / 8
    extreme = sum(1 for signs in itertools.product((1, -1), repeat=8)
                  if abs(sum(s * d for s, d in zip(signs, diffs))) / 8 >= observed - 1e-12)
    assert result.permutation_p == pytest.approx(extreme / 256)


def test_paired_comparison_identical_clinicians_and_no_overlap():
    same = {f"P{i}": 0.5 for i in range(5)}
    result = paired_comparison(same, dict(same), seed="x")
    assert result.n_nonzero == 0 and result.wilcoxon_p is None and result.permutation_p == 1.0
    assert paired_comparison({"a": 1.0}, {"b": 1.0}, seed="x").n_pairs == 0


def test_monte_carlo_permutation_is_seeded_and_sensible():
    diffs = [0.2] * 30 + [-0.05] * 10
    p1, exact = paired_permutation_p(diffs, seed="s")
    p2, _ = paired_permutation_p(diffs, seed="s")
    assert not exact and p1 == p2 and p1 < 0.01
    p_null, _ = paired_permutation_p([0.1, -0.1] * 20, seed="s")
    assert p_null > 0.5
