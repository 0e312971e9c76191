"""Report section "Judge calibration": active coverage corrected for judge error with human labels
(metrics/calibrated.csv, from `intake-eval annotate import` of a --for-calibration pack).

Listed in ``report.section_list`` under the CSV name; ``summary_markdown`` gives the
same table for report/summary.md.
"""

from __future__ import annotations

from typing import Any

from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _esc, _html_table
from intake_eval.report.html import Section
from intake_eval.report.load import RunData
from intake_eval.report.summary import _table as md_table

CALIBRATED = "calibrated"
TITLE = "Judge calibration: coverage corrected with human labels"
DEFINITIONS = (
    "People labelled every turn of a random sample of conversations per clinician. Judge only: mean active coverage "
    "by the judge's labels over all conversations. Humans only: the labelled conversations alone. Calibrated: "
    "prediction-powered inference (the judge on every conversation plus the mean human-minus-judge difference on "
    "the labelled ones), an estimate of what people would rate, valid whatever the judge's errors. Judge bias: judge "
    "only minus calibrated. Normal 95% intervals over conversations; phenotype rows only where at least 10 "
    "conversations are labelled.")
HEADER = ["Clinician · condition · mode", "Phenotype", "Labelled / judged", "Judge only [95% CI]",
          "Humans only [95% CI]", "Calibrated [95% CI]", "Judge bias"]
_NEEDS = ("scope", "judge", "clinician", "condition", "patient_mode", "phenotype", "n_conversations", "n_labelled",
          "judge_mean", "judge_ci_low", "judge_ci_high", "human_mean", "human_ci_low", "human_ci_high",
          "calibrated_mean", "calibrated_ci_low", "calibrated_ci_high", "judge_bias")


def read_calibrated(data: RunData):
    import pandas as pd  # type: ignore[import-untyped]  # pandas-stubs is not installed

    path = data.paths.metrics(CALIBRATED)
    if not path.exists():
        return None
    try:
        table = pd.read_csv(path)
    except (ValueError, OSError):
        return None
    if not len(table) or any(column not in table.columns for column in _NEEDS):
        return None
    return table


def _estimate(row: Any, prefix: str) -> str:
    if fmt.missing(row[f"{prefix}_mean"]):
        return fmt.DASH
    return f"{fmt.pct(row[f'{prefix}_mean'])} {fmt.ci(row[f'{prefix}_ci_low'], row[f'{prefix}_ci_high'])}"


def calibrated_rows(table) -> list[list[str]]:
    out = []
    for _, row in table.iterrows():
        phenotype = row["phenotype"] if isinstance(row["phenotype"], str) and row["phenotype"] else "all"
        out.append([f"{row['clinician']} · {row['condition']} · {row['patient_mode']}", phenotype,
                    f"{fmt.count(row['n_labelled'])} / {fmt.count(row['n_conversations'])}",
                    _estimate(row, "judge"), _estimate(row, "human"), _estimate(row, "calibrated"),
                    fmt.points(row["judge_bias"])])
    return out


def _judges(table) -> str:
    return ", ".join(sorted({str(j) for j in table["judge"]}))


def calibration_section(data: RunData) -> Section | None:
    table = read_calibrated(data)
    if table is None:
        return None
    intro = f"<p class='lede'>{_esc(DEFINITIONS)} Judge: {_esc(_judges(table))}.</p>"
    return Section("calibration", TITLE, intro + _html_table(HEADER, calibrated_rows(table)))


def summary_markdown(data: RunData) -> list[str]:
    table = read_calibrated(data)
    if table is None:
        return []
    return [f"## {TITLE}", "", f"{DEFINITIONS} Judge: {_judges(table)}.", ""] + md_table(HEADER, calibrated_rows(table)) + [""]
