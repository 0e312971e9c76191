"""The report's cells: the number formats of core/numbers.py (one formatter for every table, so the
HTML, the Markdown, the terminal and compare agree), rankings with ties, and the headline row's cells."""

from __future__ import annotations

from typing import Any

from intake_eval.core.numbers import (  # noqa: F401  (the report's formats, used as fmt.<name>)
    DASH,
    ci,
    count,
    decimal,
    dollars,
    general,
    interval,
    kappa,
    missing,
    p_value,
    pct,
    points,
    turn,
)
from intake_eval.metrics.sensitivity import tied_ranks


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


def ranking(scores: dict[str, float], order: list[str]) -> str:
    """'1. a (80.0%) · =2. b (50.0%) · =2. c (50.0%)': rates best first, ties shown as ties."""
    return " · ".join(f"{rank}. {entity} ({pct(scores[entity])})" for rank, entity in tied_ranks(scores, order))
