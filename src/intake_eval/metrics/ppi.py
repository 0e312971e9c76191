"""Prediction-powered inference for a mean: a judge's labels on every item, corrected by the
human-minus-judge difference on a random labelled subset (Angelopoulos et al. 2023, "PPI++").

This is the mean estimator of the reference implementation (``ppi_py.ppi_mean_ci`` with its
power tuning), written out because ``ppi-python`` pulls numba, statsmodels and a dataset
downloader for one formula. With ``n`` labelled items (human ``Y``, judge ``Ŷ``) and ``N`` items
with the judge's label only (``Ŷu``):

    θ̂(λ) = λ·mean(Ŷu) + mean(Y − λ·Ŷ),   se² = var(λ·Ŷu)/N + var(Y − λ·Ŷ)/n

λ = 1 is classic PPI (unbiased whatever the judge); the tuned λ̂ = cov(Y, Ŷ) / ((1 + n/N)·var(Ŷ all)),
clipped to [0, 1], never does worse than the human labels alone (λ = 0) asymptotically.
The interval is a normal (CLT) interval: valid for the mean over the population the items were
drawn uniformly from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class MeanCI:
    mean: float
    ci_low: float
    ci_high: float
    se: float
    n: int


@dataclass(frozen=True)
class PPIEstimate(MeanCI):
    n_unlabelled: int
    lam: float  # the weight given to the judge (0 = human labels only, 1 = classic PPI)
    rectifier_sd: float  # SD of Y − λ·Ŷ on the labelled items


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float], ddof: int = 0) -> float:
    if len(values) <= ddof:
        return 0.0
    centre = _mean(values)
    return sum((v - centre) ** 2 for v in values) / (len(values) - ddof)


def z_value(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def mean_ci(values: Sequence[float], alpha: float = 0.05) -> MeanCI | None:
    """The classical normal interval for a mean (the judge-only and human-only figures)."""
    if not values:
        return None
    centre = _mean(values)
    se = math.sqrt(_var(values, ddof=1) / len(values)) if len(values) > 1 else 0.0
    z = z_value(alpha)
    return MeanCI(centre, centre - z * se, centre + z * se, se, len(values))


def tuned_lambda(human: Sequence[float], judge: Sequence[float], judge_unlabelled: Sequence[float]) -> float:
    n, big_n = len(human), len(judge_unlabelled)
    mean_h, mean_j = _mean(human), _mean(judge)
    covariance = sum((h - mean_h) * (j - mean_j) for h, j in zip(human, judge)) / n
    spread = _var([*judge, *judge_unlabelled], ddof=1)
    if spread <= 0:
        return 0.0  # a constant judge carries no information
    return min(1.0, max(0.0, covariance / ((1 + n / big_n) * spread)))


def ppi_mean_ci(human: Sequence[float], judge: Sequence[float], judge_unlabelled: Sequence[float], *,
                alpha: float = 0.05, lam: float | None = None) -> PPIEstimate | None:
    """Mean of the human label over the population, with a (1 − alpha) interval.

    ``human[i]`` and ``judge[i]`` are the two labels of labelled item i; ``judge_unlabelled`` the
    judge's labels of the items nobody labelled. ``lam=None`` tunes λ (PPI++); ``lam=1`` is classic PPI.
    """
    if len(human) != len(judge):
        raise ValueError("human and judge labels must pair up")
    if not human:
        return None
    if not judge_unlabelled:  # every item labelled: the human mean is the answer
        plain = mean_ci(human, alpha)
        assert plain is not None
        return PPIEstimate(plain.mean, plain.ci_low, plain.ci_high, plain.se, plain.n, 0, 0.0, math.sqrt(_var(human)))
    weight = tuned_lambda(human, judge, judge_unlabelled) if lam is None else lam
    rectifier = [h - weight * j for h, j in zip(human, judge)]
    centre = weight * _mean(judge_unlabelled) + _mean(rectifier)
    se = math.sqrt(weight ** 2 * _var(judge_unlabelled) / len(judge_unlabelled) + _var(rectifier) / len(rectifier))
    z = z_value(alpha)
    return PPIEstimate(centre, centre - z * se, centre + z * se, se, len(human), len(judge_unlabelled), weight,
                       math.sqrt(_var(rectifier)))


def labels_needed(judge_sd: float, rectifier_sd: float, n_total: int, half_width: float, alpha: float = 0.05) -> int | None:
    """Labelled items for a PPI interval of ± ``half_width`` (λ = 1), or None when the judge's own
    sampling noise over ``n_total`` items is already wider than that."""
    budget = (half_width / z_value(alpha)) ** 2 - judge_sd ** 2 / max(n_total, 1)
    if budget <= 0:
        return None
    return max(2, math.ceil(rectifier_sd ** 2 / budget))
