"""`intake-eval compare`: load the runs, pair them, check the conclusions, write compare.md/.html
and compare_paired.csv into the output folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from intake_eval.compare.paired import PAIRED_COLUMNS, paired_rows
from intake_eval.compare.render import Comparison, markdown, page
from intake_eval.compare.runs import assign_entities, load_runs
from intake_eval.compare.sensitivity import sensitivity
from intake_eval.core.store import write_text_atomic
from intake_eval.metrics.reading import write_csv


@dataclass
class CompareResult:
    comparison: Comparison
    html: Path
    markdown: Path
    paired_csv: Path


def compare_runs(run_dirs: list[Path], out: Path | None = None) -> CompareResult:
    runs = load_runs([Path(p) for p in run_dirs])
    columns = assign_entities(runs)
    views, sensitivities, entities = sensitivity(runs, columns)
    comparison = Comparison(runs, columns, paired_rows(runs, columns), views, sensitivities, entities)
    folder = Path(out) if out is not None else Path(run_dirs[0]) / "compare"
    folder.mkdir(parents=True, exist_ok=True)
    html_path, md_path = folder / "compare.html", folder / "compare.md"
    write_text_atomic(html_path, page(comparison, folder))
    write_text_atomic(md_path, markdown(comparison))
    csv_path = write_csv(folder / "compare_paired.csv", PAIRED_COLUMNS, comparison.paired)
    return CompareResult(comparison, html_path, md_path, csv_path)
