"""The report's optional sections, in page order: one explicit list.

Each entry names the metrics CSV a section presents and the function that renders it from the run's
data (returning None when the run has nothing for it), or None: the CSV shown as a plain table. A
metrics table the report reads as optional (``load.OPTIONAL_TABLES``) with no entry here is still shown
as a plain table, after the listed ones, so nothing computed is ever hidden. ``SUMMARY_MARKDOWN``: the
sections' lines for report/summary.md, in order.
"""

from __future__ import annotations

from collections.abc import Callable

from intake_eval.report import (
    analyses_section,
    calibration_section,
    diagnosis_section,
    forks_section,
    methods_section,
    patient_models_section,
    sensitivity_section,
    styles_section,
    trust_section,
)
from intake_eval.report.html import Section, csv_table_html
from intake_eval.report.load import OPTIONAL_TABLES, RunData

SectionRenderer = Callable[[RunData], Section | None]


def _inside_patient_qc(data: RunData) -> Section | None:
    """patient_qc_domains and the population tables are shown inside the patient QC section, not on their own."""
    return None


def _shown_elsewhere(data: RunData) -> Section | None:
    """style_pairs is shown inside the patient behaviour styles section."""
    return None


SECTIONS: tuple[tuple[str, SectionRenderer | None], ...] = (
    ("answers", None),
    ("safety", diagnosis_section.safety_section),
    ("diagnosis", diagnosis_section.diagnosis_section),
    ("capacity_gap", forks_section.render),
    ("styles", styles_section.styles_section),
    ("style_pairs", _shown_elsewhere),
    ("trials", trust_section.trials_section),
    ("patient_qc", trust_section.qc_section),
    ("patient_qc_domains", _inside_patient_qc),
    ("patient_qc_population", _inside_patient_qc),
    ("patient_population", _inside_patient_qc),
    ("annotation_agreement", trust_section.annotation_section),
    ("probe_curves", analyses_section.probe_section),
    ("cost", analyses_section.cost_section),
    (calibration_section.CALIBRATED, calibration_section.calibration_section),
    ("methods", methods_section.methods_section),
    ("judge_sensitivity", sensitivity_section.sensitivity_section),
    (patient_models_section.TABLE, patient_models_section.patient_models_section),
)
PLAIN_TITLES = {"answers": "Answers refused, empty or cut at the token cap"}
SUMMARY_MARKDOWN: tuple[Callable[[RunData], list[str]], ...] = (
    diagnosis_section.summary_markdown,
    styles_section.summary_markdown,
    trust_section.summary_markdown,
    analyses_section.summary_markdown,
    calibration_section.summary_markdown,
    methods_section.summary_markdown,
    patient_models_section.summary_markdown,
)


def _plain(name: str, data: RunData) -> Section | None:
    table = data.tables.get(name)
    if table is None or not len(table):
        return None
    title = PLAIN_TITLES.get(name, name.replace("_", " ").capitalize())
    intro = f"<p class='lede'>From <code>metrics/{name}.csv</code>.</p>"
    return Section(f"extra-{name}", title, intro + csv_table_html(table))


def optional_sections(data: RunData) -> list[Section]:
    """Every listed section the run has something for, in order, then unlisted optional tables as plain tables."""
    listed = [name for name, _ in SECTIONS]
    entries = [*SECTIONS, *((name, None) for name in OPTIONAL_TABLES if name not in listed)]
    sections = []
    for name, render in entries:
        section = render(data) if render is not None else _plain(name, data)
        if section is not None:
            sections.append(section)
    return sections


def summary_markdown(data: RunData) -> list[str]:
    return [line for lines in SUMMARY_MARKDOWN for line in lines(data)]
