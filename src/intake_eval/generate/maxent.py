"""Maximum-entropy sampling designs with given inclusion probabilities, by exact enumeration.

Over the allowed samples of a small set of units, the design P(S) = q_g · Π_{i∈S} w_i / Z_g (g the
size group of S) is the one of maximum entropy with the given size-group probabilities q_g and
inclusion probabilities π (Hájek 1964; Chen, Dempster & Liu 1994, Biometrika 81:457-469; Tillé
2006, *Sampling Algorithms*, §5.6). Within one size this is conditional Poisson sampling; R's
``sampling::UPmaxentropy`` computes the same working probabilities for that case by a fixed-point
iteration, here Newton's method on the convex dual is exact to ``TOLERANCE`` because every sample
is enumerated (at most a few thousand for the pools of a phenotype).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

TOLERANCE = 1e-10  # calibration stops when every inclusion probability is this close to its target


def allowed_sample(sample: tuple[int, ...], forbidden: list[tuple[int, int]]) -> bool:
    members = set(sample)
    return not any(a in members and b in members for a, b in forbidden)


def fit_max_entropy(target: list[float], groups: dict[int, float], forbidden: list[tuple[int, int]],
                    nonempty: bool, exact: Sequence[tuple[tuple[int, ...], int]] = ()) -> list[tuple[tuple[int, ...], int, float]]:
    """The maximum-entropy design over samples of units 0..n-1 with inclusion probabilities
    ``target``, size-group probabilities ``groups`` (size → probability; the key -1 means one
    group of every size), no sample holding a ``forbidden`` pair, no empty sample (``nonempty``),
    and every sample holding exactly ``count`` of each ``exact`` set of units (a unit at
    probability 1 or 0, or a conflict group at its capacity). Returns (sample, group, probability)
    for every allowed sample.

    P(S) = q_g · exp(θ·S) / Z_g(θ) for S in size group g; θ_i are the log working odds, found by
    Newton's method with a backtracking line search on the convex dual Σ_g q_g log Z_g(θ) − θ·π,
    whose gradient is the design's inclusion probabilities minus the targets. Raises ValueError when
    the targets cannot be reached (they lie outside what the allowed samples can give)."""
    import numpy as np

    n = len(target)
    sizes: Iterable[int]
    if -1 in groups:
        sizes = range(0, n + 1)
    else:
        sizes = sorted(groups)
    rows, group_of = [], []
    for size in sizes:
        for sample in itertools.combinations(range(n), size):
            if (nonempty and not sample) or not allowed_sample(sample, forbidden):
                continue
            if any(sum(i in sample for i in members) != count for members, count in exact):
                continue
            rows.append(sample)
            group_of.append(-1 if -1 in groups else size)
    for key, share in groups.items():
        if share > 0 and key not in group_of:
            raise ValueError(f"no allowed sample of {key} optional domains")
    keys = sorted(set(group_of))
    matrix = np.zeros((len(rows), n))
    for r, sample in enumerate(rows):
        matrix[r, list(sample)] = 1.0
    members = {key: np.array([g == key for g in group_of]) for key in keys}
    weight = {key: groups[key] for key in keys}
    pi = np.array(target, dtype=float)

    def evaluate(theta):
        scores = matrix @ theta
        probs = np.zeros(len(rows))
        dual = -float(theta @ pi)
        for key in keys:
            mask = members[key]
            top = scores[mask].max()
            exp = np.exp(scores[mask] - top)
            z = exp.sum()
            probs[mask] = weight[key] * exp / z
            dual += weight[key] * (top + math.log(z))
        return dual, probs

    theta = np.zeros(n)
    dual, probs = evaluate(theta)
    for _ in range(500):
        gradient = matrix.T @ probs - pi
        if n == 0 or np.abs(gradient).max() < TOLERANCE:
            return [(rows[r], group_of[r], float(probs[r])) for r in range(len(rows))]
        hessian = np.zeros((n, n))
        for key in keys:
            mask = members[key]
            local = probs[mask] / weight[key]
            sub = matrix[mask]
            mean = local @ sub
            hessian += weight[key] * ((sub * local[:, None]).T @ sub - np.outer(mean, mean))
        step = -np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        scale = 1.0
        while scale > 1e-12:
            candidate = theta + scale * step
            new_dual, new_probs = evaluate(candidate)
            slack = 1e-13 * (1.0 + abs(dual))  # rounding: near the optimum the dual barely moves
            if new_dual <= dual + 1e-4 * scale * float(gradient @ step) + slack:
                break
            scale /= 2
        else:
            break
        theta, dual, probs = candidate, new_dual, new_probs
    raise ValueError("the inclusion probabilities cannot be reached by any design on the allowed samples")
