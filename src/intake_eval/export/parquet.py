"""Parquet writing with pyarrow, in row-group batches, so memory stays one batch whatever the run's size.

pyarrow comes with the ``export`` extra and is imported on first use (``import intake_eval`` and
``--help`` stay light); without it the export stops with one line saying how to install it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.export.columns import Table

BATCH_ROWS = 50_000  # one row group; a batch of turn rows with their texts is tens of MB at most
CSV_BLOCK_BYTES = 64 << 20  # column types are inferred from the first block: a small table is read whole
COMPRESSION = "zstd"
INSTALL_HINT = "pip install 'intake-eval[export]'"


def pyarrow_modules() -> tuple[Any, Any, Any]:
    """(pyarrow, pyarrow.parquet, pyarrow.csv), or one line saying how to install them."""
    try:
        import pyarrow  # type: ignore[import-untyped]  # pyarrow ships no type information
        import pyarrow.csv  # type: ignore[import-untyped]  # pyarrow ships no type information
        import pyarrow.parquet  # type: ignore[import-untyped]  # pyarrow ships no type information
    except ImportError:
        raise IntakeEvalError(f"export needs pyarrow, which is not installed; install it with: "
                              f"{INSTALL_HINT}") from None
    return pyarrow, pyarrow.parquet, pyarrow.csv


def _arrow_type(pa: Any, name: str) -> Any:
    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(), "float64": pa.float64(),
             "strings": pa.list_(pa.string())}
    return types[name]


def arrow_schema(table: Table) -> Any:
    pa, _parquet, _csv = pyarrow_modules()
    return pa.schema([pa.field(column.name, _arrow_type(pa, column.type)) for column in table.columns])


def _batches(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, BATCH_ROWS)):
        yield batch


def write_rows(path: Path, table: Table, rows: Iterable[dict[str, Any]]) -> int:
    """Write ``rows`` (dicts; a missing column is null) as one Parquet file; the number of rows written."""
    pa, parquet, _csv = pyarrow_modules()
    schema = arrow_schema(table)
    written = 0
    with parquet.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        for batch in _batches(rows):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            written += len(batch)
    return written


def _csv_reader(source: Path) -> Any:
    """A streaming reader whose column types come from the first block; a column empty there (an undefined
    turn metric in the first rows) is read as text, so a value in a later block cannot break the stream."""
    pa, _parquet, csv = pyarrow_modules()
    read_options = csv.ReadOptions(block_size=CSV_BLOCK_BYTES)
    convert = csv.ConvertOptions(strings_can_be_null=True)  # an empty cell is an undefined value, as pandas reads it
    first = csv.open_csv(source, read_options=read_options, convert_options=convert)
    convert.column_types = {field.name: pa.string() for field in first.schema if pa.types.is_null(field.type)}
    first.close()
    return csv.open_csv(source, read_options=read_options, convert_options=convert)


def copy_csv(source: Path, path: Path) -> tuple[int, Any]:
    """A metrics CSV as Parquet, streamed block by block; (rows, arrow schema)."""
    _pa, parquet, _csv = pyarrow_modules()
    written = 0
    reader = _csv_reader(source)
    with parquet.ParquetWriter(path, reader.schema, compression=COMPRESSION) as writer:
        for batch in reader:
            writer.write_batch(batch)
            written += batch.num_rows
    return written, reader.schema


def copy_parquet(source: Path, path: Path) -> tuple[int, Any]:
    """A metrics Parquet file rewritten batch by batch (its schema and rows as they are); (rows, schema)."""
    _pa, parquet, _csv = pyarrow_modules()
    reader = parquet.ParquetFile(source)
    written = 0
    with parquet.ParquetWriter(path, reader.schema_arrow, compression=COMPRESSION) as writer:
        for batch in reader.iter_batches(batch_size=BATCH_ROWS):
            writer.write_batch(batch)
            written += batch.num_rows
    return written, reader.schema_arrow
