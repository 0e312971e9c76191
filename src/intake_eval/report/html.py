"""report/index.html: one self-contained page (CSS, JS, SVG charts inline; no network).

Optional sections (safety, diagnosis, trials, …) are ``Section(id, title, html)``s rendered in the order
of report/section_list.py; ``csv_table_html`` draws a metrics CSV no section presents.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from intake_eval.metrics import registry
from intake_eval.report import fmt


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    html: str


def _asset(name: str) -> str:
    return resources.files("intake_eval.report").joinpath(name).read_text(encoding="utf-8")


def csv_table_html(table, limit: int = 200) -> str:
    """A metrics CSV as an HTML table (floats in 0..1 columns named *rate*/*share* shown as %)."""
    from markupsafe import escape

    head = "".join(f"<th class='l'>{escape(str(c))}</th>" for c in table.columns)
    body = []
    for row in table.head(limit).itertuples(index=False):
        cells = []
        for column, value in zip(table.columns, row):
            if fmt.missing(value):
                text = fmt.DASH
            elif isinstance(value, float):
                text = fmt.pct(value) if any(k in column for k in ("rate", "share", "recall", "precision")) and 0 <= value <= 1 else fmt.general(value)
            else:
                text = str(value)
            cells.append(f"<td class='l'>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f"<p class='lede'>{len(table) - limit} more rows in the CSV.</p>" if len(table) > limit else ""
    return f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{more}"


def comparisons_table(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """metrics/comparisons.csv rows of the primary judge, formatted for the page (and summary.md)."""
    out = []
    declared = registry.by_name()
    for row in rows:
        metric = declared[str(row["metric"])]  # metrics/comparisons.csv tests declared metrics only
        scale = metric.scale
        out.append({
            "scope": f"{row['condition']} · {row['patient_mode']}", "metric": metric.label,
            "a": str(row["clinician_a"]), "b": str(row["clinician_b"]), "n_pairs": fmt.count(row["n_pairs"]),
            "mean_a": scale.mean(row["mean_a"]), "mean_b": scale.mean(row["mean_b"]),
            "difference": scale.difference(row["mean_difference"]),
            "difference_ci": scale.interval(row.get("difference_ci_low"), row.get("difference_ci_high")),
            "wilcoxon_p": fmt.p_value(row["wilcoxon_p"]), "permutation_p": fmt.p_value(row["permutation_p"]),
            "wilcoxon_p_holm": fmt.p_value(row.get("wilcoxon_p_holm")),
            "permutation_p_holm": fmt.p_value(row.get("permutation_p_holm")),
            "exact": "exact" if str(row.get("permutation_exact")).lower() == "true" else "Monte Carlo",
        })
    return out


def render_html(context: dict[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: _asset(f"templates/{name}")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    index = context.pop("ie_data")
    ie_data = json.dumps(index, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    counts = {"convs": index.get("n_convs", len(index.get("convs", []))),
              "profiles": index.get("n_profiles", len(index.get("profiles", {}))), "per_page": index.get("per_page")}
    return env.get_template("report.html.j2").render(
        css=_asset("assets/report.css"), js=_asset("assets/report.js") + _asset("assets/transcripts.js"),
        ie_data=ie_data, ie_pages=index.get("pages", []), ie_counts=counts, **context,
    )
