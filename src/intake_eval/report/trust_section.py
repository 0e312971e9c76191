"""Report sections that say how far the numbers can be trusted.

- "Simulated patient QC" (metrics/patient_qc.csv + patient_qc_domains.csv, from `intake-eval qc-patient`):
  disclosure recall, leak and invention rates with Wilson 95 % intervals per patient × mode × judge,
  and per domain what the patient misses, leaks and invents.
- "Judge vs human annotation" (metrics/annotation_agreement.csv, from `intake-eval annotate import`):
  judge-vs-human κ next to human-vs-human κ, the baseline a judge should be compared with.
- "Repeated trials: stability" (metrics/trials.csv): between-trial SD, the nested (profiles then
  trials) CI against the naive one, and consistency (caught in every trial vs in at least one).

Listed in ``report.section_list`` under the CSV names; ``summary_markdown`` gives
the same headline figures for report/summary.md. A CSV without the expected columns is left to the
plain-table fallback.
"""

from __future__ import annotations

from typing import Any

from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.report import fmt
from intake_eval.report.population_section import population_html
from intake_eval.report.diagnosis_section import _esc, _for_judge, _html_table, _primary
from intake_eval.report.html import Section, csv_table_html
from intake_eval.report.load import RunData
from intake_eval.report.summary import _table as md_table

QC_TITLE = "Simulated patient QC"
ANNOTATION_TITLE = "Judge vs human annotation"
TRIALS_TITLE = "Repeated trials: stability"
QC_DEFINITIONS = (
    "Before the study the simulated patient answers fixed probes outside any interview. Disclosure recall: specific "
    "questions about a hidden domain that the patient answered by disclosing it (should be ~100%). Leak rate: hidden "
    "domains revealed in reply to open invitations (should be ~0%). Invention rate: questions about domains the profile "
    "does not have that the patient confirmed anyway (should be ~0%). Wilson 95% intervals; probes of one profile are "
    "not independent, so treat the intervals as a lower bound on the uncertainty.")
ANNOTATION_DEFINITIONS = (
    "Cohen's κ on the same annotation items (stratified sample of judged units). Human vs human κ is the ceiling a "
    "judge can be expected to reach: a judge–human κ close to it means the judge labels about as well as a second "
    "annotator. 95% CIs from resampling items.")
TRIALS_DEFINITIONS = (
    "Each profile was interviewed several times (trials). Between-trial SD: the pooled within-profile SD of active "
    "coverage; between-profile SD for contrast. Nested CI: cluster bootstrap over profiles, then trials within profile: "
    "the same interval as the headline's (one interval for one mean); the naive CI treats every conversation as independent and is too narrow when trials correlate. Consistency: of the "
    "(profile, hidden domain) slots caught in at least one trial, the share caught in every trial.")
QC_METRICS = ("disclosure_recall", "leak_rate", "invention_rate")
_QC_NEEDS = ("patient", "patient_mode", "judge", "metric", "successes", "n", "rate", "ci_low", "ci_high")
_ANNOTATION_NEEDS = ("comparison", "rater_a", "rater_b", "label", "n", "kappa", "kappa_ci_low", "kappa_ci_high")
_TRIALS_NEEDS = ("clinician", "condition", "patient_mode", "between_trial_sd", "ci_low", "ci_high", "naive_ci_low",
                 "naive_ci_high", "caught_any", "caught_all", "consistency")


def _table(data: RunData, name: str, needs: tuple[str, ...]):
    table = data.tables.get(name)
    if table is None or not len(table) or any(c not in table.columns for c in needs):
        return None
    return table


def _plain(data: RunData, name: str, title: str, section_id: str) -> Section | None:
    """A table without the expected columns (an older CSV), shown as it is."""
    table = data.tables.get(name)
    if table is None or not len(table):
        return None
    return Section(section_id, title, f"<p class='lede'>From <code>metrics/{name}.csv</code>.</p>" + csv_table_html(table))


def _rate(row: Any) -> str:
    """'92.0% [85.1–96.0] (46/50)'."""
    if fmt.missing(row.get("rate")):
        return fmt.DASH
    return f"{fmt.pct(row['rate'])} {fmt.ci(row['ci_low'], row['ci_high'])} ({fmt.count(row['successes'])}/{fmt.count(row['n'])})"


def qc_rows(table) -> list[list[str]]:
    out = []
    table = _with_style(table)
    keys = ["patient", "patient_mode", "patient_style", "judge"]
    for key, group in table.groupby(keys, sort=True):
        by_metric = {r["metric"]: r for _, r in group.iterrows()}
        first = group.iloc[0]
        profiles = fmt.count(first["profiles"]) if "profiles" in group.columns else fmt.DASH
        errors = fmt.count(group["errors"].sum()) if "errors" in group.columns else fmt.DASH
        out.append([_who(key[0], key[1], key[2]), str(key[3])]
                   + [_rate(by_metric[m]) if m in by_metric else fmt.DASH for m in QC_METRICS] + [profiles, errors])
    return out


def _with_style(table):
    """A QC table written before behaviour styles is all forthcoming."""
    if "patient_style" in table.columns:
        return table.assign(patient_style=table["patient_style"].fillna(DEFAULT_STYLE))
    return table.assign(patient_style=DEFAULT_STYLE)


def _who(patient: Any, mode: Any, style: Any) -> str:
    """'gpt-4o · prompted', with the style when it is not the default ('… · guarded')."""
    return f"{patient} · {mode}" + ("" if style == DEFAULT_STYLE else f" · {style}")


QC_HEADER = ["Patient · mode · style", "Judge", "Disclosure recall [95% CI] (k/n)", "Leak rate [95% CI] (k/n)",
             "Invention rate [95% CI] (k/n)", "Profiles", "Failed probes"]


def _share(k: int, n: int) -> str:
    return f"{fmt.pct(k / n, 0)} ({k}/{n})" if n else fmt.DASH


def qc_domain_rows(table) -> list[list[str]]:
    """Per domain: missed (direct probes not disclosed), leaked, invented — worst first."""
    cells: dict[tuple, dict[str, Any]] = {}
    for _, r in _with_style(table).iterrows():
        who = _who(r["patient"], r["patient_mode"], r["patient_style"])
        cells.setdefault((who, str(r["judge"]), str(r["domain"])), {})[r["metric"]] = r
    rows = []
    for (who, judge, domain), metrics in cells.items():
        recall, leak, invent = (metrics.get(m) for m in QC_METRICS)
        missed = (int(recall["n"]) - int(recall["successes"]), int(recall["n"])) if recall is not None else None
        badness = sum(k / n for k, n in [missed] if n) if missed else 0.0
        badness += sum(float(x["rate"]) for x in (leak, invent) if x is not None and not fmt.missing(x["rate"]))
        rows.append((-badness, domain, [domain, who, judge,
                                        _share(*missed) if missed else fmt.DASH,
                                        _share(int(leak["successes"]), int(leak["n"])) if leak is not None else fmt.DASH,
                                        _share(int(invent["successes"]), int(invent["n"])) if invent is not None else fmt.DASH]))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


QC_DOMAIN_HEADER = ["Domain", "Patient · mode · style", "Judge", "Missed when asked", "Leaked unasked", "Invented (absent)"]


def qc_section(data: RunData) -> Section | None:
    table = _table(data, "patient_qc", _QC_NEEDS)
    if table is None:
        plain = _plain(data, "patient_qc", QC_TITLE, "patient-qc")
        spoken = population_html(data)
        if plain is None and spoken:  # no probes, but the run's patients' speech is measured
            return Section("patient-qc", QC_TITLE, spoken)
        return plain
    body = f"<p class='lede'>{QC_DEFINITIONS}</p>" + _html_table(QC_HEADER, qc_rows(table))
    domains = _table(data, "patient_qc_domains", (*_QC_NEEDS, "domain"))
    if domains is not None:
        body += ("<h3>What the patient gets wrong, by domain</h3><p class='lede'>Worst first; from "
                 "<code>metrics/patient_qc_domains.csv</code>.</p>" + _html_table(QC_DOMAIN_HEADER, qc_domain_rows(domains)))
    body += population_html(data)
    return Section("patient-qc", QC_TITLE, body)


def _kappa(row: Any) -> str:
    if fmt.missing(row.get("kappa")):
        return f"{fmt.DASH} (n={fmt.count(row['n'])})"
    low, high = row.get("kappa_ci_low"), row.get("kappa_ci_high")
    interval = f" [{fmt.kappa(low)}–{fmt.kappa(high)}]" if not fmt.missing(low) and not fmt.missing(high) else ""
    return f"{fmt.kappa(row['kappa'])}{interval} (n={fmt.count(row['n'])})"


def annotation_rows(table) -> list[list[str]]:
    """Per label: every judge–human pair next to every human–human pair."""
    out = []
    for label in dict.fromkeys(table["label"]):
        rows = table[table["label"] == label]
        judge = [f"{r['rater_a']} vs {r['rater_b']}: {_kappa(r)}" for _, r in rows.iterrows() if r["comparison"] == "judge_vs_human"]
        human = [f"{r['rater_a']} vs {r['rater_b']}: {_kappa(r)}" for _, r in rows.iterrows() if r["comparison"] == "human_vs_human"]
        out.append([str(label).replace("_", " "), "; ".join(judge) or fmt.DASH,
                    "; ".join(human) or "– (one annotator: no baseline)"])
    return out


ANNOTATION_HEADER = ["Label", "Judge vs human κ [95% CI]", "Human vs human κ [95% CI] (baseline)"]


def annotation_section(data: RunData) -> Section | None:
    table = _table(data, "annotation_agreement", _ANNOTATION_NEEDS)
    if table is None:
        return _plain(data, "annotation_agreement", ANNOTATION_TITLE, "annotation")
    body = f"<p class='lede'>{ANNOTATION_DEFINITIONS}</p>" + _html_table(ANNOTATION_HEADER, annotation_rows(table))
    return Section("annotation", ANNOTATION_TITLE, body)


def trials_rows(table) -> list[list[str]]:
    out = []
    for _, r in table.iterrows():
        out.append([f"{r['clinician']} · {r['condition']} · {r['patient_mode']}", fmt.count(r.get("profiles")),
                    fmt.count(r.get("trials")), fmt.pct(r.get("mean_active_coverage")),
                    fmt.points(r["between_trial_sd"]).lstrip("+"), fmt.points(r.get("between_profile_sd")).lstrip("+"),
                    fmt.ci(r["ci_low"], r["ci_high"]), fmt.ci(r["naive_ci_low"], r["naive_ci_high"]),
                    f"{fmt.count(r['caught_all'])} / {fmt.count(r['caught_any'])}", fmt.pct(r["consistency"])])
    return out


TRIALS_HEADER = ["Clinician", "Profiles", "Trials", "Mean coverage", "Between-trial SD", "Between-profile SD",
                 "Nested 95% CI", "Naive 95% CI", "Caught every trial / at least one", "Consistency"]


def trials_section(data: RunData) -> Section | None:
    table = _table(data, "trials", _TRIALS_NEEDS)
    if table is None:
        return _plain(data, "trials", TRIALS_TITLE, "trials")
    judge = _primary(data)
    shown = _for_judge(table, judge)
    shown = shown if len(shown) else table
    intro = f"<p class='lede'>{_esc(TRIALS_DEFINITIONS)}" + (f" Judge: {_esc(judge)}." if judge else "") + "</p>"
    return Section("trials", TRIALS_TITLE, intro + _html_table(TRIALS_HEADER, trials_rows(shown)))


def summary_markdown(data: RunData) -> list[str]:
    """Markdown lines for report/summary.md (empty when the run has none of the three tables)."""

    out: list[str] = []
    qc = _table(data, "patient_qc", _QC_NEEDS)
    if qc is not None:
        out += ["## Simulated patient QC", "", QC_DEFINITIONS, ""] + md_table(QC_HEADER, qc_rows(qc)) + [""]
    annotation = _table(data, "annotation_agreement", _ANNOTATION_NEEDS)
    if annotation is not None:
        out += ["## Judge vs human annotation", "", ANNOTATION_DEFINITIONS, ""]
        out += md_table(ANNOTATION_HEADER, annotation_rows(annotation)) + [""]
    trials = _table(data, "trials", _TRIALS_NEEDS)
    if trials is not None:
        shown = _for_judge(trials, _primary(data))
        out += ["## Repeated trials: stability", "", TRIALS_DEFINITIONS, ""]
        out += md_table(TRIALS_HEADER, trials_rows(shown if len(shown) else trials)) + [""]
    return out
