"""Does a conclusion survive a change of scorer (another judge, another run)? The pieces shared by
`intake-eval compare` and the report's judge-sensitivity section.

A scorer's view of the clinicians (entities): the mean active coverage of each over profiles (trials
averaged), its ranking, and the paired test of every two entities on the profiles both were scored
on, concluding "a > b" or "a < b" at p < 0.05 (paired permutation test), else "no difference".
Against a reference view: Kendall's τ of the scores, the pairwise orderings that flip, the test
conclusions that change, and a one-line verdict.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from intake_eval.metrics.stats import paired_comparison

RANK_METRIC = "active_coverage_rate"
SIGNIFICANCE = 0.05


@dataclass
class ScorerView:
    scorer: Any  # who scored: a judge name, or compare's (run, judge)
    scores: dict[str, float]  # entity → mean active coverage (profiles, trials averaged)
    tests: dict[tuple[str, str], str]  # (a, b) → "a > b" | "a < b" | "no difference"
    ranking: list[str] = field(default_factory=list)


@dataclass
class Sensitivity:
    scorer: Any
    against: Any
    dimension: str  # "judge choice" or what differs between two runs
    tau: float | None
    flips: list[str]  # "a vs b"
    changed: list[str]  # "a vs b: a > b → no difference"
    verdict: str


def entity_profile_values(frame: Any, judge: str, metric: str, columns: list[str]) -> dict[str, dict[str, float]]:
    """entity → profile id → ``metric`` averaged over trials, from rows of metrics/conversations.csv
    (a DataFrame of ok rows); the entity is the values of ``columns`` joined with ' · '."""
    rows = frame[(frame["judge"] == judge) & frame[metric].notna()]
    if not len(rows):
        return {}
    rows = rows.assign(entity=rows[columns].astype(str).agg(" · ".join, axis=1), profile_id=rows["profile_id"].astype(str))
    out: dict[str, dict[str, float]] = {}
    for (entity, profile), value in rows.groupby(["entity", "profile_id"])[metric].mean().items():
        out.setdefault(str(entity), {})[str(profile)] = float(value)
    return out


def conclusion(a: str, b: str, values_a: dict[str, float], values_b: dict[str, float], seed: str) -> str:
    test = paired_comparison(values_a, values_b, seed=seed)
    if not test.n_pairs or test.permutation_p is None or test.permutation_p >= SIGNIFICANCE or not test.mean_difference:
        return "no difference"
    return f"{a} > {b}" if test.mean_difference > 0 else f"{a} < {b}"


def scorer_view(scorer: Any, values: dict[str, dict[str, float]], entities: list[str], seed: str) -> ScorerView:
    scores = {e: sum(values[e].values()) / len(values[e]) for e in entities}
    tests = {(a, b): conclusion(a, b, values[a], values[b], seed=f"sensitivity|{seed}|{a}|{b}")
             for a, b in itertools.combinations(entities, 2)}
    return ScorerView(scorer, scores, tests, sorted(entities, key=lambda e: (-scores[e], e)))


def kendall_tau(reference: dict[str, float], other: dict[str, float]) -> float | None:
    from scipy.stats import kendalltau

    entities = sorted(reference)
    if len(entities) < 2:
        return None
    tau = kendalltau([reference[e] for e in entities], [other[e] for e in entities]).statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def compare_views(reference: ScorerView, view: ScorerView, dimension: str) -> Sensitivity:
    flips = [f"{a} vs {b}" for a, b in itertools.combinations(sorted(reference.scores), 2)
             if _sign(reference.scores[a] - reference.scores[b]) != _sign(view.scores[a] - view.scores[b])]
    changed = [f"{a} vs {b}: {reference.tests[(a, b)]} → {view.tests[(a, b)]}"
               for (a, b) in sorted(reference.tests) if reference.tests[(a, b)] != view.tests[(a, b)]]
    topic = "judge" if dimension == "judge choice" else dimension
    if not flips and not changed:
        verdict = f"robust to {dimension}"
    else:
        parts = ([f"ordering flips for {', '.join(flips)}"] if flips else []) + \
                ([f"test conclusion changes for {'; '.join(changed)}"] if changed else [])
        verdict = f"depends on {topic}: " + "; ".join(parts)
    return Sensitivity(view.scorer, reference.scorer, dimension, kendall_tau(reference.scores, view.scores),
                       flips, changed, verdict)


def judge_sensitivity(frame: Any, judges: list[str], columns: list[str], seed: str = "") -> tuple[list[ScorerView], list[Sensitivity]]:
    """Every judge of one run against the first (the primary), over the entities all of them scored."""
    values = {judge: entity_profile_values(frame, judge, RANK_METRIC, columns) for judge in judges}
    values = {judge: v for judge, v in values.items() if v}
    if len(values) < 2:
        return [], []
    common = sorted(set.intersection(*(set(v) for v in values.values())))
    views = [scorer_view(judge, v, common, f"{seed}|{judge}") for judge, v in values.items()]
    return views, [compare_views(views[0], view, "judge choice") for view in views[1:]]
