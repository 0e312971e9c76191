"""Report section "By patient model": when a run has several patient models, how each arm fares with
each (metrics/patient_models.csv: active coverage with its 95% CI, bleed, patient leaks) and whether the
clinicians' ordering survives a change of patient model (metrics/sensitivity.py: each patient model's
ranking against the reference patient model's — the run's first — Kendall's τ, flipped orderings, paired
tests whose conclusion changes, a verdict), per condition × patient mode, for the report's judge.
The headline above pools the patient models with equal weight per patient model (stats.pooled_mean_ci).
"""

from __future__ import annotations

from typing import Any

from intake_eval.metrics.sensitivity import patient_sensitivity
from intake_eval.metrics.stats import POOLED_PATIENT_BOOTSTRAP
from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _for_judge, _html_table, _primary
from intake_eval.report.html import Section
from intake_eval.report.load import RunData
from intake_eval.report.metric_tables import read_columns
from intake_eval.report.sensitivity_section import SENSITIVITY_COLUMNS
from intake_eval.report.summary import _table as md_table

TABLE = "patient_models"
TITLE = "By patient model"
DEFINITIONS = (
    "Each clinician arm with each patient model on the same profiles. The headline pools the patient models "
    f"with equal weight per patient model: 95% CI by {POOLED_PATIENT_BOOTSTRAP}. Below, each patient model's own "
    "mean active coverage (95% CI over its conversations, profiles resampled), mean bleed rate and mean patient "
    "leaks per conversation.")
SENSITIVITY_DEFINITIONS = (
    "Sensitivity to the patient model: each patient model's ranking of the clinicians by mean active coverage "
    "(profiles, trials averaged), compared with the reference patient model's (the run's first): Kendall's τ, the "
    "pairs whose order flips, and the paired tests (permutation test over profiles, p < 0.05 after Holm's "
    "adjustment) whose conclusion changes.")
HEADER = ["Clinician · condition · patient mode", "Patient model", "Active coverage", "95% CI", "n", "Mean bleed",
          "Mean patient leaks"]
SENSITIVITY_HEADER = ["Condition · patient mode", "Patient model", "Ranking by active coverage",
                      "Kendall's τ vs reference", "Verdict"]


def patient_order(data: RunData, patients: set[str]) -> list[str]:
    """The run's patient models, the reference (the run stage's first patient) first, the rest by name."""
    run = (data.manifest.get("stages") or {}).get("run") or {}
    reference = (run.get("config") or {}).get("patient")
    return sorted(patients, key=lambda patient: (patient != reference, patient))


def breakdown_rows(data: RunData) -> list[list[str]]:
    table = _for_judge(data.tables.get(TABLE), _primary(data))
    if table is None or not len(table):
        return []
    rows = []
    for record in table.sort_values(["clinician", "condition", "patient_mode", "patient"]).to_dict("records"):
        rows.append([f"{record['clinician']} · {record['condition']} · {record['patient_mode']}", str(record["patient"]),
                     fmt.pct(record["mean_active_coverage"]),
                     fmt.ci(record["mean_active_coverage_ci_low"], record["mean_active_coverage_ci_high"]),
                     fmt.count(record["n"]), fmt.pct(record["mean_bleed_rate"]),
                     fmt.decimal(record["mean_patient_leak_count"])])
    return rows


def sensitivity_rows(data: RunData) -> list[list[str]]:
    table = read_columns(data.tables, "conversations", SENSITIVITY_COLUMNS)
    judge = _primary(data)
    if table is None or judge is None or not len(table) or "patient" not in table.columns:
        return []
    table = table[(table["status"] == "ok") & (table["judge"] == judge)]
    patients = patient_order(data, {str(p) for p in table["patient"].dropna()})
    if len(patients) < 2:
        return []
    rows: list[list[str]] = []
    for (condition, mode), scope in table.groupby(["condition", "patient_mode"], sort=True):
        views, found = patient_sensitivity(scope, judge, patients, ["clinician"], seed=f"{condition}|{mode}")
        verdicts: dict[Any, Any] = {item.scorer: item for item in found}
        for index, view in enumerate(views):
            item = verdicts.get(view.scorer)
            tau = "reference" if index == 0 else (fmt.DASH if item is None else fmt.decimal(item.tau, signed=True))
            rows.append([f"{condition} · {mode}", str(view.scorer), fmt.ranking(view.scores, view.ranking) or fmt.DASH,
                         tau, "reference patient model" if index == 0 else item.verdict if item else ""])
    return rows


def patient_models_section(data: RunData) -> Section | None:
    breakdown = breakdown_rows(data)
    if not breakdown:
        return None
    body = f"<p class='lede'>{DEFINITIONS}</p>" + _html_table(HEADER, breakdown)
    sensitivity = sensitivity_rows(data)
    if sensitivity:
        body += f"<p class='lede'>{SENSITIVITY_DEFINITIONS}</p>" + _html_table(SENSITIVITY_HEADER, sensitivity)
    return Section("patient-models", TITLE, body)


def summary_markdown(data: RunData) -> list[str]:
    breakdown = breakdown_rows(data)
    if not breakdown:
        return []
    out = ["## By patient model", "", DEFINITIONS, ""] + md_table(HEADER, breakdown) + [""]
    sensitivity = sensitivity_rows(data)
    if sensitivity:
        out += [SENSITIVITY_DEFINITIONS, ""] + md_table(SENSITIVITY_HEADER, sensitivity) + [""]
    return out
