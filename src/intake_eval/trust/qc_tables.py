"""The patient QC's metrics tables: metrics/patient_qc.csv (the rates), metrics/patient_qc_domains.csv (per
domain) and metrics/patient_qc_population.csv (how the patient spoke).

Each QC run replaces only its own rows — one (patient, mode, judge, style); the population table, which no
judge reads, one (patient, mode, style) — and keeps every other patient's, so several patients and styles
sit side by side. Rows written before behaviour styles are forthcoming.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

from intake_eval.core.numbers import csv_cell
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.records import PatientProbe, Profile
from intake_eval.core.store import RunPaths
from intake_eval.metrics.patient_language import POPULATION_COLUMNS
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import wilson_interval
from intake_eval.trust.qc_result import METRICS, QCResult


QC_METRICS = "patient_qc"
QC_DOMAIN_METRICS = "patient_qc_domains"
QC_DOMAIN_COLUMNS = ["patient", "patient_model", "patient_mode", "judge", "metric", "domain", "successes", "n", "rate",
                     "ci_low", "ci_high", "patient_style"]
QC_COLUMNS = ["patient", "patient_model", "patient_mode", "judge", "metric", "successes", "n", "rate", "ci_low",
              "ci_high", "profiles", "errors", "patient_style"]
QC_POPULATION_METRICS = "patient_qc_population"


def domain_rows(records: list[PatientProbe], hidden: dict[str, list[str]], result: QCResult) -> list[dict[str, Any]]:
    """Per domain: direct probes disclosed, open probes that leaked it (of those where it was hidden),
    absent probes that invented it — which domains the patient gets wrong."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        if record.status != "ok" or record.outcome is None:
            continue
        if record.kind == "open":
            for domain in hidden.get(record.profile_id, []):
                tally = counts[(METRICS["open"], domain)]
                tally[0] += int(domain in record.disclosed)
                tally[1] += 1
        else:
            tally = counts[(METRICS[record.kind], record.target)]
            tally[0] += int(record.outcome)
            tally[1] += 1
    rows = []
    for (metric, domain), (k, n) in sorted(counts.items()):
        low, high = wilson_interval(k, n)
        rows.append({"patient": result.patient, "patient_model": result.patient_model, "patient_mode": result.mode,
                     "judge": result.judge, "metric": metric, "domain": domain, "successes": k, "n": n,
                     "rate": k / n if n else None, "ci_low": low, "ci_high": high, "patient_style": result.style})
    return rows


def write_qc_table(paths: RunPaths, name: str, columns: list[str], result: QCResult,
                   rows: list[dict[str, Any]]) -> Path:
    """Replace this (patient, mode, judge, style)'s rows in metrics/<name>.csv, keeping the other patients'
    (a table without a judge column: this (patient, mode, style)'s). Rows written before styles are forthcoming."""
    target = paths.metrics(name)
    judged = "judge" in columns

    def key(row: dict[str, Any]) -> tuple:
        return (row.get("patient"), row.get("patient_mode"), row.get("judge") if judged else "",
                row.get("patient_style") or DEFAULT_STYLE)

    mine = (result.patient, result.mode, result.judge if judged else "", result.style)
    kept = []
    if target.exists():
        with open(target, newline="", encoding="utf-8") as handle:
            kept = [row for row in csv.DictReader(handle) if key(row) != mine]
    merged = kept + [{k: csv_cell(v) for k, v in row.items()} for row in rows]
    merged.sort(key=lambda r: (*(str(part) for part in key(r)), r.get("metric", ""), r.get("domain", "")))
    return write_csv(target, columns, merged)


def write_qc_metrics(paths: RunPaths, result: QCResult, records: list[PatientProbe] | None = None,
                     profiles: list[Profile] | None = None) -> Path:
    """metrics/patient_qc.csv (and, given the records, metrics/patient_qc_domains.csv)."""
    if records is not None and profiles is not None:
        hidden = {p.profile_id: p.hidden_domains for p in profiles}
        write_qc_table(paths, QC_DOMAIN_METRICS, QC_DOMAIN_COLUMNS, result, domain_rows(records, hidden, result))
    if result.population:
        write_qc_table(paths, QC_POPULATION_METRICS, POPULATION_COLUMNS, result, [result.population])
    return write_qc_table(paths, QC_METRICS, QC_COLUMNS, result, result.rows())
