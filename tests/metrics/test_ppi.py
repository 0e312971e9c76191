"""The prediction-powered mean: unbiased with valid intervals where the judge alone is biased."""

from __future__ import annotations

import math
import random

import pytest

from intake_eval.metrics.ppi import labels_needed, mean_ci, ppi_mean_ci, tuned_lambda

TRUE_RATE = 0.5  # each of four hidden domains is truly caught with this probability
DOMAINS = 4


def conversation(rng: random.Random) -> tuple[float, float]:
    """(human, judge) active coverage of one synthetic conversation. The judge sees 95 % of the
    domains a human calls caught and wrongly calls 30 % of the missed ones caught: biased upwards
    by (0.95·0.5 + 0.3·0.5) − 0.5 = +0.125."""
    human = judge = 0
    for _ in range(DOMAINS):
        caught = rng.random() < TRUE_RATE
        human += caught
        judge += (rng.random() < 0.95) if caught else (rng.random() < 0.30)
    return human / DOMAINS, judge / DOMAINS


@pytest.mark.parametrize("lam", [None, 1.0])
def test_calibrated_interval_covers_the_truth_at_its_nominal_rate_and_the_judge_alone_is_biased(lam):
    rng = random.Random(17)
    draws, covered, judge_covered, judge_means = 400, 0, 0, []
    for _ in range(draws):
        labelled = [conversation(rng) for _ in range(80)]
        unlabelled = [conversation(rng)[1] for _ in range(800)]
        estimate = ppi_mean_ci([h for h, _ in labelled], [j for _, j in labelled], unlabelled, lam=lam)
        covered += estimate.ci_low <= TRUE_RATE <= estimate.ci_high
        judge_only = mean_ci([j for _, j in labelled] + unlabelled)
        judge_covered += judge_only.ci_low <= TRUE_RATE <= judge_only.ci_high
        judge_means.append(judge_only.mean)
    assert 0.92 <= covered / draws <= 0.98  # nominal 95 %; Monte Carlo SE ≈ 1.1 points
    assert judge_covered / draws < 0.01
    assert sum(judge_means) / draws == pytest.approx(TRUE_RATE + 0.125, abs=0.01)


def test_classic_ppi_matches_the_formula_by_hand():
    human, judge, unlabelled = [1.0, 0.0, 0.5, 1.0], [1.0, 0.5, 0.5, 0.5], [0.5, 1.0, 0.0, 0.5, 1.0]
    estimate = ppi_mean_ci(human, judge, unlabelled, lam=1.0)
    rectifier = [0.0, -0.5, 0.0, 0.5]
    assert estimate.mean == pytest.approx(sum(unlabelled) / 5 + sum(rectifier) / 4)
    var_u = sum((x - 0.6) ** 2 for x in unlabelled) / 5
    var_r = sum(x ** 2 for x in rectifier) / 4
    assert estimate.se == pytest.approx(math.sqrt(var_u / 5 + var_r / 4))
    assert estimate.ci_high - estimate.mean == pytest.approx(1.959964 * estimate.se, rel=1e-5)


def test_tuned_lambda_ignores_a_useless_judge_and_trusts_a_perfect_one():
    rng = random.Random(3)
    human = [rng.random() for _ in range(200)]
    noise = [rng.random() for _ in range(200)]
    assert tuned_lambda(human, noise, [rng.random() for _ in range(2000)]) < 0.2
    assert tuned_lambda(human, human, [rng.random() for _ in range(2000)]) > 0.85
    assert tuned_lambda(human, [0.5] * 200, [0.5] * 100) == 0.0


def test_every_item_labelled_gives_the_human_mean_and_no_labels_gives_nothing():
    estimate = ppi_mean_ci([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [])
    assert estimate.mean == pytest.approx(2 / 3) and estimate.n_unlabelled == 0
    assert ppi_mean_ci([], [], [0.5]) is None


def test_labels_needed_reaches_the_target_width():
    needed = labels_needed(judge_sd=0.3, rectifier_sd=0.2, n_total=1000, half_width=0.05)
    se = math.sqrt(0.3 ** 2 / 1000 + 0.2 ** 2 / needed)
    assert 1.959964 * se <= 0.05 < 1.959964 * math.sqrt(0.3 ** 2 / 1000 + 0.2 ** 2 / (needed - 1))
    assert labels_needed(judge_sd=0.5, rectifier_sd=0.2, n_total=10, half_width=0.05) is None
