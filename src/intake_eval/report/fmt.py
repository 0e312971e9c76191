"""Number formatting shared by the HTML, the Markdown and the terminal summary (so they agree)."""

from __future__ import annotations

import math
from typing import Any

DASH = "–"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def pct(value: Any, digits: int = 1) -> str:
    return DASH if missing(value) else f"{float(value) * 100:.{digits}f}%"


def ci(low: Any, high: Any) -> str:
    if missing(low) or missing(high):
        return ""
    return f"[{float(low) * 100:.1f}–{float(high) * 100:.1f}]"


def turn(value: Any) -> str:
    return DASH if missing(value) else f"{float(value):g}"


def count(value: Any) -> str:
    return DASH if missing(value) else f"{int(value):,}"


def dollars(value: Any, known: bool = True) -> str:
    if missing(value):
        return DASH
    text = f"${float(value):,.2f}"
    return text if known else f"≥ {text}"


def points(value: Any) -> str:
    """A difference of two rates, in percentage points."""
    return DASH if missing(value) else f"{float(value) * 100:+.1f} pts"


def p_value(value: Any) -> str:
    if missing(value):
        return DASH
    return "< 0.001" if float(value) < 0.001 else f"{float(value):.3f}"


def kappa(value: Any) -> str:
    return DASH if missing(value) else f"{float(value):.2f}"


def headline_cells(row: dict[str, Any]) -> dict[str, str]:
    """The formatted cells of one headline row, keyed like the row."""
    return {
        "coverage": pct(row["coverage_mean"]),
        "coverage_ci": ci(row["coverage_ci_low"], row["coverage_ci_high"]),
        "bleed": pct(row["bleed_mean"]),
        "first_tp": turn(row["first_tp_median"]),
        "first_tp_never": count(row["first_tp_never"]),
        "closure": turn(row["closure_median"]),
        "closure_never": count(row["closure_never"]),
        "leaks": count(row["leak_total"]),
        "failures": count(row["failures"]),
        "no_text": count(row.get("no_text", 0)),
        "cut": DASH if row.get("cut_share") is None else pct(row["cut_share"]),
        "judge_errors": count(row["judge_errors"]),
        "tokens": count(row["tokens"]),
        "cost": dollars(row["cost_usd"], row["cost_known"]),
    }
