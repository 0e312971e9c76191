"""Keyed tables kept in a private SQLite file instead of Python objects, so a command's memory stays flat
in the number of conversations, profiles or judgments it walks.

Where the file goes: ``SpillStore(name, parent)`` makes a private hidden folder
``.intake-eval-<name>.<host>.<pid>.*`` inside ``parent``, the output folder the command is writing — the
run's metrics/ for the metrics pass, its report/ for the report, the export's staging folder for ``export`` —
because a spill is as large as the rows it holds and the system temporary folder may be memory (tmpfs). Only a reader that writes nothing in the run
folder (``status``) passes ``parent=None`` and spills to the system temporary folder.
The folder is removed by ``SpillStore.close``, when the store is garbage-collected, or at the latest when the
process exits — never by a forked worker, whose parent still owns it — and ``parent`` too when the store made it
and it is still empty. A folder left by a process killed outright is removed by the next store made in the same
``parent`` on the same host (``sweep_stale``: its process no longer runs).

A forked process (the report's shard workers) opens its own connection on first use, since a SQLite
connection must not cross a fork; ``SpillStore.commit`` writes every table's pending rows before anything
forks. A connection may be used from another thread of its process (never two threads at once).

Table kinds, each one table of the store:
- ``SpilledRows``: text key → any picklable value (pickle gives back exactly what was put: floats to the
  last bit, lone surrogates, tuples), with an optional text ``group`` beside each key. Dict semantics: the
  latest ``put`` of a key wins and the key keeps the position of its first ``put`` (a key removed and put
  again moves to the end). Iteration is in first-put order (``items``, ``values``, iterating the mapping),
  in key order (``sorted_items``, ``sorted_values``) or in (group, key) order (``grouped_items``).
- ``SpilledLocations``: text key → (file number, byte offset, length) of a record, in first-put order.
- ``SpilledSet``: a set of text keys, in first-add order or in key order (``sorted_keys``).
Key order is Python's ``str`` order (SQLite compares UTF-8 bytes, which orders as code points do). A key of
several text parts is joined by ``key_of``, so the joined keys sort as the tuples of parts would.
Writes wait in a batch of ``BATCH`` rows per table and go to the file together; lookups see pending rows.
A table made with ``read_ahead`` serves lookups that walk it in its first-put order (a pass over judgments
looking up the conversations, in the order they were read) ``AHEAD`` rows at a time: a lookup whose row lies
just past the previous one's fetches the rows after it too, so the next lookups ask no SQL; a write drops what
was read ahead. What stays in memory is each table's pending batch, its rows read ahead (at most ``AHEAD``)
and SQLite's bounded page cache, whatever the row count.
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

BATCH = 1_000  # rows a table holds before they go to the file (more saves no time, costs memory)
AHEAD = 256  # rows read past a looked-up row when lookups walk the table in its order
_PAGE_CACHE_KIB = 8192  # SQLite's page cache per connection: the memory the rows cost, whatever their number
_PART = "\x00"  # joins a key's parts; sorts before every other character, so joined keys sort as tuples
_REMOVED = None  # a pending entry that deletes its key


def key_of(*parts: str) -> str:
    """One text key for a tuple of text parts, ordered as the tuples are (no part holds a NUL character)."""
    return _PART.join(parts)


def parts_of(key: str) -> tuple[str, ...]:
    return tuple(key.split(_PART))


def _remove_folder(folder: Path, creator: int, made_parent: bool) -> None:
    if os.getpid() != creator:  # never from a forked worker: the folder is its parent's
        return
    shutil.rmtree(folder, ignore_errors=True)
    if made_parent:  # an output folder made only to spill in (a report that failed early) is not left behind
        try:
            folder.parent.rmdir()
        except OSError:  # it holds something now
            pass


def _this_host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def _folder_prefix(name: str) -> str:
    """``.intake-eval-<name>.<host>.<pid>.``: whose folder it is, so that a later store can tell a dead one's."""
    return f".intake-eval-{name}.{_this_host()}.{os.getpid()}."


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_stale(parent: Path) -> None:
    """Remove the spill folders in ``parent`` left by a process of this host that no longer runs (one killed
    with SIGKILL cannot remove its own): a spill is as large as the rows it held."""
    host = _this_host()
    for folder in parent.glob(".intake-eval-*"):
        fields = folder.name.rsplit(".", 3)  # [".intake-eval-<name>", host, pid, random]
        if len(fields) != 4 or fields[1] != host or not fields[2].isdigit():
            continue
        if int(fields[2]) != os.getpid() and not _running(int(fields[2])):
            shutil.rmtree(folder, ignore_errors=True)


def spill_folder(name: str, parent: Path | None) -> Path:
    """A new private hidden folder ``.intake-eval-<name>.<host>.<pid>.*`` in ``parent`` (made if missing; the
    system temporary folder for None), after removing the ones dead processes left there (``sweep_stale``).
    The caller removes it; ``SpillStore`` does for its own."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(parent)
    return Path(tempfile.mkdtemp(prefix=_folder_prefix(name), dir=parent))


class SpillStore:
    """One private folder holding one SQLite file with every table spilled into it (see the module docstring)."""

    def __init__(self, name: str, parent: Path | None) -> None:
        made_parent = parent is not None and not parent.exists()
        self._folder = spill_folder(name, parent)
        self._removal = weakref.finalize(self, _remove_folder, self._folder, os.getpid(), made_parent)
        self.path = self._folder / "spill.sqlite"
        self._connection: sqlite3.Connection | None = None
        self._inherited: list[sqlite3.Connection] = []  # a parent's connection, never used nor closed after a fork
        self._owner = os.getpid()
        self._tables: list[weakref.ref[_SpilledTable]] = []

    def connection(self) -> sqlite3.Connection:
        """This process's connection (a forked worker opens its own); autocommit, writes batched by the tables."""
        if self._connection is None or self._owner != os.getpid():
            if self._connection is not None:
                self._inherited.append(self._connection)
            self._owner = os.getpid()
            self._connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{_PAGE_CACHE_KIB}",
                           "temp_store=FILE"):
                self._connection.execute(f"PRAGMA {pragma}")
        return self._connection

    def new_table(self, table: _SpilledTable, columns: str) -> str:
        """Create a table ``key TEXT PRIMARY KEY, <columns>`` for ``table`` and return its name."""
        self._tables.append(weakref.ref(table))
        name = f"t{len(self._tables)}"
        self.connection().execute(f"CREATE TABLE {name} (key TEXT PRIMARY KEY NOT NULL{columns})")
        return name

    def commit(self) -> None:
        """Write every table's pending rows (before a fork: the workers read the file, not this memory)."""
        for reference in self._tables:
            table = reference()
            if table is not None:
                table.flush()

    def close(self) -> None:
        """Remove the folder (also done when the store is garbage-collected or the process exits)."""
        if self._connection is not None and self._owner == os.getpid():
            self._connection.close()
        self._connection = None
        self._removal()


class _SpilledTable:
    """One table of ``store`` keyed by text, rows in first-put order (rowid); writes wait in ``_pending``
    (key → column values, or ``_REMOVED``) until ``BATCH`` of them or a read that walks the table."""

    _COLUMNS: tuple[str, ...] = ()
    _DECLARED = ""  # the value columns' SQL declarations, each with a leading comma

    def __init__(self, store: SpillStore, read_ahead: bool = False) -> None:
        self._store = store
        self._read_ahead = read_ahead
        self._table = store.new_table(self, self._DECLARED)
        self._pending: dict[str, tuple[Any, ...] | None] = {}
        self._moved: set[str] = set()  # pending keys removed and then put again: they take a new position
        self._on_file = False  # whether any row went to the file (a lookup in a table never written asks no SQL)
        self._ahead: dict[str, tuple[Any, ...]] = {}  # rows on file read past the last looked-up one, by key
        self._last_found = -AHEAD - 2  # the rowid of the last row a lookup read from the file
        names = ", ".join(("key", *self._COLUMNS))
        marks = ", ".join("?" * (1 + len(self._COLUMNS)))
        update = ", ".join(f"{column} = excluded.{column}" for column in self._COLUMNS)
        self._upsert = (f"INSERT INTO {self._table} ({names}) VALUES ({marks}) ON CONFLICT (key) DO "
                        + (f"UPDATE SET {update}" if update else "NOTHING"))
        values = ", ".join(self._COLUMNS) or "1"
        self._select_one = f"SELECT rowid, {values} FROM {self._table} WHERE key = ?"
        self._select_after = f"SELECT key, {values} FROM {self._table} WHERE rowid > ? ORDER BY rowid LIMIT {AHEAD}"

    def _query(self, sql: str, parameters: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self._store.connection().execute(sql.replace("{table}", self._table), parameters)

    def _write(self, key: str, values: tuple[Any, ...]) -> None:
        self._ahead.pop(key, None)  # what was read ahead of it is no longer its row
        if key in self._pending and self._pending[key] is _REMOVED:
            self._moved.add(key)  # as in a dict, a key removed and put again goes last
            del self._pending[key]
        self._pending[key] = values
        if len(self._pending) >= BATCH:
            self.flush()

    def discard(self, key: str) -> None:
        """Forget ``key`` if it is there."""
        self._ahead.pop(key, None)
        self._moved.discard(key)
        self._pending[key] = _REMOVED
        if len(self._pending) >= BATCH:
            self.flush()

    def _stored(self, key: object) -> tuple[Any, ...] | None:
        """The key's column values, pending or on file; None when absent."""
        if not isinstance(key, str):
            return None
        if key in self._pending:
            return self._pending[key]
        if not self._on_file:
            return None
        ahead = self._ahead.get(key)
        if ahead is not None:
            return ahead
        connection = self._store.connection()
        found = connection.execute(self._select_one, (key,)).fetchone()
        if found is None:
            return None
        rowid, values = found[0], tuple(found[1:])
        if self._read_ahead and 0 < rowid - self._last_found <= AHEAD + 1:  # walking the table in its order
            self._ahead = {row[0]: tuple(row[1:]) for row in connection.execute(self._select_after, (rowid,))}
        self._last_found = rowid
        return values

    def flush(self) -> None:
        if not self._pending:
            return
        gone = [(key,) for key, values in self._pending.items() if values is _REMOVED or key in self._moved]
        kept = [(key, *values) for key, values in self._pending.items() if values is not _REMOVED]
        connection = self._store.connection()
        connection.execute("BEGIN")
        connection.executemany(f"DELETE FROM {self._table} WHERE key = ?", gone).close()
        connection.executemany(self._upsert, kept).close()
        connection.execute("COMMIT")
        self._on_file = self._on_file or bool(kept)
        self._pending, self._moved = {}, set()
        self._ahead = {}  # read while those rows were pending: the file has changed under them

    def __iter__(self) -> Iterator[str]:
        self.flush()
        return (key for (key,) in self._query("SELECT key FROM {table} ORDER BY rowid"))

    def __len__(self) -> int:
        self.flush()
        return int(self._query("SELECT COUNT(*) FROM {table}").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        return self._stored(key) is not None

    def sorted_keys(self) -> Iterator[str]:
        self.flush()
        return (key for (key,) in self._query("SELECT key FROM {table} ORDER BY key"))


class SpilledRows(_SpilledTable, MutableMapping[str, Any]):
    """key → any picklable value, with an optional text group per key (read back afresh on each access:
    change a row by putting it again)."""

    _COLUMNS = ("grp", "body")
    _DECLARED = ", grp TEXT NOT NULL, body BLOB NOT NULL"

    def __init__(self, store: SpillStore, read_ahead: bool = False) -> None:
        super().__init__(store, read_ahead)
        self._own_store = False

    @classmethod
    def alone(cls, name: str, parent: Path | None, read_ahead: bool = False) -> SpilledRows:
        """Rows in a store of their own, removed with them by ``close`` (see the module docstring for ``parent``
        and ``read_ahead``)."""
        rows = cls(SpillStore(name, parent), read_ahead)
        rows._own_store = True
        return rows

    def put(self, key: str, value: Any, group: str = "") -> None:
        self._write(key, (group, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))

    def __setitem__(self, key: str, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.discard(key)

    def __getitem__(self, key: str) -> Any:
        found = self._stored(key)
        if found is None:
            raise KeyError(key)
        return pickle.loads(found[1])

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]  # one query, not one per key
        self.flush()
        return ((key, pickle.loads(body)) for key, body in self._query("SELECT key, body FROM {table} ORDER BY rowid"))

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        self.flush()
        return (pickle.loads(body) for (body,) in self._query("SELECT body FROM {table} ORDER BY rowid"))

    def sorted_items(self) -> Iterator[tuple[str, Any]]:
        """(key, value) in sorted key order (``sorted(mapping)``'s order)."""
        self.flush()
        return ((key, pickle.loads(body)) for key, body in self._query("SELECT key, body FROM {table} ORDER BY key"))

    def sorted_values(self) -> Iterator[Any]:
        return (value for _key, value in self.sorted_items())

    def grouped_items(self) -> Iterator[tuple[str, str, Any]]:
        """(group, key, value) in (group, key) order."""
        self.flush()
        rows = self._query("SELECT grp, key, body FROM {table} ORDER BY grp, key")
        return ((group, key, pickle.loads(body)) for group, key, body in rows)

    def close(self) -> None:
        """Forget the pending rows; rows made by ``alone`` remove their store too."""
        self._pending, self._moved, self._ahead = {}, set(), {}
        if self._own_store:
            self._store.close()


class SpilledLocations(_SpilledTable, Mapping[str, tuple[int, int, int]]):
    """key → (file number, byte offset, length) of a record; setting a key again moves it to the later record."""

    _COLUMNS = ("file", "offset", "length")
    _DECLARED = ", file INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL"

    def __setitem__(self, key: str, at: tuple[int, int, int]) -> None:
        self._write(key, tuple(at))

    def __getitem__(self, key: str) -> tuple[int, int, int]:
        found = self._stored(key)
        if found is None:
            raise KeyError(key)
        return int(found[0]), int(found[1]), int(found[2])


class SpilledSet(_SpilledTable):
    """A set of text keys (iterated in first-add order; ``sorted_keys`` in key order)."""

    def add(self, key: str) -> None:
        if key not in self._pending or self._pending[key] is _REMOVED:
            self._write(key, ())
