"""`report --figures png,svg,pdf`: every chart of the report as a standalone file in report/figures/,
with human-readable labels (phenotype names from the catalog instead of ids, domain labels), 95 %
bands on the coverage trajectories and a per-domain dot plot with intervals, as on the page.

The charts are drawn by the same code as the page's inline SVGs (build.render_charts); while it runs,
charts.FIGURE_SINK keeps each figure open so it can be saved again in every requested format.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intake_eval.catalog.snapshot import run_catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.report import charts

FIGURE_FORMATS = ("png", "svg", "pdf")
METADATA = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
            "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}  # no dates: reruns give equal files
FIGURE_NAMES = {"forest": "coverage_by_clinician", "matrix": "coverage_by_phenotype", "domains": "coverage_by_domain",
                "trajectory": "coverage_by_turn", "qmix": "question_types_by_turn", "domain_rates": "coverage_by_domain_ci"}


def parse_formats(text: str) -> tuple[str, ...]:
    """'png,svg' → ('png', 'svg'); an unknown format is a one-line error naming the flag."""
    formats = tuple(dict.fromkeys(part.strip().lower().lstrip(".") for part in text.split(",") if part.strip()))
    unknown = [f for f in formats if f not in FIGURE_FORMATS]
    if not formats or unknown:
        raise IntakeEvalError(f"--figures {text}: formats are a comma-separated list of {', '.join(FIGURE_FORMATS)}")
    return formats


def phenotype_names(run_root: Path) -> dict[str, str]:
    """Phenotype id → name from the run folder's catalog (its own copy, else the shipped one)."""
    try:
        return {pid: phenotype.name for pid, phenotype in run_catalog(run_root).phenotypes.items()}
    except IntakeEvalError:  # a run made with another catalog: its ids stay as they are
        return {}


def readable_views(views: dict[str, Any], run_root: Path) -> dict[str, Any]:
    """The views with phenotype ids replaced by their catalog names."""
    names = phenotype_names(run_root)
    shown = copy.copy(views)
    matrix = dict(views["matrix"])
    matrix["alignment"] = {names.get(p, p): a for p, a in views["matrix"].get("alignment", {}).items()}
    matrix["phenotypes"] = [names.get(p, p) for p in views["matrix"]["phenotypes"]]
    matrix.pop("links", None)  # a standalone figure has no transcript viewer to link to
    shown["matrix"] = matrix
    shown["domains"] = {k: v for k, v in views["domains"].items() if k != "links"}
    return shown


def section_charts(sections: list[Any], sink: list) -> dict[str, str]:
    """File name → svg for the charts drawn inside optional sections (named after their section)."""
    named: dict[str, str] = {}
    for svg, _ in sink:
        owner = next((section for section in sections if svg in section.html), None)
        if owner is None:
            continue
        base = owner.id.replace("-", "_")
        name, number = base, 2
        while name in named:
            name, number = f"{base}_{number}", number + 1
        named[name] = svg
    return named


def write_figures(render: Callable[[dict[str, Any], dict[str, str]], dict[str, str]], views: dict[str, Any],
                  labels: dict[str, str], folder: Path, formats: tuple[str, ...],
                  sections: Callable[[], list[Any]] | None = None, *, run_root: Path) -> list[Path]:
    """Draw every chart with ``render`` (build.render_charts: trajectories with their CI bands, the
    per-domain rates with intervals) and the charts of the optional sections (``sections`` renders
    them again), and save each in every format."""
    plt = charts._plt()
    shown = readable_views(views, run_root)
    sink: list = []
    charts.FIGURE_SINK = sink
    try:
        drawn = dict(render(shown, labels))
        if sections is not None:
            section_sink = len(sink)
            drawn.update(section_charts(sections(), sink[section_sink:]))
    finally:
        charts.FIGURE_SINK = None
    by_svg = {svg: fig for svg, fig in sink}
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():  # the folder is ours: files of an earlier call must not linger
        if stale.suffix.lstrip(".") in FIGURE_FORMATS:
            stale.unlink()
    written = []
    try:
        for key, svg in drawn.items():
            fig = by_svg.get(svg)
            if fig is None:
                continue  # the chart was not drawn (no data for it)
            for fmt in formats:
                target = folder / f"{FIGURE_NAMES.get(key, key)}.{fmt}"
                fig.savefig(target, format=fmt, bbox_inches="tight", dpi=200, metadata=METADATA[fmt])
                written.append(target)
    finally:
        for _, fig in sink:
            plt.close(fig)
    return written
