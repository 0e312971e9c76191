"""The population measures of one patient (metrics/patient_language.py) as a terminal table, with targets."""

from __future__ import annotations

from typing import Any

from intake_eval.core import numbers
from intake_eval.metrics.patient_language import TARGETS, check_targets

_SHARES = ("length_on_target_share", "early_resolution_share", "repeated_phrasing_share")


def _wanted(measure: str, low: Any, high: Any) -> str:
    if measure == "words_mean":
        return f"{low}–{high} words (the style's target)"
    target = next((t for t in TARGETS if t.measure == measure), None)
    if target is None:
        return ""
    share = measure in _SHARES
    shown = (lambda value: numbers.pct(value)) if share else (lambda value: f"{value:g}")
    if target.low is not None:
        return f"≥ {shown(target.low)}"
    return f"≤ {shown(target.high)}" if target.high is not None else ""


def population_table(measures: dict[str, Any], title: str) -> Any:
    """A rich table: each measure, its value and what is wanted; the title says which targets are missed."""
    from rich.table import Table

    missed = check_targets(measures)
    table = Table(title=f"{title} — {measures.get('replies', 0)} replies, "
                        + ("targets met" if not missed else "missed: " + "; ".join(missed)), title_justify="left")
    for column in ("measure", "value", "wanted"):
        table.add_column(column, justify="right" if column == "value" else "left", no_wrap=column == "value")
    low, high = measures.get("words_target_low"), measures.get("words_target_high")
    for measure in ("words_mean", "words_sd", "words_median", "length_on_target_share", "mattr",
                    "early_resolution_share", "repeated_phrasing_share"):
        value = measures.get(measure)
        text = numbers.pct(value) if measure in _SHARES else numbers.DASH if value is None else f"{value:.2f}"
        table.add_row(measure.replace("_", " "), text, _wanted(measure, low, high))
    return table
