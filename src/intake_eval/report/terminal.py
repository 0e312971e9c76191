"""The rich terminal summary printed by `intake-eval report` (same numbers as the HTML)."""

from __future__ import annotations

from typing import Any

from intake_eval.report import fmt


def print_summary(console, result) -> None:
    from rich import box
    from rich.table import Table

    views: dict[str, Any] = result.views
    rows = [(row, row.get("fmt") or fmt.headline_cells(row)) for row in views["headline"]]
    width = max([len(row["arm"]) for row, _ in rows] + [9])
    coverage = Table(title=f"Active coverage (judge: {views['primary'] or 'none'})", title_justify="left",
                     caption="1st TP = first treatment-planning turn, closure = premature-closure turn: medians (never)",
                     caption_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), header_style="bold")
    for name in ("clinician", "n", "coverage", "95% CI", "bleed", "1st TP", "closure"):
        coverage.add_column(name, justify="left" if name == "clinician" else "right", no_wrap=True,
                            min_width=width if name == "clinician" else None)
    for row, f in rows:
        coverage.add_row(row["arm"], str(row["n_scored"]), f"[bold]{f['coverage']}[/]", f["coverage_ci"], f["bleed"],
                         f"{f['first_tp']} ({f['first_tp_never']})", f"{f['closure']} ({f['closure_never']})")
    console.print(coverage)
    spend = Table(title="Integrity and spend", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), header_style="bold")
    for name in ("clinician", "failed", "judge errors", "patient leaks", "tokens", "cost"):
        spend.add_column(name, justify="left" if name == "clinician" else "right", no_wrap=True,
                         min_width=width if name == "clinician" else None)
    for row, f in rows:
        spend.add_row(row["arm"], f["failures"], f["judge_errors"], f["leaks"], f["tokens"], f["cost"])
    console.print(spend)
    m = views["matrix"]
    if m["phenotypes"]:
        hardest = ", ".join(f"{p} ({fmt.pct(m['overall'][p], 0)})" for p in m["phenotypes"][:3])
        console.print(f"Hardest phenotypes: {hardest}")
    for row in views["agreement"]:
        if row["label"] == "actively_covered":
            console.print(f"Judge agreement on 'actively covered' ({row['judge_a']} vs {row['judge_b']}): "
                          f"κ = {fmt.kappa(row['kappa'])}, raw {fmt.pct(row['raw_agreement'])}")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
