"""A long table read back row by row gives the same cells from its CSV as from its Parquet file (the CSV is
absent past a spreadsheet's size), so styles, capacity gap and trials compute the same from either."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from intake_eval.metrics.long_rows import iter_rows, table_columns, table_exists
from intake_eval.metrics.reading import write_csv

COLUMNS = ["conversation_id", "judge", "trial", "active_coverage_rate", "ok", "caught_domains"]
ROWS = [
    {"conversation_id": "p1.a.t0", "judge": "j", "trial": 0, "active_coverage_rate": 2 / 3, "ok": True,
     "caught_domains": "mania;ocd"},
    {"conversation_id": "p2.a.t1", "judge": "j", "trial": 1, "active_coverage_rate": None, "ok": False,
     "caught_domains": ""},
    {"conversation_id": "p3.a.t0", "judge": "k", "trial": 0, "active_coverage_rate": 1.0, "ok": True,
     "caught_domains": None},
]


def test_parquet_cells_read_as_the_csv_spells_them(tmp_path: Path):
    csv_path = write_csv(tmp_path / "csv" / "conversations.csv", COLUMNS, ROWS)
    parquet_only = tmp_path / "parquet" / "conversations.csv"
    parquet_only.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(ROWS), parquet_only.with_suffix(".parquet"))
    assert not parquet_only.exists() and table_exists(parquet_only)
    from_csv, from_parquet = list(iter_rows(csv_path)), list(iter_rows(parquet_only))
    assert from_csv == from_parquet
    assert from_csv[0]["active_coverage_rate"] == "0.666667" and from_csv[1]["active_coverage_rate"] == ""
    assert from_csv[0]["ok"] == "true"
    wanted = ["judge", "trial", "not_a_column"]
    assert list(iter_rows(csv_path, wanted)) == list(iter_rows(parquet_only, wanted)) == [
        {"judge": "j", "trial": "0"}, {"judge": "j", "trial": "1"}, {"judge": "k", "trial": "0"}]
    assert table_columns(csv_path) == table_columns(parquet_only) == COLUMNS
    assert table_columns(tmp_path / "none.csv") is None and not table_exists(tmp_path / "none.csv")
