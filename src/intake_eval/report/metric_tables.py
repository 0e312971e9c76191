"""The metrics tables the report reads, each read from disk when a section first asks for it.

A table is metrics/<name>.parquet when that file is there (the long tables: a row per conversation ×
judge or more; their CSV is absent once it no longer fits a spreadsheet), else metrics/<name>.csv.
Small tables are kept once read; a long table (``LONG_TABLES``) is never kept: every ask reads it
again, and ``columns(name, wanted)`` reads only the columns a view needs, so the report holds no
per-conversation frame beyond the step that uses it. An unreadable table is left out with one note.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.store import RunPaths

BATCH_ROWS = 5_000  # rows of a long Parquet table converted to a DataFrame at a time (``column_batches``)
# Tables with a row per conversation × judge (or per label): read for each use, only the columns asked for.
LONG_TABLES = frozenset({"conversations", "safety", "diagnosis", "domain_events", "answers_by_conversation"})


def table_file(paths: RunPaths, name: str) -> Path | None:
    """metrics/<name>.parquet when present, else metrics/<name>.csv when present, else None."""
    csv = paths.metrics(name)
    parquet = csv.with_suffix(".parquet")
    return parquet if parquet.exists() else csv if csv.exists() else None


class MetricTables(Mapping[str, Any]):
    """name → pandas DataFrame for every table of ``names`` the folder has (read on first access)."""

    def __init__(self, paths: RunPaths, names: Iterable[str], notes: list[str]) -> None:
        self._paths = paths
        self._files = {name: path for name in names if (path := table_file(paths, name)) is not None}
        self._kept: dict[str, Any] = {}
        self._unreadable: set[str] = set()
        self._notes = notes

    def __getitem__(self, name: str) -> Any:
        if name in self._kept:
            return self._kept[name]
        if name not in self._files or name in self._unreadable:
            raise KeyError(name)
        frame = self._read(name, None)
        if frame is None:
            raise KeyError(name)
        if name not in LONG_TABLES:
            self._kept[name] = frame
        return frame

    def columns(self, name: str, wanted: Iterable[str], *, text_as_categories: bool = False) -> Any:
        """Only ``wanted`` columns of a table (those it has), or None when the folder has no such table.
        ``text_as_categories``: text columns as pandas categoricals, their categories sorted (a code per row
        instead of a Python object: what a view grouping a long table by a few values needs)."""
        if name not in self._files or name in self._unreadable:
            return None
        frame = self._read(name, list(wanted), text_as_categories)
        if frame is None or not text_as_categories:
            return frame
        import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information

        for column in frame.columns:
            if frame[column].dtype == object or isinstance(frame[column].dtype, pd.CategoricalDtype):
                values = frame[column].astype("category")
                if all(isinstance(value, str) for value in values.cat.categories):
                    frame[column] = values.cat.reorder_categories(sorted(values.cat.categories))
        return frame

    def column_batches(self, name: str, wanted: Iterable[str], rows: int = BATCH_ROWS) -> Iterator[Any]:
        """Only ``wanted`` columns of a table, as DataFrames of at most ``rows`` rows in table order when
        the table is Parquet (a CSV comes whole: its column types are inferred from the whole file);
        nothing when the folder has no such table."""
        if name not in self._files or name in self._unreadable:
            return
        path = self._files[name]
        if path.suffix != ".parquet":
            frame = self._read(name, list(wanted))
            if frame is not None:
                yield frame
            return
        import pyarrow.parquet as parquet  # type: ignore[import-untyped]  # pyarrow ships no type information

        try:
            source = parquet.ParquetFile(path)
            present = set(source.schema_arrow.names)
            batches = source.iter_batches(batch_size=rows, columns=[column for column in wanted if column in present])
            for batch in batches:
                yield batch.to_pandas()
        except (ValueError, OSError) as exc:  # pyarrow's errors are ValueErrors
            self._unreadable.add(name)
            self._notes.append(f"metrics/{path.name} is unreadable ({exc.__class__.__name__}); left out")

    def has_columns(self, name: str, wanted: Iterable[str], rows: int = BATCH_ROWS) -> bool:
        """Whether the table is there, has every ``wanted`` column and reads to its end (as ``columns`` would:
        an unreadable table is left out with its note), read ``rows`` rows at a time: a section that only needs
        to know the columns are there holds no long table."""
        wanted = list(wanted)
        if name not in self._files or name in self._unreadable:
            return False
        path = self._files[name]
        if path.suffix == ".parquet":
            present: set[str] = set()
            for batch in self.column_batches(name, wanted, rows):
                present = set(batch.columns)
            return name not in self._unreadable and set(wanted) <= present
        import pandas as pd

        try:
            present = set(pd.read_csv(path, nrows=0).columns)
            reader = pd.read_csv(path, keep_default_na=True, usecols=[c for c in wanted if c in present], chunksize=rows)
            with reader:
                for _ in reader:
                    pass
        except (ValueError, OSError) as exc:  # as ``_read``: pandas' EmptyDataError/ParserError are ValueErrors
            self._unreadable.add(name)
            self._notes.append(f"metrics/{path.name} is unreadable ({exc.__class__.__name__}); left out")
            return False
        return set(wanted) <= present

    def _read(self, name: str, wanted: list[str] | None, text_as_categories: bool = False) -> Any:
        import pandas as pd

        path = self._files[name]
        try:
            if path.suffix == ".parquet":
                import pyarrow.parquet as parquet

                if wanted is not None:
                    present = set(parquet.read_schema(path).names)
                    wanted = [column for column in wanted if column in present]
                if text_as_categories and wanted is not None:
                    return _categorized(path, wanted)
                return parquet.read_table(path, columns=wanted).to_pandas()
            if wanted is not None:
                present = set(pd.read_csv(path, nrows=0).columns)
                wanted = [column for column in wanted if column in present]
            return pd.read_csv(path, keep_default_na=True, usecols=wanted, low_memory=False)
        except (ValueError, OSError) as exc:  # pandas' EmptyDataError/ParserError and pyarrow's errors are ValueErrors
            self._unreadable.add(name)
            self._notes.append(f"metrics/{path.name} is unreadable ({exc.__class__.__name__}); left out")
            return None

    def __contains__(self, name: object) -> bool:
        return name in self._files and name not in self._unreadable

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in self._files if name not in self._unreadable])

    def __len__(self) -> int:
        return len(self._files) - len(self._unreadable)


def _categorized(path: Path, wanted: list[str]) -> Any:
    """``wanted`` columns of a Parquet file, its text columns as categoricals with sorted categories, read
    ``BATCH_ROWS`` rows at a time: a code per row is held, never the rows' strings nor the whole Arrow table.
    Text columns are read as Arrow dictionaries (no string object per row) and each batch is folded into the
    column's categorical so far at once, so only the distinct values are ever held as strings."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as parquet
    from pandas.api.types import union_categoricals  # type: ignore[import-untyped]  # pandas ships no type information

    texts = [field.name for field in parquet.read_schema(path) if field.name in wanted and pa.types.is_string(field.type)]
    source = parquet.ParquetFile(path, read_dictionary=texts)
    folded: dict[str, Any] = {}  # text column → its categorical so far
    numbers: dict[str, list[Any]] = {column: [] for column in wanted if column not in texts}
    for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
        frame = batch.to_pandas()
        for column in wanted:
            if column not in texts:
                numbers[column].append(frame[column])
                continue
            part = frame[column].astype("category").array
            folded[column] = union_categoricals([folded[column], part]) if column in folded else part
    if not folded and not any(numbers.values()):
        return source.schema_arrow.empty_table().select(wanted).to_pandas()
    return pd.DataFrame({column: pd.Series(folded[column].reorder_categories(sorted(folded[column].categories)))
                         if column in texts else pd.concat(numbers[column], ignore_index=True) for column in wanted})


def has_columns(tables: Mapping[str, Any], name: str, wanted: Iterable[str]) -> bool:
    """Whether ``tables`` has a readable table ``name`` with every ``wanted`` column (``MetricTables.has_columns``
    when ``tables`` reads lazily, else the table as held)."""
    if isinstance(tables, MetricTables):
        return tables.has_columns(name, wanted)
    table = tables.get(name)
    return table is not None and all(column in table.columns for column in wanted)


def read_columns(tables: Mapping[str, Any], name: str, wanted: Iterable[str], *, text_as_categories: bool = False) -> Any:
    """Only ``wanted`` columns of a table when ``tables`` reads lazily (``MetricTables``; ``text_as_categories``:
    see ``MetricTables.columns``), else the table as held (a plain mapping of frames, as tests build); None when
    there is no such table."""
    if isinstance(tables, MetricTables):
        return tables.columns(name, wanted, text_as_categories=text_as_categories)
    return tables.get(name)
