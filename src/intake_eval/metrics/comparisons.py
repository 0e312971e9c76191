"""metrics/comparisons.csv: paired tests between every two clinicians of one judge, from the per-conversation
rows the metrics pass spilled (metrics/collect.py), one (condition, patient mode) at a time."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from intake_eval.metrics.collect import Collected
from intake_eval.metrics.columnar import sorted_rows
from intake_eval.metrics.stats import add_holm, paired_comparison, paired_difference_ci


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
        per_metric: dict[str, dict[str, dict[str, list[float]]]] = {metric: defaultdict(dict) for metric in compared}
        for row in members:
            if row[2] != "ok":
                continue
            for metric, value in zip(compared, row[5:]):
                if value is not None:
                    per_metric[metric][row[3]].setdefault(row[4], []).append(float(value))
        for metric in sorted(compared):
            out += _paired_tests((judge, condition, mode, metric), per_metric[metric])
    add_holm(out, ("wilcoxon_p", "permutation_p"), family=("judge",))
    return out


def _paired_tests(scope: tuple[str, str, str, str], clinicians: dict[str, dict[str, list[float]]]
                  ) -> list[dict[str, Any]]:
    """Every two clinicians of one (judge, condition, patient mode, metric): clinician → profile → values."""
    out = []
    for a, b in itertools.combinations(sorted(clinicians), 2):
        values_a = {p: sum(v) / len(v) for p, v in clinicians[a].items()}
        values_b = {p: sum(v) / len(v) for p, v in clinicians[b].items()}
        seed = "|".join((*scope, a, b))
        result = paired_comparison(values_a, values_b, seed=seed)
        interval = paired_difference_ci(clinicians[a], clinicians[b], seed=f"difference|{seed}")
        out.append({"judge": scope[0], "condition": scope[1], "patient_mode": scope[2], "metric": scope[3],
                    "clinician_a": a, "clinician_b": b, **result.__dict__,
                    "difference_ci_low": interval.ci_low, "difference_ci_high": interval.ci_high,
                    "ci_method": interval.method})
    return out
