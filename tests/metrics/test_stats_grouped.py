"""The class-wise resampling of stats.py (used when values repeat, as coverage rates do) draws from
the same distribution as resampling profile by profile / flipping each sign."""

from __future__ import annotations

import numpy as np
import pytest

from intake_eval.metrics.stats import bootstrap_mean_ci, paired_permutation_p


def _per_profile_ci(groups: dict[str, list[float]], n_boot: int = 20000) -> tuple[float, float]:
    keys = sorted(groups)
    sums = np.array([sum(groups[k]) for k in keys])
    counts = np.array([len(groups[k]) for k in keys], dtype=float)
    picks = np.random.default_rng(7).integers(0, len(keys), size=(n_boot, len(keys)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _per_sign_p(diffs: list[float], n_permutations: int = 20000) -> float:
    d = np.asarray(diffs)
    signs = np.random.default_rng(7).choice([-1.0, 1.0], size=(n_permutations, len(d)))
    return float(np.mean(np.abs(signs @ d) / len(d) >= abs(d.mean()) - 1e-12))


def test_bootstrap_by_class_matches_profile_resampling():
    rng = np.random.default_rng(1)
    groups = {f"P{i:03d}": [float(v)] for i, v in enumerate(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=300, p=[.1, .2, .3, .3, .1]))}
    groups.update({f"Q{i:03d}": [0.5, 0.75] for i in range(40)})  # some profiles with two trials
    estimate = bootstrap_mean_ci(groups, seed="s")
    low, high = _per_profile_ci(groups)
    assert estimate.ci_low == pytest.approx(low, abs=0.006) and estimate.ci_high == pytest.approx(high, abs=0.006)
    assert estimate.ci_low < estimate.mean < estimate.ci_high
    assert bootstrap_mean_ci(groups, seed="s") == estimate  # seeded


@pytest.mark.parametrize("shift", [0.0, 0.03, 0.08])
def test_permutation_by_class_matches_sign_flips(shift):
    rng = np.random.default_rng(2)
    diffs = [float(v) for v in rng.choice([-0.5, -0.25, 0.0, 0.25, 0.5], size=200, p=[.2, .2, .2, .2 - shift, .2 + shift])]
    p, exact = paired_permutation_p(diffs, seed="s")
    assert not exact
    assert p == pytest.approx(_per_sign_p(diffs), abs=0.02)
    assert paired_permutation_p(diffs, seed="s") == (p, exact)


@pytest.mark.parametrize("seed", range(30))
def test_wilcoxon_normal_equals_scipy(seed):
    from scipy.stats import wilcoxon

    from intake_eval.metrics.stats import wilcoxon_normal

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    if seed % 2:  # coverage-like rates: many ties and zeros
        xs, ys = rng.choice([0, .2, .25, .4, .5, .6, .75, .8, 1.0], size=(2, n))
    else:
        xs, ys = rng.random(n), rng.random(n)
    diffs = [float(x - y) for x, y in zip(xs, ys)]
    if not any(diffs):
        return
    reference = wilcoxon(xs, ys, zero_method="wilcox", alternative="two-sided", method="approx")
    statistic, p = wilcoxon_normal(diffs)
    assert statistic == reference.statistic
    assert p == pytest.approx(reference.pvalue, rel=1e-12, abs=1e-300)
