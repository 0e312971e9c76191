"""Uncertainty and paired comparisons for the study's numbers.

- Bootstrap CIs resample *profiles* (a profile's conversations move together, since trials of one
  patient are not independent), seeded from a string so reruns give identical intervals. One rule
  picks the interval of every figure (``mean_ci``): when some profile has more than one value (a run
  with ``--trials`` > 1) the nested bootstrap (profiles, then trials within each drawn profile),
  otherwise the profile bootstrap; ``Estimate.method`` names which, in words a methods section can use.
- A − B on the same profiles gets the same two intervals (``paired_difference_ci``): per profile the
  difference of the trial means, profiles resampled, and with trials the trials of A and of B
  resampled within each drawn profile.
- A table of paired tests is one family: ``holm`` adjusts its p-values (statsmodels' multipletests).
- Repeated trials: the pooled within-profile SD (``between_trial_sd``) and, for contrast with the
  nested interval, the bootstrap that treats every conversation as independent (``naive_bootstrap_ci``).
- Several patient models (``pooled_mean_ci``): each profile's value is the mean over its patient models of
  that model's mean there, so every patient model weighs the same, and profiles are resampled.
- A proportion of independent trials (the patient-QC probes) gets the Wilson score interval.
- Turn-metric medians come with the count of conversations where the metric is undefined.
- Two clinicians are compared on the same profiles: Wilcoxon signed-rank (scipy) and an exact or
  Monte-Carlo paired sign-flip permutation test on the mean difference.
- On discrete values (coverage rates are multiples of 1/n_hidden) both resampling schemes draw
  per class of equal values (multinomial / binomial counts) instead of per profile: the same
  distribution, thousands of times fewer random draws at 10,000 conversations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intake_eval.core.store import stable_hash

N_BOOTSTRAP = 2000
N_PERMUTATIONS = 10000
PERMUTATION_BATCH = 1000
EXACT_PERMUTATION_MAX_N = 16  # 2**16 sign patterns: exact enumeration is still instant
CI_LEVEL = 0.95
Z95 = 1.959963984540054  # the standard normal quantile of 0.975
PROFILE_BOOTSTRAP = f"profile bootstrap (profiles resampled with replacement; B={N_BOOTSTRAP}; 95% percentile)"
NESTED_BOOTSTRAP = (f"nested cluster bootstrap (profiles resampled with replacement, then trials with replacement within "
                    f"each drawn profile; B={N_BOOTSTRAP}; 95% percentile)")

POOLED_PATIENT_BOOTSTRAP = (f"profile bootstrap pooled over patient models (a profile's value: the mean over its patient "
                            f"models of each one's mean over trials, equal weight per patient model; profiles resampled "
                            f"with replacement; B={N_BOOTSTRAP}; 95% percentile)")


def seed_from(text: str) -> int:
    return int(stable_hash(text)[:16], 16)


@dataclass(frozen=True)
class Estimate:
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # values (conversations)
    n_groups: int  # profiles resampled
    method: str = PROFILE_BOOTSTRAP  # how the interval was drawn, for the page and the CSVs


def bootstrap_mean_ci(groups: Mapping[str, Sequence[float | None]], *, seed: str, n_boot: int = N_BOOTSTRAP,
                      level: float = 0.95) -> Estimate:
    """Mean of all values and a percentile CI from resampling groups (profiles) with replacement."""
    import numpy as np

    clean = {key: [v for v in values if v is not None and not math.isnan(v)] for key, values in groups.items()}
    clean = {key: values for key, values in clean.items() if values}
    n = sum(len(v) for v in clean.values())
    if n == 0:
        return Estimate(None, None, None, 0, 0)
    keys = sorted(clean)
    sums = np.array([sum(clean[k]) for k in keys], dtype=float)
    counts = np.array([len(clean[k]) for k in keys], dtype=float)
    mean = float(sums.sum() / counts.sum())
    if len(keys) == 1:
        return Estimate(mean, mean, mean, n, 1)
    rng = np.random.default_rng(seed_from(seed))
    distinct, multiplicity = np.unique(np.stack([sums, counts], axis=1), axis=0, return_counts=True)
    if len(distinct) <= len(keys) // 2:
        # Profiles with the same (sum, count) are interchangeable: how often each such class is drawn
        # is multinomial, so draw the classes (same distribution, far fewer draws on discrete rates).
        drawn = rng.multinomial(len(keys), multiplicity / len(keys), size=n_boot).astype(float)
        means = (drawn @ distinct[:, 0]) / (drawn @ distinct[:, 1])
    else:
        picks = rng.integers(0, len(keys), size=(n_boot, len(keys)))
        means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Estimate(mean, float(low), float(high), n, len(keys))


def _defined(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def has_repeats(groups: Mapping[str, Sequence[float | None]]) -> bool:
    """Does some profile carry more than one value (repeated trials)?"""
    return any(len(_defined(values)) > 1 for values in groups.values())


def mean_ci(groups: Mapping[str, Sequence[float | None]], *, seed: str, n_boot: int = N_BOOTSTRAP,
            level: float = CI_LEVEL) -> Estimate:
    """The interval every figure uses: nested when some profile has several trials, else the profile bootstrap."""
    if has_repeats(groups):
        return nested_bootstrap_ci(groups, seed=seed, n_boot=n_boot, level=level)
    return bootstrap_mean_ci(groups, seed=seed, n_boot=n_boot, level=level)


def pooled_mean_ci(groups: Mapping[str, Mapping[str, Sequence[float | None]]], *, seed: str,
                   n_boot: int = N_BOOTSTRAP, level: float = CI_LEVEL) -> Estimate:
    """profile → patient model → values: the mean with equal weight per patient model and its profile bootstrap.

    A profile's value is the mean over its patient models of each model's mean over its trials there; the
    estimate is the mean of those over profiles, which equals the mean of the patient models' own means when
    every profile has every patient model (a profile whose conversation with one model failed is averaged
    over the models it has). Profiles are resampled as in ``bootstrap_mean_ci``; ``n`` counts the values."""
    pooled: dict[str, list[float | None]] = {}
    n = 0
    for profile, by_patient in groups.items():
        means = [statistics.fmean(values) for values in map(_defined, by_patient.values()) if values]
        n += sum(len(_defined(values)) for values in by_patient.values())
        if means:
            pooled[profile] = [statistics.fmean(means)]
    estimate = bootstrap_mean_ci(pooled, seed=seed, n_boot=n_boot, level=level)
    return Estimate(estimate.mean, estimate.ci_low, estimate.ci_high, n, estimate.n_groups, POOLED_PATIENT_BOOTSTRAP)


# A profile as the nested bootstrap sees it: parts ((trial values, sorted), weight) and its weight in
# the denominator. Its contribution to a resample is Σ weight × (sum of len(values) trials drawn from
# values with replacement), over denominator.
_Cluster = tuple[tuple[tuple[tuple[float, ...], float], ...], float]


def _nested_means(clusters: Sequence[_Cluster], rng, n_boot: int):
    """Resampled Σ numerators / Σ denominators: profiles with replacement, then trials within each.

    Identical profiles are one class: how often each class is drawn is multinomial (or counted from
    per-profile draws when nearly every profile is its own class), and the trials of a class drawn m
    times are m·k draws from its values, a multinomial over its distinct values (same distribution as
    drawing profile by profile, far fewer random draws)."""
    import numpy as np

    classes: dict[_Cluster, int] = {}
    index = np.array([classes.setdefault(cluster, len(classes)) for cluster in clusters])
    keys = list(classes)
    multiplicity = np.bincount(index, minlength=len(keys))
    n = len(clusters)
    if len(keys) <= n // 2:
        drawn = rng.multinomial(n, multiplicity / n, size=n_boot)
    else:
        picks = index[rng.integers(0, n, size=(n_boot, n))]
        offsets = picks + (np.arange(n_boot) * len(keys))[:, None]
        drawn = np.bincount(offsets.ravel(), minlength=n_boot * len(keys)).reshape(n_boot, len(keys))
    numerators = np.zeros(n_boot)
    denominators = drawn @ np.array([denominator for _, denominator in keys], dtype=float)
    for column, (parts, _) in enumerate(keys):
        times = drawn[:, column]
        for values, weight in parts:
            distinct, counts = np.unique(np.asarray(values, dtype=float), return_counts=True)
            if len(distinct) == 1:  # nothing to resample within the profile
                numerators += weight * times * len(values) * distinct[0]
            else:
                draws = rng.multinomial(times * len(values), counts / len(values))
                numerators += weight * (draws @ distinct)
    return numerators / denominators


def _percentile(means, estimate: float, n: int, groups: int, method: str, level: float) -> Estimate:
    import numpy as np

    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Estimate(estimate, float(low), float(high), n, groups, method)


def nested_bootstrap_ci(groups: Mapping[str, Sequence[float | None]], *, seed: str, n_boot: int = N_BOOTSTRAP,
                        level: float = CI_LEVEL) -> Estimate:
    """Mean of all values and a percentile CI from the two-stage bootstrap: profiles with replacement,
    then each drawn profile's trials with replacement (trials nested in profiles)."""
    import numpy as np

    clean = {key: _defined(values) for key, values in groups.items()}
    clean = {key: values for key, values in clean.items() if values}
    n = sum(len(v) for v in clean.values())
    if n == 0:
        return Estimate(None, None, None, 0, 0, NESTED_BOOTSTRAP)
    keys = sorted(clean)
    mean = sum(sum(clean[k]) for k in keys) / n
    clusters = [(((tuple(sorted(clean[k])), 1.0),), float(len(clean[k]))) for k in keys]
    means = _nested_means(clusters, np.random.default_rng(seed_from(seed)), n_boot)
    return _percentile(means, mean, n, len(keys), NESTED_BOOTSTRAP, level)


def paired_difference_ci(a: Mapping[str, Sequence[float | None]], b: Mapping[str, Sequence[float | None]], *,
                         seed: str, n_boot: int = N_BOOTSTRAP, level: float = CI_LEVEL) -> Estimate:
    """Mean over shared profiles of (mean of A's trials − mean of B's trials), with a percentile CI:
    the paired profile bootstrap, nested (A's and B's trials resampled within each drawn profile)
    when some profile has several trials of either."""
    import numpy as np

    clean_a = {k: _defined(v) for k, v in a.items()}
    clean_b = {k: _defined(v) for k, v in b.items()}
    keys = sorted(k for k in clean_a.keys() & clean_b.keys() if clean_a[k] and clean_b[k])
    if not keys:
        return Estimate(None, None, None, 0, 0, PROFILE_BOOTSTRAP)
    nested = any(len(clean_a[k]) > 1 or len(clean_b[k]) > 1 for k in keys)
    method = NESTED_BOOTSTRAP if nested else PROFILE_BOOTSTRAP
    differences = [statistics.fmean(clean_a[k]) - statistics.fmean(clean_b[k]) for k in keys]
    mean = statistics.fmean(differences)
    n = sum(len(clean_a[k]) + len(clean_b[k]) for k in keys)
    if not nested:
        one = bootstrap_mean_ci({k: [d] for k, d in zip(keys, differences)}, seed=seed, n_boot=n_boot, level=level)
        return Estimate(mean, one.ci_low, one.ci_high, n, len(keys), method)
    clusters = [(((tuple(sorted(clean_a[k])), 1.0 / len(clean_a[k])), (tuple(sorted(clean_b[k])), -1.0 / len(clean_b[k]))), 1.0)
                for k in keys]
    means = _nested_means(clusters, np.random.default_rng(seed_from(seed)), n_boot)
    return _percentile(means, mean, n, len(keys), method, level)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values over one family (the defined ones; None stays None)."""
    defined = [(i, p) for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    adjusted: list[float | None] = [None] * len(p_values)
    if not defined:
        return adjusted
    from statsmodels.stats.multitest import multipletests  # type: ignore[import-untyped]  # statsmodels ships no type information

    _, corrected, _, _ = multipletests([float(p) for _, p in defined], method="holm")
    for (i, _), value in zip(defined, corrected):
        adjusted[i] = float(value)
    return adjusted


def add_holm(rows: list[dict[str, Any]], columns: Iterable[str], family: Iterable[str]) -> None:
    """``<column>_holm`` on every row: Holm-adjusted over the rows that share the ``family`` columns."""
    family, columns = tuple(family), tuple(columns)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[name] for name in family), []).append(row)
    for members in groups.values():
        for column in columns:
            for row, adjusted in zip(members, holm([row[column] for row in members])):
                row[f"{column}_holm"] = adjusted


@dataclass(frozen=True)
class MedianSummary:
    median: float | None
    n_defined: int
    n_undefined: int


def median_with_undefined(values: Sequence[float | None]) -> MedianSummary:
    defined = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return MedianSummary(statistics.median(defined) if defined else None, len(defined), len(values) - len(defined))


@dataclass(frozen=True)
class PairedComparison:
    n_pairs: int
    n_nonzero: int
    mean_a: float | None
    mean_b: float | None
    mean_difference: float | None  # a − b
    wilcoxon_statistic: float | None
    wilcoxon_p: float | None  # None when every difference is zero (the test is undefined)
    permutation_p: float | None
    permutation_exact: bool


def paired_permutation_p(differences: Sequence[float], *, seed: str, n_permutations: int = N_PERMUTATIONS) -> tuple[float, bool]:
    """Two-sided p of the mean paired difference under random sign flips (exact when n is small)."""
    import numpy as np

    diffs = np.asarray(differences, dtype=float)
    n = len(diffs)
    observed = abs(diffs.mean())
    tolerance = 1e-12
    if n <= EXACT_PERMUTATION_MAX_N:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        means = np.abs((patterns * diffs).mean(axis=1))
        return float((means >= observed - tolerance).mean()), True
    rng = np.random.default_rng(seed_from(seed))
    values, multiplicity = np.unique(diffs, return_counts=True)
    if len(values) <= n // 2:
        # Sign flips of equal differences are interchangeable: the number of + signs among the m
        # copies of a value is Binomial(m, ½), so draw those counts (same null distribution).
        plus = rng.binomial(multiplicity, 0.5, size=(n_permutations, len(values)))
        sums = (2 * plus - multiplicity) @ values
        at_least = int(np.sum(np.abs(sums) / n >= observed - tolerance))
        return float((at_least + 1) / (n_permutations + 1)), False
    at_least = 0
    for start in range(0, n_permutations, PERMUTATION_BATCH):  # batches keep memory flat for large n
        rows = min(PERMUTATION_BATCH, n_permutations - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, n))
        at_least += int(np.sum(np.abs(signs @ diffs) / n >= observed - tolerance))
    # +1 in numerator and denominator: the observed labelling is one of the permutations.
    return float((at_least + 1) / (n_permutations + 1)), False


def wilcoxon_normal(differences: Sequence[float]) -> tuple[float, float]:
    """(statistic, two-sided p) of ``scipy.stats.wilcoxon(..., zero_method="wilcox", method="approx")``
    without importing scipy.stats (a second at every metrics run): zeros dropped, average ranks of
    |d|, tie-corrected variance, no continuity correction, statistic = min(R+, R−)."""
    import numpy as np

    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    n = float(len(d))
    _, inverse, ties = np.unique(np.abs(d), return_inverse=True, return_counts=True)
    ranks = (np.cumsum(ties) - (ties - 1) / 2.0)[inverse]  # average rank of each |d|
    r_plus, r_minus = float(np.sum(ranks[d > 0])), float(np.sum(ranks[d < 0]))
    ties = ties.astype(float)
    se = math.sqrt((n * (n + 1.0) * (2.0 * n + 1.0) - float(np.sum(ties**3 - ties)) / 2) / 24)
    z = (r_plus - n * (n + 1.0) * 0.25) / se
    return min(r_plus, r_minus), math.erfc(abs(z) / math.sqrt(2.0))


def paired_comparison(a: Mapping[str, float], b: Mapping[str, float], *, seed: str) -> PairedComparison:
    """Compare two clinicians on the profiles both have a value for (keys = profile ids)."""
    shared = sorted(k for k in a.keys() & b.keys() if a[k] is not None and b[k] is not None)
    if not shared:
        return PairedComparison(0, 0, None, None, None, None, None, None, False)
    xs = [float(a[k]) for k in shared]
    ys = [float(b[k]) for k in shared]
    diffs = [x - y for x, y in zip(xs, ys)]
    nonzero = sum(1 for d in diffs if d != 0)
    w_stat = w_p = None
    if nonzero:
        # The exact null is only valid without ties or zeros; otherwise scipy would fall back to a
        # slow permutation test, so use the normal approximation with tie correction instead.
        magnitudes = [abs(d) for d in diffs if d != 0]
        exact_ok = nonzero == len(diffs) and len(set(magnitudes)) == nonzero and nonzero <= 50
        if exact_ok:
            from scipy.stats import wilcoxon  # type: ignore[import-untyped]  # scipy ships no type stubs

            result = wilcoxon(xs, ys, zero_method="wilcox", alternative="two-sided", method="exact")
            w_stat, w_p = float(result.statistic), float(result.pvalue)
        else:
            w_stat, w_p = wilcoxon_normal(diffs)
    perm_p, exact = paired_permutation_p(diffs, seed=seed) if nonzero else (1.0, True)
    return PairedComparison(
        n_pairs=len(shared), n_nonzero=nonzero, mean_a=statistics.fmean(xs), mean_b=statistics.fmean(ys),
        mean_difference=statistics.fmean(diffs), wilcoxon_statistic=w_stat, wilcoxon_p=w_p,
        permutation_p=perm_p, permutation_exact=exact,
    )


def mean_or_none(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return statistics.fmean(defined) if defined else None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion (None when n = 0)."""
    if n == 0:
        return None, None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def between_trial_sd(values_by_profile: list[list[float]]) -> float | None:
    """sqrt of the mean within-profile sample variance over profiles with at least two trials."""
    variances = []
    for values in values_by_profile:
        if len(values) >= 2:
            mean = sum(values) / len(values)
            variances.append(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return math.sqrt(sum(variances) / len(variances)) if variances else None


def sample_sd(values: list[float]) -> float | None:
    """The sample standard deviation (ddof=1); None below two values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def naive_bootstrap_ci(values: list[float], *, seed: str, resamples: int = N_BOOTSTRAP,
                       level: float = 0.95) -> tuple[float, float] | None:
    """Bootstrap treating every conversation as independent (for contrast with the cluster CI)."""
    import numpy as np

    if not values:
        return None
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(int(stable_hash(["trials-naive", seed])[:12], 16))
    means = data[rng.integers(len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)
