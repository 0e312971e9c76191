"""report/summary.md: the headline results as Markdown tables, ready to paste into a paper."""

from __future__ import annotations

from typing import Any

from intake_eval.metrics import registry
from intake_eval.report import fmt
from intake_eval.report.html import comparisons_table as comparison_cells


def _table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> list[str]:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def render_markdown(run: dict[str, Any], views: dict[str, Any], notes: list[str], labels: dict[str, str],
                    extra: list[str] | tuple[str, ...] = ()) -> str:
    """``extra``: Markdown lines of optional sections (safety, diagnosis), before the footer."""
    out = [f"# Hidden-domain coverage — run `{run['name']}`", ""]
    out.append(f"{run['n_conversations']:,} conversations over {run['n_profiles']:,} simulated patients, "
               f"{run['n_clinicians']} clinician(s), up to {run['max_turn']} clinician turns each. "
               f"Primary judge: {run['primary'] or 'none'}" + (f"; cross-check: {', '.join(run['judges'][1:])}." if len(run['judges']) > 1 else "."))
    out.append("")
    if notes:
        out += ["> **Incomplete run.** " + " ".join(f"{n}." if not n.endswith(".") else n for n in notes), ""]
    if views.get("answers"):
        out += ["> **Answers not given in full** (refused or empty: the conversation failed; cut: kept and flagged). "
                + " ".join(f"{line}." for line in views["answers"]), ""]
    intervals = views.get("intervals") or {}
    out += ["## Headline", "",
            "Active coverage: share of hidden domains the clinician asked about specifically and the patient disclosed "
            "(mean over conversations). Turn metrics are medians; in parentheses, conversations where the event never "
            "happened. " + intervals.get("headline", ""), ""]
    rows = []
    for row in views["headline"]:
        f = row.get("fmt") or fmt.headline_cells(row)
        rows.append([row["arm"], str(row["n_scored"]), *(cell.plain() for _, cell in f["metrics"]),
                     f["failures"], f"{f['no_text']} ({f['cut']} cut)", f["judge_errors"], f["tokens"], f["cost"]])
    metric_headers = [_capitalised(m.plain_header()) for m in registry.headline_metrics()]
    out += _table(["Clinician", "n", *metric_headers, "Failed", "No visible text (turns cut)", "Judge errors", "Tokens",
                   "Cost"], rows)
    out.append("")
    if views.get("comparisons"):
        out += ["### Paired comparisons on the same profiles", "", intervals.get("comparisons", ""), ""]
        cells = comparison_cells(views["comparisons"])
        several = len({c["scope"] for c in cells}) > 1
        rows = [[c["metric"] + (f" ({c['scope']})" if several else ""), c["a"], c["b"], c["n_pairs"], c["mean_a"],
                 c["mean_b"], f"{c['difference']} {c['difference_ci']}".strip(), c["wilcoxon_p"], c["wilcoxon_p_holm"],
                 c["permutation_p"], c["permutation_p_holm"]] for c in cells]
        out += _table(["Metric", "A", "B", "Pairs", "Mean A", "Mean B", "A − B [95% CI]", "Wilcoxon p", "Holm",
                       "Permutation p", "Holm"], rows, align=["l", "l", "l"] + ["r"] * 8) + [""]
    m = views["matrix"]
    if m["phenotypes"]:
        out += ["## Coverage matrix (active coverage, %; hardest phenotypes first; ▲ = masked presentation)", ""]
        rows = []
        for i, phenotype in enumerate(m["phenotypes"]):
            mark = " ▲" if m["alignment"].get(phenotype) == "masked" else ""
            rows.append([phenotype + mark] + [fmt.pct(v, 0) + (f" (n={n})" if n else "") for v, n in zip(m["values"][i], m["counts"][i])])
        out += _table(["Phenotype"] + m["arms"], rows) + [""]
        rows = [[x["arm"], fmt.pct(x["masked_mean"]), str(x["masked_n"]), fmt.pct(x["aligned_mean"]), str(x["aligned_n"]),
                 f"{fmt.points(x.get('model_difference'))} {fmt.ci(x.get('model_lo'), x.get('model_hi'))}".strip(),
                 fmt.p_value(x.get("model_p")), f"{x.get('masked_phenotypes', 0)} / {x.get('aligned_phenotypes', 0)}"]
                for x in m["masking"]]
        out += ["### Masked vs aligned phenotypes", "", intervals.get("masking", ""), "",
                intervals.get("masking_model", ""), ""]
        out += _table(["Clinician", "Masked", "n", "Aligned", "n", "Masked − aligned [95% CI]", "Phenotype permutation p",
                       "Phenotypes masked / aligned"], rows) + [""]
    d = views["domains"]
    if d["domains"]:
        out += ["## Per-domain active coverage (% of conversations where the domain was hidden)", ""]
        rows = [[labels.get(dom, dom)] + [fmt.pct(v, 0) for v in d["values"][i]] for i, dom in enumerate(d["domains"])]
        out += _table(["Domain"] + d["arms"], rows) + [""]
    if views["agreement"]:
        out += ["## Inter-judge agreement", ""]
        rows = [[f"{a['judge_a']} vs {a['judge_b']}" + (f" ({a['scope']})" if a["scope"] != "all" else ""), a["label"],
                 f"{a['n']:,}", fmt.pct(a["raw_agreement"]), fmt.kappa(a["kappa"])] for a in views["agreement"]]
        out += _table(["Judges", "Label", "n", "Raw agreement", "Cohen's κ"], rows) + [""]
    out += list(extra)
    out += [f"_Generated by intake-eval on {run['generated']}. Full report: index.html; per-conversation numbers: metrics/conversations.csv._", ""]
    return "\n".join(out)
