"""Run-vs-run paired differences: every headline metric, each later run against the first, on the
profiles both runs interviewed (trials averaged), by each run's primary judge.

The difference is later minus first; its 95 % CI resamples profiles (metrics/stats.py's bootstrap),
its p-values are the paired permutation and Wilcoxon tests the metrics stage uses between clinicians.
"""

from __future__ import annotations

from typing import Any

from intake_eval.compare.runs import HEADLINE_METRICS, LoadedRun, profile_values
from intake_eval.metrics.stats import bootstrap_mean_ci, paired_comparison

PAIRED_COLUMNS = ["run_a", "run_b", "judge_a", "judge_b", "entity", "metric", "n_pairs", "mean_a", "mean_b",
                  "difference", "ci_low", "ci_high", "permutation_p", "wilcoxon_p"]


def paired_rows(runs: list[LoadedRun], columns: list[str]) -> list[dict[str, Any]]:
    first, rows = runs[0], []
    for other in runs[1:]:
        judge_a, judge_b = first.judges[0], other.judges[0]
        for metric in HEADLINE_METRICS:
            values_a = profile_values(first, judge_a, metric, columns)
            values_b = profile_values(other, judge_b, metric, columns)
            for entity in sorted(values_a.keys() & values_b.keys()):
                a, b = values_a[entity], values_b[entity]
                seed = f"compare|{first.name}|{other.name}|{entity}|{metric}"
                test = paired_comparison(b, a, seed=seed)
                if not test.n_pairs:
                    continue
                shared = sorted(a.keys() & b.keys())
                interval = bootstrap_mean_ci({p: [b[p] - a[p]] for p in shared}, seed=seed)
                rows.append({"run_a": first.name, "run_b": other.name, "judge_a": judge_a, "judge_b": judge_b,
                             "entity": entity, "metric": metric, "n_pairs": test.n_pairs, "mean_a": test.mean_b,
                             "mean_b": test.mean_a, "difference": test.mean_difference, "ci_low": interval.ci_low,
                             "ci_high": interval.ci_high, "permutation_p": test.permutation_p,
                             "wilcoxon_p": test.wilcoxon_p})
    return rows
