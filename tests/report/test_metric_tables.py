"""The report's lazy metrics tables (report/metric_tables.py): text columns as sorted categoricals read a batch
at a time, and the column check that streams a long table instead of holding it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyarrow import parquet

from intake_eval.core.store import RunPaths
from intake_eval.report import metric_tables
from intake_eval.report.metric_tables import MetricTables, has_columns


def _long_parquet(path: Path) -> list[dict[str, Any]]:
    """Row groups whose dictionaries differ (profiles appear, recur and vanish), a null text cell, a number column."""
    rows = [{"profile_id": f"P{(i * 7) % 23:03d}" if i % 17 else None, "judge": ("b", "a")[i % 2],
             "rate": i / 10} for i in range(120)]
    types = {"profile_id": pa.string(), "judge": pa.string(), "rate": pa.float64()}  # as the metrics pass writes them
    table = pa.table({column: pa.array([row[column] for row in rows], type=kind) for column, kind in types.items()})
    parquet.write_table(table, path, row_group_size=25)
    return rows


def test_text_columns_come_as_sorted_categoricals_equal_to_a_whole_read(tmp_path: Path, monkeypatch):
    paths = RunPaths(tmp_path)
    paths.metrics("conversations").parent.mkdir(parents=True)
    rows = _long_parquet(paths.metrics("conversations").with_suffix(".parquet"))
    monkeypatch.setattr(metric_tables, "BATCH_ROWS", 10)  # many batches, each its own slice of a row group
    read = MetricTables(paths, ["conversations"], []).columns("conversations", ["judge", "profile_id", "rate"],
                                                               text_as_categories=True)
    for column in ("judge", "profile_id"):
        assert isinstance(read[column].dtype, pd.CategoricalDtype)
        categories = list(read[column].cat.categories)
        assert categories == sorted({row[column] for row in rows if row[column] is not None})
        expected = [row[column] for row in rows]
        assert [None if pd.isna(value) else value for value in read[column].astype(object)] == expected
    assert read["rate"].tolist() == [row["rate"] for row in rows]


def test_the_column_check_streams_and_notes_an_unreadable_table(tmp_path: Path):
    paths = RunPaths(tmp_path)
    paths.metrics("safety").parent.mkdir(parents=True)
    paths.metrics("safety").write_text("judge,suicide_screened,risk_under\n" + "j,1,0\n" * 30, encoding="utf-8")
    notes: list[str] = []
    tables = MetricTables(paths, ["safety", "diagnosis"], notes)
    assert has_columns(tables, "safety", ("suicide_screened", "risk_under"))
    assert not has_columns(tables, "safety", ("suicide_screened", "risk_level_exact"))
    assert not has_columns(tables, "diagnosis", ("judge",))  # no such file
    paths.metrics("diagnosis").write_text("judge,x\n" + "j,1\n" * 3 + "\"j,1\n", encoding="utf-8")  # a quote left open
    tables = MetricTables(paths, ["diagnosis"], notes)
    assert not tables.has_columns("diagnosis", ("judge",), rows=2)
    assert notes == ["metrics/diagnosis.csv is unreadable (ParserError); left out"] and "diagnosis" not in tables
    assert has_columns({"safety": pd.DataFrame({"a": [1]})}, "safety", ("a",))
