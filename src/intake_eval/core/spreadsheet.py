"""Cells of a CSV meant to be opened in a spreadsheet: text that starts like a formula (=, +, -, @,
tab, carriage return) is prefixed with an apostrophe so Excel, LibreOffice or Sheets show it as
text instead of evaluating it (a model answer or an annotator name of ``=HYPERLINK(…)`` would
otherwise run when the sheet is opened). Numbers, including negative ones, are left as they are."""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def spreadsheet_cell(value: Any) -> Any:
    """``value`` safe to open in a spreadsheet (only text that looks like a formula changes)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def spreadsheet_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: spreadsheet_cell(value) for key, value in row.items()}
