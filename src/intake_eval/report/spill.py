"""Many small keyed rows held in a temporary SQLite file instead of Python objects, read as Mappings.

The report keeps a slim summary per profile, conversation and judgment (``load.slim_*``) and where
each full record sits on disk. Held as Python objects those cost a few kB per conversation, so the
report's memory would grow with the run; here they live in one SQLite file in a private temporary
folder (removed by ``SpillStore.close``) and only SQLite's bounded page cache stays in memory.

``SpilledRows`` is key → row dict or other JSON value (stored as JSON, which gives back exactly the
dicts put in: str keys, str/int/float/bool/None values, lists; ASCII-escaped, so even a lone
surrogate read from a record survives); ``SpilledLocations`` is key → (file, offset, length);
``SpilledSet`` is a set of keys.
Both follow dict semantics: the latest ``put`` of a key wins, and the key keeps the position of its
first ``put`` (iteration is in first-put order, as a dict's). ``sorted_items`` walks rows by key in
Python's str order (SQLite compares the UTF-8 bytes, which orders like code points).

A forked process (the viewer's shard workers) opens its own connection on first use: a SQLite
connection must not cross a fork. Rows are committed by ``SpillStore.commit`` before anything forks.
The connection may be used from another thread of its process (a process pool's task feeder
iterating rows while the main thread waits; never two threads at once).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

_PAGE_CACHE_KIB = 8192  # SQLite's page cache per connection: the memory the rows cost, whatever their number


def _remove_folder(folder: Path, creator: int) -> None:
    if os.getpid() == creator:  # never from a forked worker: the folder is its parent's
        shutil.rmtree(folder, ignore_errors=True)


class SpillStore:
    """One temporary SQLite file holding every spilled table of a report (in the temporary folder, $TMPDIR);
    ``close`` removes it, as does garbage collection or the interpreter's exit when a caller forgot to."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="intake-eval-report-"))
        self._removal = weakref.finalize(self, _remove_folder, self._folder, os.getpid())
        self.path = self._folder / "rows.sqlite"
        self._connection: sqlite3.Connection | None = None
        self._inherited: list[sqlite3.Connection] = []  # a parent's connection, never used nor closed after a fork
        self._owner = os.getpid()
        self._tables = 0

    def connection(self) -> sqlite3.Connection:
        """This process's connection (a forked worker opens its own)."""
        if self._connection is None or self._owner != os.getpid():
            if self._connection is not None:
                self._inherited.append(self._connection)
            self._owner = os.getpid()
            self._connection = sqlite3.connect(self.path, check_same_thread=False)
            for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{_PAGE_CACHE_KIB}",
                           "temp_store=FILE"):
                self._connection.execute(f"PRAGMA {pragma}")
        return self._connection

    def new_table(self, columns: str) -> str:
        """Create a table ``key TEXT PRIMARY KEY, <columns>`` and return its name."""
        self._tables += 1
        name = f"t{self._tables}"
        self.connection().execute(f"CREATE TABLE {name} (key TEXT PRIMARY KEY NOT NULL, {columns})")
        return name

    def commit(self) -> None:
        if self._connection is not None and self._owner == os.getpid():
            self._connection.commit()

    def close(self) -> None:
        if self._connection is not None and self._owner == os.getpid():
            self._connection.close()
        self._connection = None
        self._removal()


class _SpilledTable:
    """Shared by both mappings: one table of ``store``, keyed by ``key`` in first-put order (rowid)."""

    def __init__(self, store: SpillStore, columns: str) -> None:
        self._store = store
        self._table = store.new_table(columns)

    def _query(self, sql: str, parameters: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self._store.connection().execute(sql.replace("{table}", self._table), parameters)

    def __iter__(self) -> Iterator[str]:
        return (key for (key,) in self._query("SELECT key FROM {table} ORDER BY rowid"))

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM {table}").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._query("SELECT 1 FROM {table} WHERE key = ?", (key,)).fetchone() is not None


class SpilledRows(_SpilledTable, MutableMapping[str, Any]):
    """key → row dict or other JSON value (read back afresh on each access: change a row by putting it again)."""

    def __init__(self, store: SpillStore) -> None:
        super().__init__(store, "body TEXT NOT NULL")

    def put(self, key: str, row: Any) -> None:
        self._query("INSERT INTO {table} (key, body) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET body = excluded.body",
                    (key, json.dumps(row, separators=(",", ":"))))

    def __setitem__(self, key: str, row: Any) -> None:
        self.put(key, row)

    def __delitem__(self, key: str) -> None:
        if self._query("DELETE FROM {table} WHERE key = ?", (key,)).rowcount == 0:
            raise KeyError(key)

    def __getitem__(self, key: str) -> Any:
        found = self._query("SELECT body FROM {table} WHERE key = ?", (key,)).fetchone() if isinstance(key, str) else None
        if found is None:
            raise KeyError(key)
        return json.loads(found[0])

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]  # one query, not one per key
        return ((key, json.loads(body)) for key, body in self._query("SELECT key, body FROM {table} ORDER BY rowid"))

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (json.loads(body) for (body,) in self._query("SELECT body FROM {table} ORDER BY rowid"))

    def sorted_items(self) -> Iterator[tuple[str, Any]]:
        """(key, row) in sorted key order (``sorted(mapping)``'s order)."""
        return ((key, json.loads(body)) for key, body in self._query("SELECT key, body FROM {table} ORDER BY key"))


class SpilledLocations(_SpilledTable, Mapping[str, tuple[int, int, int]]):
    """key → (file number, byte offset, length) of a record; setting a key again moves it to the later record."""

    def __init__(self, store: SpillStore) -> None:
        super().__init__(store, "file INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL")

    def __setitem__(self, key: str, at: tuple[int, int, int]) -> None:
        self._query("INSERT INTO {table} (key, file, offset, length) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE "
                    "SET file = excluded.file, offset = excluded.offset, length = excluded.length", (key, *at))

    def __getitem__(self, key: str) -> tuple[int, int, int]:
        found = (self._query("SELECT file, offset, length FROM {table} WHERE key = ?", (key,)).fetchone()
                 if isinstance(key, str) else None)
        if found is None:
            raise KeyError(key)
        return int(found[0]), int(found[1]), int(found[2])


class SpilledSet(_SpilledTable):
    """A set of str keys; ``sorted_keys`` walks them in sorted order."""

    def __init__(self, store: SpillStore) -> None:
        super().__init__(store, "unused INTEGER")

    def add(self, key: str) -> None:
        self._query("INSERT INTO {table} (key) VALUES (?) ON CONFLICT (key) DO NOTHING", (key,))

    def sorted_keys(self) -> Iterator[str]:
        return (key for (key,) in self._query("SELECT key FROM {table} ORDER BY key"))
