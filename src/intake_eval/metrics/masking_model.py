"""Are masked phenotypes harder than aligned ones? A model that respects how the data nest:
conversations (trials) in profiles, profiles in phenotypes, and masking a property of the phenotype.

Per clinician arm and judge, the estimate is the difference in mean active coverage (conversation-
weighted, as the headline), masked − aligned, in the headline's own unit (percentage points).

- **Interval: hierarchical (phenotype-cluster) bootstrap**, stratified by alignment: within each of the
  two groups, phenotypes are resampled with replacement, then profiles within each drawn phenotype,
  then trials within each drawn profile; 95 % percentile interval of the difference.
- **Test: phenotype-level permutation test**: the masked/aligned labels are permuted among the
  phenotypes (group sizes kept; exact enumeration when there are at most 50,000 labellings, else
  10,000 random ones); two-sided p of the difference. It is valid with few phenotypes, where
  bootstrap intervals are known to be too narrow.

Why not a mixed-effects logistic model of "hidden domain actively surfaced" with random intercepts for
profile and phenotype: (1) the comparison the report makes is on the coverage scale, not in odds
ratios conditional on random effects; (2) offline and strong clinicians sit at 0 % or 100 %
coverage, where a logistic fit separates and its estimate diverges, while the bootstrap states an
exact 0 with a zero-width interval; (3) statsmodels' binomial mixed GLM is fitted by variational Bayes
or a Laplace-type MAP, whose intervals are not calibrated frequentist ones; (4) the bootstrap needs no
distributional assumption on the random effects and runs in well under a second per arm.

Limitation, stated on the page and in metrics/masking_model.csv: the unit of evidence is the phenotype
(the shipped catalog has 12 masked and 6 aligned; a study subset can have fewer), so the interval is
wide and, with fewer than about 10 phenotypes per group, the percentile bootstrap under-covers; the
permutation p is the safer guide. Masking is also confounded with everything else that differs
between these particular phenotypes: the comparison is between the phenotypes shipped, not a
population of masked and aligned presentations.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations
from typing import Any

from intake_eval.core.store import stable_hash

GROUP = ("judge", "clinician", "condition", "patient_mode")
N_BOOTSTRAP = 2000
N_PERMUTATIONS = 10000
EXACT_PERMUTATION_MAX = 50000
METHOD = (f"hierarchical bootstrap stratified by alignment (phenotypes, then profiles within each drawn phenotype, "
          f"then trials within each drawn profile; B={N_BOOTSTRAP}; 95% percentile); phenotype-label permutation test")
LIMITATION = ("The unit of evidence is the phenotype: with few phenotypes per group (fewer than about 10) the bootstrap "
              "interval under-covers and the permutation p is the safer guide; masking is confounded with whatever else "
              "differs between the shipped phenotypes.")
COLUMNS = [*GROUP, "masked_mean", "aligned_mean", "difference", "ci_low", "ci_high", "permutation_p",
           "permutation_exact", "masked_phenotypes", "aligned_phenotypes", "masked_profiles", "aligned_profiles",
           "conversations", "method"]

# phenotype -> profile -> the coverage of each of its conversations (trials)
Nested = dict[str, dict[str, list[float]]]


def _rng(seed: str):
    import numpy as np

    return np.random.default_rng(int(stable_hash(["masking-model", seed])[:16], 16))


_DRAW_BLOCK = 500_000  # random values drawn (and held) at a time; the stream is the same as in one draw


def _phenotype_draws(profiles: dict[str, list[float]], times: int, rng) -> tuple[Any, Any]:
    """``times`` resamples of one phenotype: profiles with replacement, then trials within each drawn
    profile. Returns (sums, counts) of the drawn conversations' coverage, each of length ``times``.
    Drawn in blocks of resamples (numpy's generator gives the same values in blocks as in one call), so
    memory stays a few MB however many profiles the phenotype has."""
    import numpy as np

    groups = [profiles[key] for key in sorted(profiles)]
    counts = np.array([len(values) for values in groups])
    width = int(counts.max())
    matrix = np.zeros((len(groups), width))
    for i, values in enumerate(groups):
        matrix[i, : len(values)] = values
    block = max(1, _DRAW_BLOCK // (len(groups) * width))
    sums, drawn_counts = np.zeros(times), np.zeros(times)
    if width == 1:
        for start in range(0, times, block):
            picked = rng.integers(len(groups), size=(min(block, times - start), len(groups)), dtype=np.int32)
            sums[start:start + len(picked)] = matrix[picked, 0].sum(axis=1)
            drawn_counts[start:start + len(picked)] = counts[picked].sum(axis=1)
        return sums, drawn_counts
    picked = rng.integers(len(groups), size=(times, len(groups)), dtype=np.int32)  # all before the trials' draws
    for start in range(0, times, block):
        rows = picked[start:start + block]
        k = counts[rows]
        trial = np.floor(rng.random((len(rows), len(groups), width)) * k[..., None]).astype(int)
        mask = np.arange(width)[None, None, :] < k[..., None]
        drawn = matrix[rows[..., None], trial]
        sums[start:start + len(rows)] = np.where(mask, drawn, 0.0).sum(axis=(1, 2))
        drawn_counts[start:start + len(rows)] = mask.sum(axis=(1, 2))
    return sums, drawn_counts


def _group_resamples(phenotypes: Nested, n_boot: int, rng):
    """Resampled mean coverage of one alignment group: phenotypes with replacement, then within each."""
    import numpy as np

    names = sorted(phenotypes)
    picks = rng.integers(len(names), size=(n_boot, len(names)))
    sums, counts = np.zeros(n_boot), np.zeros(n_boot)
    for index, name in enumerate(names):
        times = (picks == index).sum(axis=1)  # how often each replicate drew this phenotype
        total = int(times.sum())
        if not total:
            continue
        draw_sums, draw_counts = _phenotype_draws(phenotypes[name], total, rng)
        owner = np.repeat(np.arange(n_boot), times)  # each drawn copy gets its own within-phenotype resample
        sums += np.bincount(owner, weights=draw_sums, minlength=n_boot)
        counts += np.bincount(owner, weights=draw_counts, minlength=n_boot)
    return sums / counts


def _totals(phenotypes: Nested) -> tuple[float, int]:
    values = [v for profiles in phenotypes.values() for trials in profiles.values() for v in trials]
    return sum(values), len(values)


def permutation_p(masked: Nested, aligned: Nested, *, seed: str) -> tuple[float, bool]:
    """Two-sided p of the masked − aligned difference under permutations of the phenotypes' labels."""
    import numpy as np

    names = sorted(masked) + sorted(aligned)
    table = {**masked, **aligned}
    sums = np.array([_totals({n: table[n]})[0] for n in names])
    counts = np.array([_totals({n: table[n]})[1] for n in names], dtype=float)
    k = len(masked)

    def differences(labels):  # labels: rows of 0/1, 1 = masked
        masked_mean = (labels @ sums) / (labels @ counts)
        aligned_mean = ((1 - labels) @ sums) / ((1 - labels) @ counts)
        return masked_mean - aligned_mean

    observed = differences(np.array([[1.0] * k + [0.0] * (len(names) - k)]))[0]
    tolerance = 1e-12
    if math.comb(len(names), k) <= EXACT_PERMUTATION_MAX:
        chosen = np.array(list(combinations(range(len(names)), k)), dtype=int).reshape(-1, k)
        rows = np.zeros((len(chosen), len(names)))
        rows[np.arange(len(chosen))[:, None], chosen] = 1.0
        return float(np.mean(np.abs(differences(rows)) >= abs(observed) - tolerance)), True
    rng = _rng(f"permutation|{seed}")
    order = np.argsort(rng.random((N_PERMUTATIONS, len(names))), axis=1)
    rows = (order < k).astype(float)
    extreme = int(np.sum(np.abs(differences(rows)) >= abs(observed) - tolerance))
    return float((extreme + 1) / (N_PERMUTATIONS + 1)), False  # the observed labelling counts once


def masking_effect(masked: Nested, aligned: Nested, *, seed: str, n_boot: int = N_BOOTSTRAP) -> dict[str, Any]:
    """The masked − aligned difference in mean coverage, its hierarchical-bootstrap CI and permutation p."""
    import numpy as np

    masked_sum, masked_n = _totals(masked)
    aligned_sum, aligned_n = _totals(aligned)
    figures: dict[str, Any] = {
        "masked_mean": masked_sum / masked_n if masked_n else None,
        "aligned_mean": aligned_sum / aligned_n if aligned_n else None,
        "masked_phenotypes": len(masked), "aligned_phenotypes": len(aligned),
        "masked_profiles": sum(len(p) for p in masked.values()), "aligned_profiles": sum(len(p) for p in aligned.values()),
        "conversations": masked_n + aligned_n, "method": METHOD,
        "difference": None, "ci_low": None, "ci_high": None, "permutation_p": None, "permutation_exact": None,
    }
    if not masked_n or not aligned_n:
        return figures
    figures["difference"] = figures["masked_mean"] - figures["aligned_mean"]
    rng = _rng(f"bootstrap|{seed}")
    resampled = _group_resamples(masked, n_boot, rng) - _group_resamples(aligned, n_boot, rng)
    low, high = np.quantile(resampled, [0.025, 0.975])
    figures["ci_low"], figures["ci_high"] = float(low), float(high)
    figures["permutation_p"], figures["permutation_exact"] = permutation_p(masked, aligned, seed=seed)
    return figures


def masking_model_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per judge × clinician arm, from the ok conversation rows (phenotype, alignment, profile,
    active coverage); phenotypes of unknown alignment are left out."""
    nested: dict[tuple, dict[str, Nested]] = defaultdict(lambda: {"masked": {}, "aligned": {}})
    for row in rows:
        alignment, coverage = row.get("alignment"), row.get("active_coverage_rate")
        if alignment not in ("masked", "aligned") or coverage is None:
            continue
        group = nested[tuple(row[name] for name in GROUP)][alignment]
        group.setdefault(str(row["phenotype"]), {}).setdefault(str(row["profile_id"]), []).append(float(coverage))
    out = []
    for key in sorted(nested):
        effect = masking_effect(nested[key]["masked"], nested[key]["aligned"], seed="|".join(map(str, key)))
        out.append({**dict(zip(GROUP, key)), **effect})
    return out
