"""A long metrics table streamed to Parquet in row groups, the latest rows per key winning.

pyarrow writes the row groups (imported on first use, so ``import intake_eval`` and ``--help`` stay light).
Rows arrive grouped by a key (one judgment's labels, one conversation's events); when a key arrives again (a
later line of an uncompacted record file supersedes an earlier one) the earlier rows are dropped when the
file is closed. Memory is one row group plus (first row, row count) per key, whatever the table's size. The
file is written beside its target and moved into place on ``close``, so a failed pass leaves the old one.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROW_GROUP_ROWS = 100_000
COMPRESSION = "zstd"


def parquet_path(csv_path: Path) -> Path:
    """metrics/<name>.parquet beside metrics/<name>.csv."""
    return csv_path.with_suffix(".parquet")


def _pyarrow() -> tuple[Any, Any]:
    import pyarrow  # type: ignore[import-untyped]  # pyarrow ships no type information
    import pyarrow.parquet  # type: ignore[import-untyped]  # pyarrow ships no type information

    return pyarrow, pyarrow.parquet


class ParquetRows:
    """Rows (tuples in ``columns`` order) streamed to ``path``; ``types`` names the non-text columns
    (int64, float64, bool)."""

    def __init__(self, path: Path, columns: Sequence[str], types: Mapping[str, str]) -> None:
        pa, _parquet = _pyarrow()
        kinds = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
        self._schema = pa.schema([pa.field(name, kinds[types[name]] if name in types else pa.string())
                                  for name in columns])
        self._path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._writer: Any = None
        self._pending: list[tuple] = []
        self._ranges: dict[Hashable, tuple[int, int]] = {}
        self._superseded: list[tuple[int, int]] = []
        self._next_row = 0

    def add(self, key: Hashable, rows: Sequence[tuple]) -> None:
        earlier = self._ranges.get(key)
        if earlier is not None:
            self._superseded.append(earlier)
        self._ranges[key] = (self._next_row, len(rows))
        self._next_row += len(rows)
        self._pending.extend(rows)
        if len(self._pending) >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        pa, parquet = _pyarrow()
        if self._writer is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = parquet.ParquetWriter(self._tmp, self._schema, compression=COMPRESSION)
        columns: list[Sequence[Any]] = list(zip(*self._pending)) if self._pending else [() for _ in self._schema.names]
        self._writer.write_table(pa.Table.from_arrays([pa.array(column, type=field.type)
                                                       for column, field in zip(columns, self._schema)],
                                                      schema=self._schema))
        self._pending = []

    def close(self) -> Path:
        """Write what is pending, drop superseded rows, move the file into place; its path."""
        try:
            self._flush()
            self._writer.close()
            if self._superseded:
                self._drop_superseded()
            os.replace(self._tmp, self._path)
        except BaseException:
            self.discard()
            raise
        return self._path

    def _drop_superseded(self) -> None:
        pa, parquet = _pyarrow()
        import numpy as np

        keep = np.ones(self._next_row, dtype=bool)
        for start, length in self._superseded:
            keep[start:start + length] = False
        filtered = self._tmp.with_name(self._tmp.name + ".kept")
        source = parquet.ParquetFile(self._tmp)
        first = 0
        with parquet.ParquetWriter(filtered, self._schema, compression=COMPRESSION) as writer:
            for batch in source.iter_batches(batch_size=ROW_GROUP_ROWS):
                mask = pa.array(keep[first:first + batch.num_rows])
                writer.write_table(pa.Table.from_batches([batch.filter(mask)], schema=self._schema))
                first += batch.num_rows
        os.replace(filtered, self._tmp)

    def discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001  # already failing; the file goes anyway
                pass
        for leftover in (self._tmp, self._tmp.with_name(self._tmp.name + ".kept")):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
