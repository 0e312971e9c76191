"""Does a conclusion survive a change of scorer (another judge, another patient model, another run)? The
pieces shared by `intake-eval compare` and the report's judge- and patient-model-sensitivity sections.

A scorer's view of the clinicians (entities): the mean active coverage of each over profiles (trials
averaged), its ranking, and the paired test of every two entities on the profiles both were scored
on, concluding "a > b" or "a < b" at p < 0.05 (paired permutation test, Holm-adjusted over the view's
pairs), else "no difference". Rankings show ties as ties (``tied_ranks``: "=2").
Against a reference view: Kendall's τ of the scores, the pairwise orderings that flip, the test
conclusions that change, and a one-line verdict.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from intake_eval.metrics.stats import PairedComparison, holm, paired_comparison

RANK_METRIC = "active_coverage_rate"
SIGNIFICANCE = 0.05
TIE_TOLERANCE = 1e-9  # scores closer than this are one score (means of the same rates in another order)


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


def _entity_profile_groups(frame: Any, judge: str, metric: str, columns: list[str]) -> tuple[Any, ...] | None:
    """The ok rows of ``judge`` grouped by (entity, profile), entities and profiles in sorted order, a group's
    rows in frame order: (entity names, profile ids, entity code per row, profile code per row, value per row),
    rows sorted by group; None when there are no rows. Grouped on integer codes (a stable sort keeps each
    group's rows in frame order), so a long table costs a few arrays, not a Python object per group and row."""
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information

    rows = frame[(frame["judge"] == judge) & frame[metric].notna()]
    if not len(rows):
        return None
    if len(columns) == 1:
        entity_codes, entities = _sorted_codes(rows[columns[0]])
    else:
        parts = [rows[column].astype(str) for column in columns]
        entity_column = parts[0]
        for part in parts[1:]:
            entity_column = entity_column.str.cat(part, sep=" · ")
        entity_codes, entities = pd.factorize(entity_column, sort=True)
    profile_codes, profiles = _sorted_codes(rows["profile_id"])
    order = np.lexsort((profile_codes, entity_codes))
    return (entities, profiles, entity_codes[order], profile_codes[order],
            rows[metric].to_numpy(dtype=float)[order])


def _sorted_codes(column: Any) -> tuple[Any, Any]:
    """(a code per row, the values as text in sorted order): ``pd.factorize(column.astype(str), sort=True)``.
    A categorical column of text with no missing cell is re-ranked on its codes (no string per row: what a
    long table read with ``text_as_categories`` holds); its unused categories get codes no row has."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = list(column.cat.categories)
        codes = column.cat.codes.to_numpy()
        if all(isinstance(value, str) for value in categories) and not (codes < 0).any():
            order = sorted(range(len(categories)), key=categories.__getitem__)
            rank = np.empty(len(categories), dtype=np.int64)
            rank[order] = np.arange(len(categories))
            return rank[codes], [categories[i] for i in order]
    return pd.factorize(column.astype(str), sort=True)


def entity_profile_trials(frame: Any, judge: str, metric: str, columns: list[str]) -> dict[str, dict[str, list[float]]]:
    """entity → profile id → ``metric`` of each trial (in conversation order), from rows of
    metrics/conversations.csv (a DataFrame of ok rows); the entity is the values of ``columns`` joined with ' · '.
    Entities and profiles come in sorted order."""
    groups = _entity_profile_groups(frame, judge, metric, columns)
    if groups is None:
        return {}
    entities, profiles, entity_codes, profile_codes, measured = groups
    out: dict[str, dict[str, list[float]]] = {}
    current: tuple[int, int] | None = None
    group: list[float] = []
    for entity_code, profile_code, value in zip(entity_codes.tolist(), profile_codes.tolist(), measured.tolist()):
        if (entity_code, profile_code) != current:
            current = (entity_code, profile_code)
            group = out.setdefault(str(entities[entity_code]), {}).setdefault(str(profiles[profile_code]), [])
        group.append(value)
    return out


def entity_profile_values(frame: Any, judge: str, metric: str, columns: list[str]) -> dict[str, dict[str, float]]:
    """entity → profile id → ``metric`` averaged over trials (see ``entity_profile_trials``)."""
    return {entity: {profile: sum(values) / len(values) for profile, values in profiles.items()}
            for entity, profiles in entity_profile_trials(frame, judge, metric, columns).items()}


@dataclass
class ProfileMeans:
    """One entity's mean over trials per profile, as two arrays: ``profiles`` (the profiles' codes, ascending in
    the order of their sorted ids) and ``means``. What ``entity_profile_values`` gives as a dict, without a
    Python object per profile: a long table's views hold arrays, and a test builds its dicts one pair at a time."""

    profiles: Any  # numpy int array
    means: Any  # numpy float array

    def __len__(self) -> int:
        return len(self.profiles)

    def total(self) -> float:
        """The means summed in profile order (as ``sum`` adds a dict's values: the same float)."""
        return float(sum(self.means.tolist()))

    def as_dict(self) -> dict[int, float]:
        """profile code → mean: a pair test's input (codes sort as the profile ids do)."""
        return dict(zip(self.profiles.tolist(), self.means.tolist()))


def entity_profile_means(frame: Any, judge: str, metric: str, columns: list[str]) -> dict[str, ProfileMeans]:
    """entity → its ``ProfileMeans`` (the same numbers as ``entity_profile_values``: each mean is its trials
    summed in frame order, then divided by their number), entities in sorted order."""
    import numpy as np

    groups = _entity_profile_groups(frame, judge, metric, columns)
    if groups is None:
        return {}
    entities, _, entity_codes, profile_codes, measured = groups
    first_of_group = np.r_[True, (entity_codes[1:] != entity_codes[:-1]) | (profile_codes[1:] != profile_codes[:-1])]
    starts = np.flatnonzero(first_of_group)
    group_of_row = np.cumsum(first_of_group) - 1
    # bincount adds each group's values one after another in row order, from 0.0: Python's sum of the same list
    sums = np.bincount(group_of_row, weights=measured, minlength=len(starts))
    means = sums / np.bincount(group_of_row, minlength=len(starts))
    group_entities, group_profiles = entity_codes[starts], profile_codes[starts]
    bounds = np.flatnonzero(np.r_[True, group_entities[1:] != group_entities[:-1], True])
    return {str(entities[group_entities[low]]): ProfileMeans(group_profiles[low:high], means[low:high])
            for low, high in zip(bounds[:-1].tolist(), bounds[1:].tolist())}


def conclusion(a: str, b: str, test: PairedComparison, adjusted_p: float | None) -> str:
    """'a > b' / 'a < b' when the (Holm-adjusted) permutation p is below SIGNIFICANCE, else 'no difference'."""
    if not test.n_pairs or adjusted_p is None or adjusted_p >= SIGNIFICANCE or not test.mean_difference:
        return "no difference"
    return f"{a} > {b}" if test.mean_difference > 0 else f"{a} < {b}"


EntityValues = Mapping[str, Mapping[Any, float] | ProfileMeans]  # entity → profile → mean over trials


def _score(values: Mapping[Any, float] | ProfileMeans) -> float:
    """Mean over profiles of the per-profile means."""
    if isinstance(values, ProfileMeans):
        return values.total() / len(values)
    return sum(values.values()) / len(values)


def _pair_input(values: Mapping[Any, float] | ProfileMeans) -> Mapping[Any, float]:
    return values.as_dict() if isinstance(values, ProfileMeans) else values


def scorer_view(scorer: Any, values: EntityValues, entities: list[str], seed: str) -> ScorerView:
    """Scores, ranking and the paired tests of every two entities; the tests of one view are one family
    (Holm-adjusted together), so a verdict never rests on an unadjusted p among many pairs. A ``ProfileMeans``
    is made a dict only for the one test it is in."""
    scores = {e: _score(values[e]) for e in entities}
    pairs = list(itertools.combinations(entities, 2))
    tests = [paired_comparison(_pair_input(values[a]), _pair_input(values[b]), seed=f"sensitivity|{seed}|{a}|{b}")
             for a, b in pairs]
    adjusted = holm([test.permutation_p if test.n_pairs else None for test in tests])
    conclusions = {(a, b): conclusion(a, b, test, p) for (a, b), test, p in zip(pairs, tests, adjusted)}
    return ScorerView(scorer, scores, conclusions, sorted(entities, key=lambda e: (-scores[e], e)))


def tied_ranks(scores: dict[str, float], order: list[str]) -> list[tuple[str, str]]:
    """(rank, entity) in ``order`` (best first): standard competition ranks, a tie written "=k" on
    every entity sharing rank k, so equal scores never read as a strict order."""
    out: list[tuple[int, str]] = []
    for position, entity in enumerate(order, start=1):
        tied = out and abs(scores[entity] - scores[out[-1][1]]) <= TIE_TOLERANCE
        out.append((out[-1][0] if tied else position, entity))
    shared = {rank for rank, _ in out if sum(1 for r, _ in out if r == rank) > 1}
    return [(f"={rank}" if rank in shared else str(rank), entity) for rank, entity in out]


def kendall_tau(reference: dict[str, float], other: dict[str, float]) -> float | None:
    from scipy.stats import kendalltau  # type: ignore[import-untyped]  # scipy ships no type stubs

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


def _against_first(values: Mapping[Any, EntityValues], dimension: str,
                   seed: str) -> tuple[list[ScorerView], list[Sensitivity]]:
    """Every scorer's view against the first one's, over the entities all of them scored."""
    values = {scorer: v for scorer, v in values.items() if v}
    if len(values) < 2:
        return [], []
    common = sorted(set.intersection(*(set(v) for v in values.values())))
    views = [scorer_view(scorer, v, common, f"{seed}|{scorer}") for scorer, v in values.items()]
    return views, [compare_views(views[0], view, dimension) for view in views[1:]]


def judge_sensitivity(frame: Any, judges: list[str], columns: list[str], seed: str = "") -> tuple[list[ScorerView], list[Sensitivity]]:
    """Every judge of one run against the first (the primary), over the entities all of them scored."""
    values = {judge: entity_profile_means(frame, judge, RANK_METRIC, columns) for judge in judges}
    return _against_first(values, "judge choice", seed)


def patient_sensitivity(frame: Any, judge: str, patients: list[str], columns: list[str],
                        seed: str = "") -> tuple[list[ScorerView], list[Sensitivity]]:
    """Every patient model of one run against the first, all scored by ``judge``: does the clinicians'
    ordering (and do the paired tests) survive a change of the model that plays the patient?"""
    values = {patient: entity_profile_means(frame[frame["patient"] == patient], judge, RANK_METRIC, columns)
              for patient in patients}
    return _against_first(values, "patient model", f"patient|{seed}")
