"""Pieces of the report's orchestration (report/build.py)."""

from __future__ import annotations

from pathlib import Path

from intake_eval.core.spill import SpilledRows, SpillStore
from intake_eval.report.build import _in_key_order


def test_a_spilled_table_asked_in_key_order_answers_as_get(tmp_path: Path):
    store = SpillStore("report", tmp_path)
    try:
        rows = SpilledRows(store)
        kept = {f"c{n:03d}": {"n": n} for n in (5, 1, 9, 3, 12, 7)}  # put out of order
        for key, value in kept.items():
            rows.put(key, value)
        asked = sorted({*kept, "c000", "c004", "c010", "c099", "é"})  # absent keys between, before and after
        get = _in_key_order(rows)
        assert [get(key) for key in asked] == [kept.get(key) for key in asked]
        assert _in_key_order({"a": 1}).__self__ == {"a": 1}  # type: ignore[attr-defined]  # a plain mapping: its own get
    finally:
        store.close()
