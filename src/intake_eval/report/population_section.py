"""How the simulated patients spoke, for the report's patient QC section.

metrics/patient_qc_population.csv (the QC probes' replies) and metrics/patient_population.csv (every
reply in the run's intakes), per patient model, mode and style, against the targets of
metrics/patient_language.py, each stated with its reason and source.
"""

from __future__ import annotations

from typing import Any

from intake_eval.metrics.patient_language import TARGETS
from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _esc, _html_table
from intake_eval.report.load import RunData

POPULATION_TABLES = (("patient_qc_population", "the QC probes' replies"),
                     ("patient_population", "every patient reply in this run's intakes"))
HEADER = ["Patient · mode · style", "Replies", "Words per reply: mean (sd) · median", "Style target (words)",
          "On target", "MATTR", "Early resolution", "Repeated phrasing", "Targets missed"]
INTRO = (
    "How the simulated patient speaks, beside whether it obeys the disclosure rule. PSI-Bench (arXiv 2604.25840) "
    "finds LLM-simulated depression patients answer too long and too lexically diverse, vary too little and resolve "
    "their distress too fast; PatientSim (NeurIPS 2025) varies personas along recall and language axes. Words per "
    "reply are compared with each behaviour style's declared range; MATTR is the moving-average type-token ratio "
    "(50-word window) of everything one profile's patient said; early resolution is the share of replies before the "
    "last third of an intake that thank the clinician or declare the problem solved; repeated phrasing is the share "
    "of word 5-grams used by three or more different profiles.")


def _value(row: Any, column: str, share: bool = False) -> str:
    value = row.get(column)
    if fmt.missing(value):
        return fmt.DASH
    return fmt.pct(float(value)) if share else f"{float(value):.2f}"


def _rows(table: Any) -> list[list[str]]:
    out = []
    for _, row in table.iterrows():
        words = f"{_value(row, 'words_mean')} ({_value(row, 'words_sd')}) · {_value(row, 'words_median')}"
        out.append([f"{row['patient']} · {row['patient_mode']} · {row['patient_style']}", fmt.count(row["replies"]),
                    words, f"{fmt.count(row['words_target_low'])}–{fmt.count(row['words_target_high'])}",
                    _value(row, "length_on_target_share", True), _value(row, "mattr"),
                    _value(row, "early_resolution_share", True), _value(row, "repeated_phrasing_share", True),
                    str(row["targets_missed"]) if not fmt.missing(row.get("targets_missed")) else "none"])
    return out


def _targets() -> str:
    items = []
    for target in TARGETS:
        bound = f"at least {target.low:g}" if target.low is not None else f"at most {target.high:g}"
        items.append(f"<li><b>{_esc(target.measure.replace('_', ' '))}</b>: {bound} — {_esc(target.why)}.</li>")
    return "<ul class='lede'>" + "".join(items) + "</ul>"


def population_html(data: RunData) -> str:
    """The population tables the run has, with the targets; empty when it has none."""
    parts = []
    for name, source in POPULATION_TABLES:
        table = data.tables.get(name)
        if table is None or not len(table):
            continue
        parts.append(f"<p class='lede'>From <code>metrics/{name}.csv</code>: {source}.</p>" + _html_table(HEADER, _rows(table)))
    if not parts:
        return ""
    return f"<h3>How the patient spoke</h3><p class='lede'>{_esc(INTRO)}</p>{_targets()}" + "".join(parts)
