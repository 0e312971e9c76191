"""The rich terminal summary printed by `intake-eval report` (same numbers as the HTML)."""

from __future__ import annotations

from typing import Any

from intake_eval.metrics import registry
from intake_eval.report import fmt


def _cells(cell: registry.HeadlineCell) -> tuple[str, ...]:
    """A headline metric's terminal cells: a mean (bold) and its interval apart, a median with (never)."""
    if cell.kind == "mean_ci":
        return f"[bold]{cell.text}[/]", cell.detail_text
    return (cell.plain(),)


def print_summary(console, result) -> None:
    from rich import box
    from rich.table import Table

    views: dict[str, Any] = result.views
    rows = [(row, row.get("fmt") or fmt.headline_cells(row)) for row in views["headline"]]
    width = max([len(row["arm"]) for row, _ in rows] + [9])
    coverage = Table(title=f"Active coverage (judge: {views['primary'] or 'none'})", title_justify="left",
                     caption="1st TP = first treatment-planning turn, closure = premature-closure turn: medians (never)",
                     caption_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), header_style="bold")
    coverage.add_column("clinician", justify="left", no_wrap=True, min_width=width)
    coverage.add_column("n", justify="right", no_wrap=True)
    for metric in registry.headline_metrics():
        coverage.add_column(metric.tag or metric.label, justify="right", no_wrap=True)
        if metric.aggregate is not None and metric.aggregate.kind == "mean_ci":
            coverage.add_column("95% CI", justify="right", no_wrap=True)
    for row, f in rows:
        coverage.add_row(row["arm"], str(row["n_scored"]), *(text for _, cell in f["metrics"] for text in _cells(cell)))
    console.print(coverage)
    spend = Table(title="Integrity and spend", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), header_style="bold")
    for name in ("clinician", "failed", "judge errors", "tokens", "cost"):
        spend.add_column(name, justify="left" if name == "clinician" else "right", no_wrap=True,
                         min_width=width if name == "clinician" else None)
    for row, f in rows:
        spend.add_row(row["arm"], f["failures"], f["judge_errors"], f["tokens"], f["cost"])
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
