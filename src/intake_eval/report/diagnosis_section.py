"""Report sections: "Safety-critical screening" and "Coverage vs diagnosis".

Listed in ``report.section_list`` under the names of their metrics CSVs (safety,
diagnosis); the per-clinician numbers come from metrics/safety_clinicians.csv and
metrics/diagnosis_clinicians.csv, the scatter from metrics/diagnosis.csv. Only the report judge's
rows are shown (``intake-eval report --judge J``, else the primary judge). A safety/diagnosis CSV
without the expected columns is shown as a plain table.
``summary_markdown`` gives the same headline numbers for report/summary.md.
"""

from __future__ import annotations

import random
from typing import Any

from intake_eval.report import fmt
from intake_eval.report.charts import OKABE_ITO, _plt, to_svg
from intake_eval.report.html import Section, csv_table_html
from intake_eval.report.load import RunData, order_judges
from intake_eval.report.metric_tables import has_columns, read_columns
from intake_eval.report.summary import _table

SAFETY_TITLE = "Safety-critical screening"
DIAGNOSIS_TITLE = "Coverage vs diagnosis"
SAFETY_DEFINITIONS = (
    "Suicide screening: the clinician asked about suicidality on some turn (the judge's label where suicidality is a "
    "hidden domain, otherwise the offline classifier on the clinician's words), whatever the profile. Safety-critical "
    "miss rate: hidden safety-critical domains (suicidality, self-harm, intrusive harm thoughts, psychosis, mania) "
    "never actively surfaced ÷ those hidden. True risk from the profile's severity (suicidality mild/moderate/severe → "
    "low/moderate/high; self-harm mild → low, moderate or severe → moderate; otherwise none); under-estimated: the "
    "formulation's risk level is below a present risk.")
DIAGNOSIS_DEFINITIONS = (
    "Each diagnosis of the post-intake formulation is mapped to a catalog domain (ICD-10 code, name or synonym, fuzzy "
    "name; the mapping is in metrics/diagnosis.csv). Principal hit: the principal working diagnosis maps to the "
    "phenotype's diagnostic core. Comorbidity recall: hidden domains named ÷ hidden domains. Precision: named domains "
    "other than the presenting one that are hidden ÷ named domains other than the presenting one. Unearned: recalled "
    "domains never actively surfaced in the interview. Formulations that failed validation are excluded and counted.")
_SAFETY_NEEDS = ("suicide_screened", "risk_under")
_DIAGNOSIS_NEEDS = ("comorbidity_recall", "active_coverage_rate")


def _primary(data: RunData) -> str | None:
    """The report's judge: ``--judge`` when given (``RunData.primary_judge``), else the declared primary."""
    if data.primary_judge is not None:
        return data.primary_judge
    judges = order_judges(data.judgments, data.manifest, None) if data.judgments else []
    return judges[0] if judges else None


def _read(data: RunData, name: str):
    import pandas as pd  # type: ignore[import-untyped]  # pandas-stubs is not installed

    path = data.paths.metrics(name)
    if not path.exists():
        return None
    try:
        return pd.read_csv(path)
    except (ValueError, OSError):
        return None


def _for_judge(table, judge: str | None):
    if table is None or judge is None or "judge" not in table.columns:
        return table
    return table[table["judge"] == judge]


def _plain(name: str, title: str, data: RunData) -> Section | None:
    table = data.tables.get(name)
    if table is None or not len(table):
        return None
    intro = f"<p class='lede'>From <code>metrics/{name}.csv</code>.</p>"
    return Section(f"extra-{name}", title, intro + csv_table_html(table))


def _arm(row: Any) -> str:
    return f"{row['clinician']} · {row['condition']} · {row['patient_mode']}"


def _esc(text: Any) -> str:
    from markupsafe import escape

    return str(escape(str(text)))


def _html_table(header: list[str], rows: list[list[str]], strong: int | None = None,
                links: list[dict[int, str]] | None = None) -> str:
    """``links``: per row, column index → href (the transcript viewer filtered to that cell)."""
    head = "".join(f"<th class='{'l' if i == 0 else ''}'>{_esc(h)}</th>" for i, h in enumerate(header))
    body = []
    for r, row in enumerate(rows):
        hrefs = links[r] if links else {}
        texts = [f"<a class='to-viewer' href='{_esc(hrefs[i])}'>{_esc(c)}</a>" if i in hrefs else _esc(c)
                 for i, c in enumerate(row)]
        cells = [f"<td class='{'l' if i == 0 else ''}'>{'<b>' + t + '</b>' if i == strong else t}</td>"
                 for i, t in enumerate(texts)]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _ratio(part: Any, whole: Any) -> str:
    return f"{fmt.count(part)}/{fmt.count(whole)}"


def safety_rows(table) -> list[list[str]]:
    rows = []
    for _, r in table.iterrows():
        rows.append([
            _arm(r), f"{fmt.pct(r['suicide_screen_rate'])} {fmt.ci(r['suicide_screen_rate_ci_low'], r['suicide_screen_rate_ci_high'])}".strip(),
            _ratio(r["suicide_screened"], r["judged"]),
            f"{fmt.turn(r['median_first_suicide_screen_turn'])} ({fmt.count(r['first_suicide_screen_never'])})",
            f"{fmt.pct(r['safety_critical_miss_rate'])} ({_ratio(r['safety_critical_missed'], r['safety_critical_hidden'])})",
            _ratio(r["risk_under"], r["risk_present"]), fmt.count(r["risk_missed"]), fmt.count(r["risk_over"]),
            fmt.pct(r["risk_exact_rate"]),
        ])
    return rows


SAFETY_HEADER = ["Clinician", "Suicide screening [95% CI]", "Screened", "First screening turn (never)",
                 "Safety-critical miss rate (missed/hidden)", "Risk under-estimated / present", "Present risk stated as none",
                 "Risk over-estimated", "Risk level exact"]


def safety_section(data: RunData) -> Section | None:
    if not has_columns(data.tables, "safety", _SAFETY_NEEDS):  # the long table itself is not shown: not held
        return _plain("safety", SAFETY_TITLE, data)
    clinicians = _for_judge(_read(data, "safety_clinicians"), _primary(data))
    if clinicians is None or not len(clinicians):
        return None
    under, present = int(clinicians["risk_under"].sum()), int(clinicians["risk_present"].sum())
    scored = int(clinicians["formulations_scored"].sum())
    if scored:
        colour = "#D55E00" if under else "#009E73"
        alert = (f"<p style='border-left:4px solid {colour};padding:8px 12px;background:#fff7f0;font-size:15px'>"
                 f"<b>{under} of {present}</b> formulations for patients with a present suicide/self-harm risk "
                 f"<b>under-estimated it</b> ({int(clinicians['risk_missed'].sum())} stated no risk at all).</p>")
    else:
        alert = "<p class='lede'>No formulations were requested (run with <code>--formulation</code>): risk levels are not scored.</p>"
    body = (f"<p class='lede'>{_esc(SAFETY_DEFINITIONS)} Judge: {_esc(_primary(data))}.</p>" + alert
            + _html_table(SAFETY_HEADER, safety_rows(clinicians), strong=5))
    return Section("safety", SAFETY_TITLE, body)


SCATTER_POINTS = 1000  # points drawn per arm at most (each is SVG in index.html); the title says when sampled


def scatter_svg(table) -> str:
    """Small multiples, one per clinician arm: active coverage (x) vs comorbidity recall (y), a point per
    conversation (deterministic jitter of ±1.5 points so identical values stay visible)."""

    plt = _plt()
    arms = sorted({_arm(r) for _, r in table.iterrows()})
    cols = min(len(arms), 3) or 1
    rows = -(-len(arms) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.2 * rows), squeeze=False, sharex=True, sharey=True)
    for index, arm in enumerate(arms):
        ax = axes[index // cols][index % cols]
        points = [(float(r["active_coverage_rate"]), float(r["comorbidity_recall"])) for _, r in table.iterrows()
                  if _arm(r) == arm and not fmt.missing(r["active_coverage_rate"]) and not fmt.missing(r["comorbidity_recall"])]
        n = len(points)
        if n > SCATTER_POINTS:  # the page stays small: a fixed random sample of the arm's points is drawn
            points = random.Random(f"scatter-sample|{arm}").sample(points, SCATTER_POINTS)
        jitter = random.Random(f"scatter|{arm}")
        xs = [x * 100 + jitter.uniform(-1.5, 1.5) for x, _ in points]
        ys = [y * 100 + jitter.uniform(-1.5, 1.5) for _, y in points]
        ax.plot([0, 100], [0, 100], color="#bbbbbb", linewidth=0.8, linestyle="--")
        ax.scatter(xs, ys, s=14, alpha=0.6, color=OKABE_ITO[index % len(OKABE_ITO)], linewidths=0)
        drawn = f"; {len(points)} drawn at random" if len(points) < n else ""
        ax.set_title(f"{arm} (n={n}{drawn})", loc="left", fontsize=9)
        ax.set_xlim(-4, 104)
        ax.set_ylim(-4, 104)
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_xlabel("active coverage (%)")
        if index % cols == 0:
            ax.set_ylabel("comorbidity recall (%)")
    for index in range(len(arms), rows * cols):
        axes[index // cols][index % cols].axis("off")
    fig.tight_layout()
    return to_svg(fig)


DIAGNOSIS_HEADER = ["Clinician", "Formulations scored", "Failed (repaired)", "Principal hit [95% CI]",
                    "Comorbidity recall [95% CI]", "Precision", "Unearned share", "Active coverage", "Unmapped diagnoses"]


def diagnosis_rows(table) -> list[list[str]]:
    rows = []
    for _, r in table.iterrows():
        rows.append([
            _arm(r), fmt.count(r["scored"]), f"{fmt.count(r['formulation_failures'])} ({fmt.count(r['formulations_repaired'])})",
            f"{fmt.pct(r['principal_hit_rate'])} {fmt.ci(r['principal_hit_rate_ci_low'], r['principal_hit_rate_ci_high'])}".strip(),
            f"{fmt.pct(r['mean_comorbidity_recall'])} {fmt.ci(r['mean_comorbidity_recall_ci_low'], r['mean_comorbidity_recall_ci_high'])}".strip(),
            fmt.pct(r["mean_comorbidity_precision"]), fmt.pct(r["mean_unearned_share"]), fmt.pct(r["mean_active_coverage"]),
            f"{fmt.pct(r['unmapped_share'])} ({_ratio(r['unmapped_diagnoses'], r['diagnoses'])})",
        ])
    return rows


def diagnosis_section(data: RunData) -> Section | None:
    table = read_columns(data.tables, "diagnosis", (*_DIAGNOSIS_NEEDS, "judge", "clinician", "condition", "patient_mode"))
    if table is None or not all(c in table.columns for c in _DIAGNOSIS_NEEDS):
        return _plain("diagnosis", DIAGNOSIS_TITLE, data)
    judge = _primary(data)
    clinicians = _for_judge(_read(data, "diagnosis_clinicians"), judge)
    if clinicians is None or not len(clinicians):
        return None
    rows = _for_judge(table, judge)
    scored = rows[rows["comorbidity_recall"].notna()] if len(rows) else rows
    chart = scatter_svg(scored) if len(scored) else "<p class='empty'>No scored formulations yet.</p>"
    body = (f"<p class='lede'>{_esc(DIAGNOSIS_DEFINITIONS)} Judge: {_esc(judge)}.</p>"
            + _html_table(DIAGNOSIS_HEADER, diagnosis_rows(clinicians), strong=4) + chart)
    return Section("diagnosis", DIAGNOSIS_TITLE, body)


def summary_markdown(data: RunData) -> list[str]:
    """Markdown lines for report/summary.md (empty when the run has neither table)."""

    judge = _primary(data)
    out: list[str] = []
    safety = _for_judge(_read(data, "safety_clinicians"), judge)
    if safety is not None and len(safety) and "suicide_screen_rate" in safety.columns:
        under, present = int(safety["risk_under"].sum()), int(safety["risk_present"].sum())
        out += ["## Safety-critical screening", "", SAFETY_DEFINITIONS, ""]
        if int(safety["formulations_scored"].sum()):
            out += [f"**Risk under-estimation: {under} of {present} formulations for patients with a present "
                    f"suicide/self-harm risk under-estimated it ({int(safety['risk_missed'].sum())} stated no risk).**", ""]
        out += _table(SAFETY_HEADER, safety_rows(safety)) + [""]
    diagnosis = _for_judge(_read(data, "diagnosis_clinicians"), judge)
    if diagnosis is not None and len(diagnosis) and "mean_comorbidity_recall" in diagnosis.columns:
        out += ["## Coverage vs diagnosis (post-intake formulation)", "", DIAGNOSIS_DEFINITIONS, ""]
        out += _table(DIAGNOSIS_HEADER, diagnosis_rows(diagnosis)) + [""]
    return out
