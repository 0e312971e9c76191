"""A keyed store on disk for what the metrics pass looks up per conversation or judgment, so memory stays flat
in the number of conversations.

``DiskMap`` maps text keys to picklable values in a stdlib sqlite3 database inside a temporary folder of its
own — in the run's metrics/ folder when given (``parent``: the spill is as large as the records' rows, and a
system temporary folder may be memory), else the system's — removed by ``close``, when the map is
garbage-collected, or at the latest when the process exits.
Writes are buffered a batch at a time; a key written again replaces its value (the latest record wins, as
everywhere in the metrics). ``items()`` gives the entries in key order (text compared code point by code
point, as Python compares ``str``), so a caller that sorted a dict's keys gets the same order. A key made of
several parts joins them with ``key_of`` so that the joined keys sort as the tuples of parts would.
What is held in memory is the pending batch and sqlite's bounded page cache, whatever the number of keys.
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_BATCH = 5_000  # writes held before they go to the database
_PART = "\x00"  # joins a key's parts; sorts before every other character, so joined keys sort as tuples
_MISSING = object()


def _remove(db: sqlite3.Connection, folder: Path) -> None:
    db.close()
    shutil.rmtree(folder, ignore_errors=True)


def key_of(*parts: str) -> str:
    """One text key for a tuple of text parts, ordered as the tuples are (no part holds a NUL character)."""
    return _PART.join(parts)


def parts_of(key: str) -> tuple[str, ...]:
    return tuple(key.split(_PART))


class DiskMap:
    """Text key → picklable value, on disk; ``group``: an optional text column stored beside each entry, so
    ``items(by_group=True)`` gives the entries ordered by (group, key)."""

    def __init__(self, name: str = "spill", parent: Path | None = None) -> None:
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        self._folder = Path(tempfile.mkdtemp(prefix=f".intake-eval-{name}-", dir=parent))
        self._db = sqlite3.connect(str(self._folder / "spill.sqlite"), isolation_level=None)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("PRAGMA temp_store=FILE")
        self._db.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, grp TEXT, value BLOB) WITHOUT ROWID")
        self._pending: dict[str, tuple[str, bytes | None]] = {}  # None: removed
        self._removal = weakref.finalize(self, _remove, self._db, self._folder)  # also when never closed

    def __setitem__(self, key: str, value: Any) -> None:
        self.put(key, value)

    def put(self, key: str, value: Any, group: str = "") -> None:
        self._pending[key] = (group, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        if len(self._pending) >= _BATCH:
            self.flush()

    def remove(self, key: str) -> None:
        self._pending[key] = ("", None)

    def get(self, key: str, default: Any = None) -> Any:
        pending = self._pending.get(key, _MISSING)
        if pending is not _MISSING:
            blob = pending[1]  # type: ignore[index]  # a pending (group, bytes | None) pair
            return default if blob is None else pickle.loads(blob)
        found = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return default if found is None else pickle.loads(found[0])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def flush(self) -> None:
        if not self._pending:
            return
        self._db.execute("BEGIN")
        self._db.executemany("DELETE FROM entries WHERE key = ?",
                             [(key,) for key, (_group, blob) in self._pending.items() if blob is None])
        self._db.executemany("INSERT OR REPLACE INTO entries (key, grp, value) VALUES (?, ?, ?)",
                             [(key, group, blob) for key, (group, blob) in self._pending.items() if blob is not None])
        self._db.execute("COMMIT")
        self._pending = {}

    def __len__(self) -> int:
        self.flush()
        return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

    def items(self, by_group: bool = False) -> Iterator[tuple[str, str, Any]]:
        """(key, group, value) in key order, or in (group, key) order; text compared by code point."""
        self.flush()
        order = "grp, key" if by_group else "key"
        cursor = self._db.execute(f"SELECT key, grp, value FROM entries ORDER BY {order}")
        for key, group, blob in cursor:
            yield key, group, pickle.loads(blob)

    def values(self) -> Iterator[Any]:
        for _key, _group, value in self.items():
            yield value

    def close(self) -> None:
        """Remove the database (also done when the map is garbage-collected or the process exits)."""
        self._pending = {}
        self._removal()
