"""How a number is written, everywhere: every table of the report (HTML, summary.md, the terminal),
`intake-eval compare` and every CSV the run folder holds.

Display cells (``pct``, ``ci``, ``points``, ``p_value``, ``decimal``, ``count``, ``dollars``, ``turn``,
``kappa``) are for people: fixed decimals per kind of number, a dash for an undefined value. CSV cells
(``csv_cell``) are for machines: an empty cell for an undefined value, ``true``/``false``, integers as
they are and every float to six significant digits (``.6g``; exponent notation below 1e-4), so a
figure reads back equal to what the page rounds from and every CSV uses one precision.
"""

from __future__ import annotations

import math
from typing import Any

DASH = "–"
CSV_FLOAT = ".6g"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def csv_cell(value: Any) -> Any:
    """One CSV cell: '' for None/NaN, 'true'/'false', floats to six significant digits, anything else as is."""
    if missing(value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return format(value, CSV_FLOAT)
    return value


def pct(value: Any, digits: int = 1) -> str:
    return DASH if missing(value) else f"{float(value) * 100:.{digits}f}%"


def ci(low: Any, high: Any) -> str:
    """A rate's interval, in percent: [12.5–30.0]; [-38.3, -22.8] when a bound is negative (a difference)."""
    if missing(low) or missing(high):
        return ""
    low, high = float(low) * 100, float(high) * 100
    return f"[{low:.1f}, {high:.1f}]" if min(low, high) < 0 else f"[{low:.1f}–{high:.1f}]"


def points(value: Any) -> str:
    """A difference of two rates, in percentage points."""
    return DASH if missing(value) else f"{float(value) * 100:+.1f} pts"


def decimal(value: Any, digits: int = 2, signed: bool = False) -> str:
    """A quantity that is not a rate (turns, counts per conversation, τ): fixed decimals."""
    if missing(value):
        return DASH
    return f"{float(value):{'+' if signed else ''},.{digits}f}"


def interval(low: Any, high: Any, digits: int = 2) -> str:
    """A non-rate interval: [1.25, 3.00]."""
    if missing(low) or missing(high):
        return ""
    return f"[{decimal(low, digits)}, {decimal(high, digits)}]"


def turn(value: Any) -> str:
    """A turn number or a median of turns: whole, or one decimal (6.5)."""
    return DASH if missing(value) else f"{round(float(value), 1):g}"


def count(value: Any) -> str:
    return DASH if missing(value) else f"{int(value):,}"


def dollars(value: Any, known: bool = True) -> str:
    if missing(value):
        return DASH
    text = f"${float(value):,.2f}"
    return text if known else f"≥ {text}"


def p_value(value: Any) -> str:
    if missing(value):
        return DASH
    return "< 0.001" if float(value) < 0.001 else f"{float(value):.3f}"


def kappa(value: Any) -> str:
    return decimal(value, 2)


def general(value: Any) -> str:
    """A number of unknown kind (a plain table of a CSV): whole numbers as counts, else three decimals."""
    if missing(value):
        return DASH
    number = float(value)
    return count(number) if number.is_integer() else f"{number:,.3f}"
