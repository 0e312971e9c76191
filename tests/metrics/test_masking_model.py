"""Masked vs aligned with profiles nested in phenotypes (metrics/masking_model.py) on constructed data."""

from __future__ import annotations

import math

import pytest

from intake_eval.metrics.masking_model import masking_effect, masking_model_rows, permutation_p


def _phenotypes(prefix: str, means: list[float], profiles: int = 4, trials: int = 2) -> dict[str, dict[str, list[float]]]:
    """Each phenotype's profiles vary a little around its mean; trials vary a little within a profile."""
    out = {}
    for i, mean in enumerate(means):
        out[f"{prefix}{i}"] = {f"{prefix}{i}-P{j}": [round(mean + 0.05 * ((j % 2) - 0.5) + 0.02 * t, 4) for t in range(trials)]
                               for j in range(profiles)}
    return out


def test_masked_harder_is_found_with_its_sign_and_an_interval_below_zero():
    masked = _phenotypes("m", [0.20, 0.25, 0.30])
    aligned = _phenotypes("a", [0.60, 0.65, 0.70])
    effect = masking_effect(masked, aligned, seed="s")
    values = lambda group: [v for p in group.values() for t in p.values() for v in t]  # noqa: E731
    expected = sum(values(masked)) / 24 - sum(values(aligned)) / 24
    assert effect["difference"] == pytest.approx(expected) and effect["difference"] == pytest.approx(-0.4)
    assert effect["ci_low"] < effect["difference"] < effect["ci_high"] < 0
    # hand-worked exact permutation p: of the C(6, 3) = 20 labellings only the observed one and its
    # mirror (equal group sizes and weights) reach |difference| = 0.4, so p = 2 / 20
    assert effect["permutation_exact"] is True and effect["permutation_p"] == pytest.approx(0.1)
    assert (effect["masked_phenotypes"], effect["aligned_phenotypes"], effect["masked_profiles"]) == (3, 3, 12)
    assert masking_effect(masked, aligned, seed="s") == effect  # seeded


def test_no_difference_gives_an_interval_around_zero_and_a_large_p():
    masked = _phenotypes("m", [0.3, 0.7, 0.5, 0.4])
    aligned = _phenotypes("a", [0.7, 0.3, 0.4, 0.5])
    effect = masking_effect(masked, aligned, seed="s")
    assert effect["difference"] == pytest.approx(0.0, abs=1e-12)
    assert effect["ci_low"] < 0 < effect["ci_high"] and effect["permutation_p"] == pytest.approx(1.0)


def test_phenotypes_not_profiles_are_the_unit():
    # the same phenotype means with 10× the profiles: the interval barely narrows, because the spread
    # between phenotypes, not the number of profiles, limits what masking can be shown to do
    few = masking_effect(_phenotypes("m", [0.1, 0.5]), _phenotypes("a", [0.4, 0.8]), seed="s")
    many = masking_effect(_phenotypes("m", [0.1, 0.5], profiles=40), _phenotypes("a", [0.4, 0.8], profiles=40), seed="s")
    assert many["ci_high"] - many["ci_low"] > 0.8 * (few["ci_high"] - few["ci_low"])


def test_monte_carlo_permutation_when_labellings_are_many():
    masked = _phenotypes("m", [0.2 + 0.01 * i for i in range(12)], profiles=1, trials=1)
    aligned = _phenotypes("a", [0.6 + 0.01 * i for i in range(12)], profiles=1, trials=1)
    assert math.comb(24, 12) > 50000
    p, exact = permutation_p(masked, aligned, seed="s")
    assert not exact and p == pytest.approx(1 / 10001)  # nothing is as extreme as the observed labelling


def test_rows_per_arm_skip_unknown_alignment_and_state_the_method():
    rows = []
    for phenotype, alignment, coverage in (("x", "masked", 0.25), ("y", "masked", 0.5), ("z", "aligned", 0.75),
                                           ("w", "aligned", 1.0), ("u", "", 0.0)):
        for profile in range(3):
            rows.append({"judge": "j", "clinician": "c", "condition": "minimal", "patient_mode": "tracked",
                         "phenotype": phenotype, "alignment": alignment, "profile_id": f"{phenotype}{profile}",
                         "active_coverage_rate": coverage})
    [row] = masking_model_rows(rows)
    assert row["masked_mean"] == pytest.approx(0.375) and row["aligned_mean"] == pytest.approx(0.875)
    assert row["difference"] == pytest.approx(-0.5) and row["conversations"] == 12
    assert "phenotype" in row["method"] and "permutation" in row["method"]
