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
from intake_eval.metrics import registry
from intake_eval.metrics.sensitivity import tied_ranks


def headline_cells(row: dict[str, Any]) -> dict[str, Any]:
    """The formatted cells of one headline row: ``metrics`` holds the declared headline metrics'
    (metrics/registry: (metric, cell) in declaration order), the rest are keyed like the row."""
    return {
        "metrics": registry.headline_cells(row),
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
