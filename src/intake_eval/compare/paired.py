"""Run-vs-run paired differences: every headline metric, each later run against the first, on the
profiles both runs interviewed, by each run's primary judge.

The difference is later minus first, per profile the difference of the trial means; its 95 % CI is
stats.paired_difference_ci (profiles resampled, and with trials each run's trials within a drawn
profile: the interval the report uses), its p-values the paired permutation and Wilcoxon tests the
metrics stage uses between clinicians (on trial means). The rows of one pair of runs are one paired
table, hence one family: their p-values are Holm-adjusted together (``*_holm``).
"""

from __future__ import annotations

from typing import Any

from intake_eval.compare.runs import LoadedRun, profile_trials
from intake_eval.metrics import registry
from intake_eval.metrics.stats import add_holm, paired_comparison, paired_difference_ci

PAIRED_COLUMNS = ["run_a", "run_b", "judge_a", "judge_b", "entity", "metric", "n_pairs", "mean_a", "mean_b",
                  "difference", "ci_low", "ci_high", "permutation_p", "wilcoxon_p", "permutation_p_holm",
                  "wilcoxon_p_holm", "ci_method"]


def _means(trials: dict[str, list[float]]) -> dict[str, float]:
    return {profile: sum(values) / len(values) for profile, values in trials.items()}


def paired_rows(runs: list[LoadedRun], columns: list[str]) -> list[dict[str, Any]]:
    first, rows = runs[0], []
    for other in runs[1:]:
        judge_a, judge_b = first.judges[0], other.judges[0]
        for metric in registry.compared_metrics():
            trials_a = profile_trials(first, judge_a, metric, columns)
            trials_b = profile_trials(other, judge_b, metric, columns)
            for entity in sorted(trials_a.keys() & trials_b.keys()):
                a, b = _means(trials_a[entity]), _means(trials_b[entity])
                seed = f"compare|{first.name}|{other.name}|{entity}|{metric}"
                test = paired_comparison(b, a, seed=seed)
                if not test.n_pairs:
                    continue
                interval = paired_difference_ci(trials_b[entity], trials_a[entity], seed=seed)
                rows.append({"run_a": first.name, "run_b": other.name, "judge_a": judge_a, "judge_b": judge_b,
                             "entity": entity, "metric": metric, "n_pairs": test.n_pairs, "mean_a": test.mean_b,
                             "mean_b": test.mean_a, "difference": test.mean_difference, "ci_low": interval.ci_low,
                             "ci_high": interval.ci_high, "permutation_p": test.permutation_p,
                             "wilcoxon_p": test.wilcoxon_p, "ci_method": interval.method})
    add_holm(rows, ("permutation_p", "wilcoxon_p"), family=("run_a", "run_b"))
    return rows
