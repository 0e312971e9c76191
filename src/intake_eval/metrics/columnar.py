"""A long metrics table streamed to Parquet in row groups, the latest rows per key winning; and reading
such a table back as numpy columns.

pyarrow writes the row groups (imported on first use, so ``import intake_eval`` and ``--help`` stay light).
Rows arrive grouped by a key (one judgment's labels, one conversation's events); when a key arrives again (a
later line of an uncompacted record file supersedes an earlier one) the earlier rows are dropped when the
file is closed. Memory is one row group plus 16 bytes of key digest and a row count per key (no Python
object per key), whatever the table's size. The file is written beside its target and moved into place on
``close``, so a failed pass leaves the old one. ``flush`` ends a row group early: a writer that flushes where
its input changes arm (judge, clinician) lets a reader fetch one arm's row groups alone (``read_columns``
with a filter skips the others by their statistics).
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROW_GROUP_ROWS = 100_000
COMPRESSION = "zstd"
_DIGEST_BYTES = 16  # a key's digest: collisions are out of reach (2^-64 at 10^10 keys)


def parquet_path(csv_path: Path) -> Path:
    """metrics/<name>.parquet beside metrics/<name>.csv."""
    return csv_path.with_suffix(".parquet")


def _pyarrow() -> tuple[Any, Any]:
    import pyarrow  # type: ignore[import-untyped]  # pyarrow ships no type information
    import pyarrow.compute  # type: ignore[import-untyped]  # pyarrow ships no type information
    import pyarrow.parquet  # type: ignore[import-untyped]  # pyarrow ships no type information

    return pyarrow, pyarrow.parquet


def _key_digest(key: Hashable) -> bytes:
    return hashlib.blake2b(repr(key).encode("utf-8"), digest_size=_DIGEST_BYTES).digest()


class ParquetRows:
    """Rows (tuples in ``columns`` order) streamed to ``path``; ``types`` names the non-text columns
    (int64, float64, bool); ``row_group_rows``: rows held before a row group is written (wide rows: fewer)."""

    def __init__(self, path: Path, columns: Sequence[str], types: Mapping[str, str],
                 row_group_rows: int = ROW_GROUP_ROWS, head_columns: int = 0) -> None:
        """``head_columns``: how many leading columns each ``add`` gives once for all its rows (``add``'s ``head``)."""
        pa, _parquet = _pyarrow()
        kinds = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
        self._schema = pa.schema([pa.field(name, kinds[types[name]] if name in types else pa.string())
                                  for name in columns])
        self._path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._row_group_rows = row_group_rows
        self._writer: Any = None
        self._head_columns = head_columns
        self._pending: list[tuple] = []  # rows, or with head columns each row's cells after its head
        self._heads: list[tuple] = []  # with head columns: each add's head (adds with rows only)
        self._head_rows = array("q")  # rows of each of those heads
        self._digests = bytearray()  # one digest per add, in order
        self._lengths = array("q")  # rows of each add
        self._next_row = 0

    def add(self, key: Hashable, rows: Sequence[tuple], head: tuple = ()) -> None:
        """``key``'s rows; with ``head_columns``, ``head`` holds those columns' cells, shared by every row, and
        each row the cells after them (a shared cell is converted to Arrow once, not once per row)."""
        if len(head) != self._head_columns:
            raise ValueError(f"{self._path.name}: a head of {len(head)} cells, not {self._head_columns}")
        self._digests += _key_digest(key)
        self._lengths.append(len(rows))
        self._next_row += len(rows)
        if self._head_columns and rows:
            self._heads.append(head)
            self._head_rows.append(len(rows))
        self._pending.extend(rows)
        if len(self._pending) >= self._row_group_rows:
            self.flush()

    def flush(self) -> None:
        """Write what is pending as a row group (nothing when nothing is)."""
        if self._pending or self._writer is None:
            self._write_pending()

    def _write_pending(self) -> None:
        pa, parquet = _pyarrow()
        if self._writer is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = parquet.ParquetWriter(self._tmp, self._schema, compression=COMPRESSION)
        self._writer.write_table(pa.Table.from_arrays([*self._head_arrays(), *self._tail_arrays()],
                                                      schema=self._schema))
        self._pending = []
        self._heads = []
        self._head_rows = array("q")

    def _tail_arrays(self) -> list[Any]:
        """The pending rows' columns after the head columns (all of them without), an Arrow array each."""
        pa, _parquet = _pyarrow()
        fields = list(self._schema)[self._head_columns:]
        columns: list[Sequence[Any]] = list(zip(*self._pending)) if self._pending else [() for _ in fields]
        return [pa.array(column, type=field.type) for column, field in zip(columns, fields)]

    def _head_arrays(self) -> list[Any]:
        """The head columns: each head's cells converted once, then repeated for its rows."""
        import numpy as np

        if not self._head_columns:
            return []
        pa, _parquet = _pyarrow()
        fields = list(self._schema)[:self._head_columns]
        columns: list[Sequence[Any]] = list(zip(*self._heads)) if self._heads else [() for _ in fields]
        rows = np.repeat(np.arange(len(self._heads), dtype=np.int64), np.frombuffer(self._head_rows, dtype=np.int64))
        return [pa.array(column, type=field.type).take(pa.array(rows)) for column, field in zip(columns, fields)]

    def close(self) -> Path:
        """Write what is pending, drop superseded rows, move the file into place; its path."""
        try:
            self.flush()
            self._writer.close()
            keep = self._kept_rows()
            if keep is not None:
                self._drop_superseded(keep)
            os.replace(self._tmp, self._path)
        except BaseException:
            self.discard()
            raise
        return self._path

    def _kept_rows(self) -> Any:
        """A row mask keeping each key's latest rows, or None when no key came twice."""
        import numpy as np

        digests = np.frombuffer(bytes(self._digests), dtype=f"S{_DIGEST_BYTES}")
        _unique, last_from_end = np.unique(digests[::-1], return_index=True)
        if len(_unique) == len(digests):
            return None
        latest = np.zeros(len(digests), dtype=bool)
        latest[len(digests) - 1 - last_from_end] = True
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        return np.repeat(latest, lengths)

    def _drop_superseded(self, keep: Any) -> None:
        pa, parquet = _pyarrow()
        filtered = self._tmp.with_name(self._tmp.name + ".kept")
        source = parquet.ParquetFile(self._tmp)
        first = 0
        with parquet.ParquetWriter(filtered, self._schema, compression=COMPRESSION) as writer:
            for index in range(source.num_row_groups):  # one row group in, one out: arms stay apart
                group = source.read_row_group(index)
                writer.write_table(group.filter(pa.array(keep[first:first + group.num_rows])))
                first += group.num_rows
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


def read_columns(path: Path, columns: Sequence[str], where: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Columns of a Parquet table as numpy arrays (text as object arrays, a nullable number as float with
    NaN, or as object when ``None`` must survive); ``where``: column = value filters (row groups whose
    statistics rule a value out are not read)."""
    filters = [(name, "=", value) for name, value in (where or {}).items()]
    table = read_table(path, columns, filters)
    return {name: numpy_column(table.column(name)) for name in columns}


def numpy_column(column: Any) -> Any:
    """One Arrow column as ``read_columns`` gives it."""
    import numpy as np

    pa, _parquet = _pyarrow()
    if pa.types.is_string(column.type):
        # one Python string per distinct value, shared by every row holding it
        encoded = column.combine_chunks().dictionary_encode()
        values = np.array([*encoded.dictionary.to_pylist(), None], dtype=object)
        return values[encoded.indices.fill_null(len(values) - 1).to_numpy()]
    if column.null_count:
        return np.array(column.to_pylist(), dtype=object)  # None stays None (an undefined value)
    return column.to_numpy()


def conversation_ranges(path: Path, where: Mapping[str, Any], rows: int | None = None) -> list[list[tuple]]:
    """Filters cutting ``where``'s rows into ranges of conversation ids of at most ``rows`` (``PART_ROWS``) rows
    of this table (the ranges cover every id, so other tables read with the same filters split alike)."""
    conditions = [(name, "=", value) for name, value in where.items()]
    return list(_ranges(path, ("", "conversation_id"), None, conditions, split=True, rows=rows))


def row_count(path: Path) -> int:
    _pa, parquet = _pyarrow()
    return int(parquet.ParquetFile(path).metadata.num_rows)


def distinct(path: Path, columns: Sequence[str]) -> list[tuple]:
    """The distinct value tuples of ``columns``, sorted."""
    values = read_columns(path, columns)
    return sorted(set(zip(*(values[name].tolist() for name in columns))))


PART_ROWS = 50_000  # rows of a long table sorted in memory at a time


def sorted_rows(path: Path, columns: Sequence[str], order: Sequence[str], part: str | None = None,
                where: Mapping[str, Any] | None = None, chunk: int = 10_000,
                filters: Sequence[tuple] | None = None) -> Iterator[tuple]:
    """The table's rows (tuples in ``columns`` order, Python values) sorted by ``order`` (a stable sort).
    ``where``: column = value filters (one arm); ``part``: read one value of that column (``order``'s first)
    at a time, and a value's rows in ranges of ``order``'s second column of at most ``PART_ROWS`` rows. Only
    that range's columns are held, as Arrow arrays (text other than ``order``'s dictionary-encoded, so a
    value shared by many rows is held once); rows become Python values ``chunk`` at a time."""
    pa, parquet = _pyarrow()
    conditions = [*((name, "=", value) for name, value in (where or {}).items()), *(filters or ())]
    wanted = list(dict.fromkeys([*columns, *order]))
    schema = parquet.read_schema(path)
    shared = [name for name in wanted if name not in order and pa.types.is_string(schema.field(name).type)]
    for piece in _ranges(path, order, part, conditions):
        table = read_table(path, wanted, piece, [name for name in shared if name not in {f[0] for f in piece}])
        indices = pa.compute.sort_indices(table, sort_keys=[(name, "ascending") for name in order])
        for start in range(0, table.num_rows, chunk):
            piece = table.take(indices.slice(start, chunk))
            yield from zip(*(_python_values(piece.column(name)) for name in columns))
        del table, indices


def _ranges(path: Path, order: Sequence[str], part: str | None, conditions: list[tuple],
            split: bool = False, rows: int | None = None) -> Iterator[list[tuple]]:
    """The filters of each piece ``sorted_rows`` reads, in ``order``: one per value of ``part`` (or, with
    ``split``, the rows ``conditions`` pick), split into ranges of ``order[1]`` (bounds from its sorted distinct
    values) when there are more rows."""
    import numpy as np

    if part is None and not split:
        yield conditions
        return
    values = [value for (value,) in distinct(path, [part])] if part is not None else [None]
    for value in values:
        these = [*conditions, (part, "=", value)] if part is not None else conditions
        if len(order) < 2:
            yield these
            continue
        column = read_table(path, [order[1]], these).column(order[1])
        keys = np.unique(column.to_numpy(zero_copy_only=False))
        pieces = max(1, -(-len(column) // (rows or PART_ROWS)))
        del column
        bounds = [keys[int(len(keys) * k / pieces)] for k in range(1, pieces)]
        lows: list[Any] = [None, *bounds]
        highs: list[Any] = [*bounds, None]
        for low, high in zip(lows, highs):
            yield [*these, *([(order[1], ">=", low)] if low is not None else []),
                   *([(order[1], "<", high)] if high is not None else [])]


def sorted_rows_of(path: Path, columns: Sequence[str], where: Mapping[str, Any] | None = None,
                   order: str = "conversation_id") -> Iterator[tuple]:
    """Rows (``where``: of one arm) as tuples of Python values in ``columns`` order, stably sorted by
    ``order`` (a conversation's rows keep theirs), from numpy columns."""
    import numpy as np

    values = read_columns(path, list(dict.fromkeys([*columns, order])), where)
    index = np.argsort(values[order], kind="stable")
    return zip(*(values[name][index].tolist() for name in columns))


def _python_values(column: Any) -> list[Any]:
    """A column as a list of Python values (None where null): through numpy where that is exact and faster."""
    import numpy as np

    pa, _parquet = _pyarrow()
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        values = np.array([*array.dictionary.to_pylist(), None], dtype=object)
        return list(values[array.indices.fill_null(len(values) - 1).to_numpy()].tolist())
    if not array.null_count and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)
                                 or pa.types.is_boolean(array.type)):
        return list(array.to_numpy(zero_copy_only=False).tolist())
    return list(array.to_pylist())


READ_BATCH_ROWS = 20_000  # rows decoded at a time when reading a table back


def read_table(path: Path, columns: Sequence[str], filters: Sequence[tuple], shared: Sequence[str] = ()) -> Any:
    """The rows of ``columns`` matching every (column, "=" | ">=" | "<", value) filter, read a batch at a time
    (row groups whose statistics rule the filters out are skipped), so reading holds one batch beside the
    rows kept: Arrow's dataset reader decodes many row groups ahead and keeps that memory. ``shared``: text
    columns read dictionary-encoded."""
    pa, parquet = _pyarrow()
    source = parquet.ParquetFile(path, read_dictionary=list(shared))
    names = source.schema_arrow.names
    groups = [index for index in range(source.num_row_groups)
              if _may_match(source.metadata.row_group(index), names, filters)]
    wanted = list(dict.fromkeys([*columns, *(name for name, _op, _value in filters)]))
    pieces = []
    for batch in source.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=groups, columns=wanted,
                                     use_threads=False):
        if filters:
            batch = batch.filter(_matches(batch, filters))
        pieces.append(batch.select(list(columns)))
    if pieces:
        return pa.Table.from_batches(pieces)
    return source.schema_arrow.empty_table().select(list(columns))


def _may_match(group: Any, names: list[str], filters: Sequence[tuple]) -> bool:
    for name, op, value in filters:
        statistics = group.column(names.index(name)).statistics
        if statistics is None or not statistics.has_min_max:
            continue
        low, high = statistics.min, statistics.max
        if (op == "=" and not low <= value <= high) or (op == ">=" and high < value) or (op == "<" and low >= value):
            return False
    return True


def _matches(batch: Any, filters: Sequence[tuple]) -> Any:
    pa, _parquet = _pyarrow()
    compute = pa.compute
    tests = {"=": compute.equal, ">=": compute.greater_equal, "<": compute.less}
    mask = None
    for name, op, value in filters:
        test = tests[op](batch.column(name), value)
        mask = test if mask is None else compute.and_(mask, test)
    return compute.fill_null(mask, False)
