"""metrics/patient_models.csv: each arm's figures per patient model, when a run has several patient models.

The headline (clinicians.csv, the report's table) pools the patient models with equal weight per
patient model (``registry.arm_mean_ci`` → ``stats.pooled_mean_ci``); this table is the breakdown beside
it: per judge, clinician, condition, patient mode and patient model, the mean active coverage with its
interval (``stats.mean_ci`` over that model's conversations: profiles, nested with trials), the mean bleed
rate and the mean count of patient leaks. A run with one patient model has no such table (no rows).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from intake_eval.metrics.stats import mean_ci, mean_or_none

ARM = ("judge", "clinician", "condition", "patient_mode")
RANK_METRIC = "active_coverage_rate"
COVERAGE = "mean_active_coverage"  # clinicians.csv's name for the same figure
PATIENT_MODEL_COLUMNS = [*ARM, "patient", COVERAGE, f"{COVERAGE}_ci_low", f"{COVERAGE}_ci_high", "n", "n_profiles",
                         "ci_method", "mean_bleed_rate", "mean_patient_leak_count"]


def several_patient_models(rows: list[dict[str, Any]]) -> bool:
    """Do these scored conversation rows come from more than one patient model?"""
    return len({row.get("patient", "") for row in rows}) > 1


def patient_model_rows(rows: list[dict[str, Any]], several: bool | None = None) -> list[dict[str, Any]]:
    """One row per arm and patient model over scored conversation rows (metrics/conversations.csv's);
    ``several``: whether the run has several patient models, when these rows are only part of it."""
    if not (several if several is not None else several_patient_models(rows)):
        return []
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(*(row[name] for name in ARM), row["patient"])].append(row)
    out = []
    for key in sorted(groups, key=lambda k: tuple(map(str, k))):
        members = groups[key]
        by_profile: dict[str, list[float]] = defaultdict(list)
        for row in members:
            if row.get(RANK_METRIC) is not None:
                by_profile[str(row["profile_id"])].append(float(row[RANK_METRIC]))
        estimate = mean_ci(by_profile, seed="patient_models|" + "|".join(map(str, key)))
        out.append({**dict(zip((*ARM, "patient"), key)), COVERAGE: estimate.mean,
                    f"{COVERAGE}_ci_low": estimate.ci_low, f"{COVERAGE}_ci_high": estimate.ci_high,
                    "n": estimate.n, "n_profiles": estimate.n_groups, "ci_method": estimate.method,
                    "mean_bleed_rate": mean_or_none([row.get("bleed_rate") for row in members]),
                    "mean_patient_leak_count": mean_or_none([row.get("patient_leak_count") for row in members])})
    return out
