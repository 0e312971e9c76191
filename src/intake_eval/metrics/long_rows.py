"""Reading a long metrics table (a row per conversation × judge) back, row by row, as its CSV spells it.

The tables computed from metrics/conversations (styles, capacity gap, trials) read its cells as the CSV
writes them (core/numbers.csv_cell: floats to six significant digits), so what they compute is the same
whichever file holds the table. metrics/<name>.csv is read while it is there; past the spreadsheet limit
only metrics/<name>.parquet is written, and its values are read in batches and spelled by ``csv_cell``.
Only the columns asked for are kept, so a reader holds a few fields per row, or one batch.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

from intake_eval.core.numbers import csv_cell

BATCH_ROWS = 50_000


def table_columns(csv_path: Path) -> list[str] | None:
    """The table's columns (from the CSV, else the Parquet file), or None when neither file is there."""
    if csv_path.exists():
        with open(csv_path, newline="", encoding="utf-8") as handle:
            return list(next(csv.reader(handle), []))
    parquet = csv_path.with_suffix(".parquet")
    if parquet.exists():
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type information

        return list(pq.read_schema(parquet).names)
    return None


def table_exists(csv_path: Path) -> bool:
    return csv_path.exists() or csv_path.with_suffix(".parquet").exists()


def iter_rows(csv_path: Path, columns: Sequence[str] | None = None) -> Iterator[dict[str, str]]:
    """Each row as {column: cell text} (only ``columns`` the table has, when given), in the table's order."""
    if csv_path.exists():
        with open(csv_path, newline="", encoding="utf-8") as handle:
            for raw in csv.DictReader(handle):
                yield raw if columns is None else {name: raw[name] for name in columns if name in raw}
        return
    import pyarrow.parquet as pq

    source = pq.ParquetFile(csv_path.with_suffix(".parquet"))
    present = source.schema_arrow.names
    wanted = present if columns is None else [name for name in columns if name in present]
    for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
        for row in batch.to_pylist():
            yield {name: str(csv_cell(value)) for name, value in row.items()}
