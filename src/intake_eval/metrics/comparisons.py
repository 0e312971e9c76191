"""metrics/comparisons.csv: paired tests between every two clinicians of one judge, from the per-conversation
rows the metrics pass spilled (metrics/collect.py), one (condition, patient mode) at a time."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable
from typing import Any

from intake_eval.metrics.collect import Collected
from intake_eval.metrics.columnar import sorted_rows
from intake_eval.metrics.stats import add_holm, paired_comparison, paired_difference_ci


class _ScopeValues:
    """One (condition, patient mode)'s scored values, metric → clinician → (profile numbers, values) as
    arrays in conversation order: a few bytes per conversation, not a dict entry and a list per profile."""

    def __init__(self, metrics: list[str]) -> None:
        self.profiles: dict[str, int] = {}
        self.names: list[str] = []
        self.values: dict[str, dict[str, tuple[array, array]]] = {metric: {} for metric in metrics}

    def add(self, metric: str, clinician: str, profile: str, value: float) -> None:
        number = self.profiles.get(profile)
        if number is None:
            number = self.profiles[profile] = len(self.names)
            self.names.append(profile)
        numbers, values = self.values[metric].setdefault(clinician, (array("q"), array("d")))
        numbers.append(number)
        values.append(value)

    def by_profile(self, metric: str, clinician: str) -> dict[str, list[float]]:
        """profile → its values, profiles in the order they first came (as a dict filled row by row)."""
        numbers, values = self.values[metric][clinician]
        out: dict[str, list[float]] = {}
        for number, value in zip(numbers, values):
            out.setdefault(self.names[number], []).append(value)
        return out


def comparisons_rows(collected: Collected, judge: str,
                     metrics: Iterable[str] = ("active_coverage_rate", "bleed_rate")) -> list[dict[str, Any]]:
    """Paired tests between every two clinicians on the profiles both were run on (trials averaged for
    the tests; A − B with its CI from stats.paired_difference_ci, nested with trials). Every test of one
    judge is one family: its p-values are Holm-adjusted together (``*_holm``). Read one (condition,
    patient mode) of the judge at a time."""
    compared = list(metrics)
    out: list[dict[str, Any]] = []
    rows = sorted_rows(collected.conversations, ["condition", "patient_mode", "status", "clinician", "profile_id",
                                                 *compared], ("condition", "patient_mode", "conversation_id"),
                       where={"judge": judge})
    for (condition, mode), members in itertools.groupby(rows, key=lambda row: row[:2]):  # scopes come sorted
        scope = _ScopeValues(compared)
        for row in members:
            if row[2] != "ok":
                continue
            for metric, value in zip(compared, row[5:]):
                if value is not None:
                    scope.add(metric, row[3], row[4], float(value))
        for metric in sorted(compared):
            out += _paired_tests((judge, condition, mode, metric), scope, metric)
    add_holm(out, ("wilcoxon_p", "permutation_p"), family=("judge",))
    return out


def _paired_tests(scope: tuple[str, str, str, str], values: _ScopeValues, metric: str) -> list[dict[str, Any]]:
    """Every two clinicians of one (judge, condition, patient mode, metric), two clinicians' values at a time."""
    out = []
    for a, b in itertools.combinations(sorted(values.values[metric]), 2):
        clinician_a, clinician_b = values.by_profile(metric, a), values.by_profile(metric, b)
        values_a = {p: sum(v) / len(v) for p, v in clinician_a.items()}
        values_b = {p: sum(v) / len(v) for p, v in clinician_b.items()}
        seed = "|".join((*scope, a, b))
        result = paired_comparison(values_a, values_b, seed=seed)
        interval = paired_difference_ci(clinician_a, clinician_b, seed=f"difference|{seed}")
        out.append({"judge": scope[0], "condition": scope[1], "patient_mode": scope[2], "metric": scope[3],
                    "clinician_a": a, "clinician_b": b, **result.__dict__,
                    "difference_ci_low": interval.ci_low, "difference_ci_high": interval.ci_high,
                    "ci_method": interval.method})
    return out
