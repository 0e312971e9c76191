"""The report's "Patient behaviour styles" section: what each style changed, per clinician arm.

From metrics/styles.csv (coverage, bleed, first treatment-planning turn, closure and leaks per arm and style,
each with its interval),
metrics/style_pairs.csv (each style − forthcoming on the same profiles, paired, with its interval) and
metrics/patient_population.csv (how the patients spoke in each style). Shown only when the run has a style
other than forthcoming; the numbers follow the report's primary judge.
"""

from __future__ import annotations

from typing import Any

from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES
from intake_eval.metrics import registry
from intake_eval.metrics.styles import STYLE_METRICS
from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _esc, _for_judge, _html_table, _primary
from intake_eval.report.html import Section
from intake_eval.report.load import RunData

TITLE = "Patient behaviour styles"
COVERAGE = "active_coverage_rate"


def _metric(name: str) -> registry.Metric:
    return registry.by_name()[name]


def _estimate(row: Any, metric: str) -> str:
    scale = _metric(metric).scale
    mean = row.get(f"{metric}_mean")
    if fmt.missing(mean):
        return fmt.DASH
    return f"{scale.mean(mean)} {scale.interval(row[f'{metric}_ci_low'], row[f'{metric}_ci_high'])}".strip()


def _difference(row: Any) -> str:
    scale = _metric(str(row["metric"])).scale
    if fmt.missing(row.get("difference")):
        return fmt.DASH
    interval = scale.interval(row["difference_ci_low"], row["difference_ci_high"])
    return f"{scale.difference(row['difference'])} {interval} — {row['change']}"


def style_rows(table: Any) -> list[list[str]]:
    return [[str(row["arm"]), str(row["patient_style"]), fmt.count(row["n"]),
             *(_estimate(row, metric) for metric in STYLE_METRICS)] for _, row in table.iterrows()]


def pair_rows(pairs: Any) -> list[list[str]]:
    rows = []
    for (arm, style), group in pairs.groupby(["arm", "style_a"], sort=False):
        by_metric = {str(row["metric"]): row for _, row in group.iterrows()}
        rows.append([str(arm), f"{style} − {DEFAULT_STYLE}",
                     *(_difference(by_metric[m]) if m in by_metric else fmt.DASH for m in STYLE_METRICS)])
    return rows


def _shift(row: Any) -> str:
    scale = _metric(str(row["metric"])).scale
    return f"{scale.difference(row['difference'])} {scale.interval(row['difference_ci_low'], row['difference_ci_high'])}"


def verdicts(pairs: Any) -> list[str]:
    """Per arm and style, one sentence on coverage (does it hold up against forthcoming patients?) and the
    other metrics whose interval excludes 0."""
    lines = []
    for _, row in pairs[pairs["metric"] == COVERAGE].iterrows():
        holds = {"drops": "does not hold up", "rises": "rises", "no detectable change": "holds up (no detectable drop)",
                 }.get(str(row["change"]), str(row["change"]))
        others = pairs[(pairs["arm"] == row["arm"]) & (pairs["style_a"] == row["style_a"])
                       & (pairs["metric"] != COVERAGE) & pairs["change"].isin(["drops", "rises"])]
        also = "; ".join(f"{_metric(str(other['metric'])).label} {other['change']} {_shift(other)}"
                         for _, other in others.iterrows())
        lines.append(f"{row['arm']}: coverage with {row['style_a']} patients {holds}: {_shift(row)} against "
                     f"forthcoming patients on the same {fmt.count(row['n_profiles'])} profiles"
                     + (f"; also {also}." if also else "."))
    return lines


def speech_lines(data: RunData) -> list[str]:
    """What the style changed in the patients' speech: words per reply by style (metrics/patient_population.csv)."""
    table = data.tables.get("patient_population")
    if table is None or not len(table) or "patient_style" not in table.columns:
        return []
    lines = []
    for _, row in table.iterrows():
        lines.append(f"{row['patient']} ({row['patient_mode']}, {row['patient_style']}): "
                     f"{float(row['words_mean']):.1f} words per reply on average (median "
                     f"{float(row['words_median']):.0f}) over {fmt.count(row['replies'])} replies.")
    return lines


def styles_section(data: RunData) -> Section | None:
    judge = _primary(data)
    table = _for_judge(data.tables.get("styles"), judge)
    if table is None or not len(table):
        return None
    labels = [_metric(metric).label for metric in STYLE_METRICS]
    described = "".join(f"<li><b>{_esc(name)}</b>: {_esc(style.summary)} Counts as disclosure: {_esc(style.disclosure)}</li>"
                        for name, style in STYLES.items() if name in set(table["patient_style"]))
    body = (f"<p class='lede'>Each profile was interviewed by every clinician once per patient behaviour style (a full "
            f"factorial), so each style is compared with forthcoming patients on the same profiles. A style changes how "
            f"the patient speaks, never the disclosure rule. Judge: {_esc(judge or '')}.</p><ul class='lede'>{described}</ul>")
    pairs = _for_judge(data.tables.get("style_pairs"), judge)
    if pairs is not None and len(pairs):
        body += "<h3>Does coverage hold up?</h3><ul>" + "".join(f"<li>{_esc(line)}</li>" for line in verdicts(pairs)) + "</ul>"
    spoken = speech_lines(data)
    if spoken:
        body += "<h3>What the style changed in the patients' speech</h3><ul>" + "".join(
            f"<li>{_esc(line)}</li>" for line in spoken) + "</ul>"
    body += ("<h3>By style, with 95% intervals</h3><p class='lede'>From <code>metrics/styles.csv</code>; a turn is "
             "averaged over the intakes that reach it.</p>" + _html_table(["Arm", "Style", "Conversations", *labels],
                                                                           style_rows(table)))
    if pairs is not None and len(pairs):
        body += ("<h3>Each style against forthcoming (paired on profiles)</h3><p class='lede'>From "
                 "<code>metrics/style_pairs.csv</code>: style − forthcoming with its paired bootstrap interval; "
                 "'drops'/'rises' when the interval excludes 0 (an interval that includes 0 is no proof of "
                 "equivalence).</p>" + _html_table(["Arm", "Comparison", *labels], pair_rows(pairs)))
    return Section("patient-styles", TITLE, body)


def summary_markdown(data: RunData) -> list[str]:
    pairs = _for_judge(data.tables.get("style_pairs"), _primary(data))
    if pairs is None or not len(pairs):
        return []
    return ["", f"## {TITLE}", "", *(f"- {line}" for line in verdicts(pairs)), ""]
