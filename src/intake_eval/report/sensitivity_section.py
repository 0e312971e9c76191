"""Report section "Sensitivity to judge choice": when a run has several judges, the clinician ranking
by each, Kendall's τ and the flipped orderings against the primary judge, the paired-test conclusions
that change, and a one-line verdict per judge (metrics/sensitivity.py; `intake-eval compare` does the
same across run folders). Computed from metrics/conversations.csv, per condition × patient mode.
"""

from __future__ import annotations

from typing import Any

from intake_eval.metrics.sensitivity import judge_sensitivity
from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _html_table
from intake_eval.report.html import Section
from intake_eval.report.load import RunData, order_judges
from intake_eval.report.metric_tables import read_columns

TITLE = "Sensitivity to judge choice"
DEFINITIONS = (
    "Each judge's ranking of the clinicians by mean active coverage (profiles, trials averaged), compared with the "
    "primary judge's: Kendall's τ between the two rankings, the pairs of clinicians whose order flips, and the paired "
    "tests (permutation test over profiles, p < 0.05 after Holm's adjustment over each judge's pairs) whose conclusion "
    "changes. Tied clinicians share a rank (=k).")
# What the rankings read of metrics/conversations (a long table: only these columns are loaded).
SENSITIVITY_COLUMNS = ("judge", "status", "condition", "patient_mode", "clinician", "profile_id",
                       "active_coverage_rate", "patient")
HEADER = ["Condition · patient mode", "Judge", "Ranking by active coverage", "Kendall's τ vs primary", "Verdict"]


def sensitivity_rows(data: RunData) -> list[list[str]]:
    # a long table: its text columns as sorted categories, so each copy below costs a code per row
    table = read_columns(data.tables, "conversations", SENSITIVITY_COLUMNS, text_as_categories=True)
    if table is None or not len(table) or "judge" not in table.columns:
        return []
    table = table[table["status"] == "ok"]
    # judge → its rows, as a sized stand-in (order_judges ranks undeclared judges by how much they judged)
    judged = {str(j): range(int(n)) for j, n in table.groupby("judge", observed=True).size().items()}
    if len(judged) < 2:
        return []
    judges = order_judges(judged, data.manifest, data.primary_judge)
    rows: list[list[str]] = []
    for (condition, mode), scope in table.groupby(["condition", "patient_mode"], sort=True, observed=True):
        views, found = judge_sensitivity(scope, judges, ["clinician"], seed=f"{condition}|{mode}")
        verdicts: dict[Any, Any] = {item.scorer: item for item in found}
        for index, view in enumerate(views):
            item = verdicts.get(view.scorer)
            tau = "primary" if index == 0 else (fmt.DASH if item is None else fmt.decimal(item.tau, signed=True))
            rows.append([f"{condition} · {mode}", str(view.scorer), fmt.ranking(view.scores, view.ranking) or fmt.DASH, tau,
                         "primary judge" if index == 0 else item.verdict if item else ""])
    return rows


def sensitivity_section(data: RunData) -> Section | None:
    rows = sensitivity_rows(data)
    if not rows:
        return None
    return Section("judge-sensitivity", TITLE, f"<p class='lede'>{DEFINITIONS}</p>" + _html_table(HEADER, rows))
