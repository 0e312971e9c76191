"""Does a conclusion survive a change of judge or run? Clinician rankings per scorer (run × judge),
Kendall's τ against the reference (the first run's primary judge), the pairwise orderings that flip,
the paired tests whose conclusion changes, and a one-line verdict per scorer.

Rankings and tests use active coverage over the entities (clinicians) every scorer scored; a paired
test concludes "a > b" or "a < b" at p < 0.05 (paired permutation test over profiles), else "no
difference".
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from intake_eval.compare.runs import LoadedRun, Scorer, profile_values, what_differs
from intake_eval.metrics.stats import paired_comparison

RANK_METRIC = "active_coverage_rate"
SIGNIFICANCE = 0.05


@dataclass
class ScorerView:
    scorer: Scorer
    scores: dict[str, float]  # entity → mean active coverage (profiles, trials averaged)
    tests: dict[tuple[str, str], str]  # (a, b) → "a > b" | "a < b" | "no difference"
    ranking: list[str] = field(default_factory=list)


@dataclass
class Sensitivity:
    scorer: Scorer
    against: Scorer
    dimension: str  # "judge choice" or what differs between the runs
    tau: float | None
    flips: list[str]  # "a vs b"
    changed: list[str]  # "a vs b: a > b → no difference"
    verdict: str


def conclusion(a: str, b: str, values_a: dict[str, float], values_b: dict[str, float], seed: str) -> str:
    test = paired_comparison(values_a, values_b, seed=seed)
    if not test.n_pairs or test.permutation_p is None or test.permutation_p >= SIGNIFICANCE or not test.mean_difference:
        return "no difference"
    return f"{a} > {b}" if test.mean_difference > 0 else f"{a} < {b}"


def scorer_view(scorer: Scorer, loaded: LoadedRun, columns: list[str], entities: list[str]) -> ScorerView:
    values = profile_values(loaded, scorer.judge, RANK_METRIC, columns)
    scores = {e: sum(values[e].values()) / len(values[e]) for e in entities}
    tests = {(a, b): conclusion(a, b, values[a], values[b], seed=f"sensitivity|{scorer.label}|{a}|{b}")
             for a, b in itertools.combinations(entities, 2)}
    ranking = sorted(entities, key=lambda e: (-scores[e], e))
    return ScorerView(scorer, scores, tests, ranking)


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


def sensitivity(runs: list[LoadedRun], columns: list[str]) -> tuple[list[ScorerView], list[Sensitivity], list[str]]:
    """(a view per scorer, each scorer against the reference, the entities every scorer scored)."""
    by_name = {loaded.name: loaded for loaded in runs}
    scored = {}
    for loaded in runs:
        for judge in loaded.judges:
            values = profile_values(loaded, judge, RANK_METRIC, columns)
            scored[Scorer(loaded.name, judge, judge == loaded.judges[0])] = values
    common = sorted(set.intersection(*(set(v) for v in scored.values()))) if scored else []
    views = [scorer_view(s, by_name[s.run], columns, common) for s in scored]
    if not views:
        return [], [], common
    reference, out = views[0], []
    for view in views[1:]:
        if view.scorer.run == reference.scorer.run:
            dimension = "judge choice"
        else:
            dimension = what_differs(by_name[reference.scorer.run], by_name[view.scorer.run])
            if view.scorer.judge != reference.scorer.judge and "judge" not in dimension:
                dimension += f"; judge {reference.scorer.judge} → {view.scorer.judge}"
        out.append(compare_views(reference, view, dimension))
    return views, out, common
