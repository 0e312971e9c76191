"""Many small records of the same few fields, held column-wise and read back as dicts.

The report keeps a slim summary per conversation and per judgment (``load.slim_conversation``,
``load.slim_judgment``). As a dict each that is a few kB of Python objects; here a row costs one slot
per field, each text value that repeats across rows is held once (``sys.intern``) and a field may be
packed smaller (``Packing``: e.g. a usage dict as a tuple). Reading a row builds its dict afresh, so
the consumers' ``.get``/``[...]``/``.items()`` work unchanged; the rows are read-only.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SHARED_TEXT_CHARS = 64  # texts up to this long are ids and names that repeat: held once; longer ones are not
_ABSENT = object()  # a field this row does not have (kept apart from a None value)


@dataclass(frozen=True)
class Packing:
    """How one field is held: ``pack`` on the way in, ``unpack`` on the way out (inverse of each other)."""

    pack: Callable[[Any], Any]
    unpack: Callable[[Any], Any]


class CompactRows(Mapping[str, dict[str, Any]]):
    """key → row dict, latest ``put`` per key winning (a key keeps its first position, like a dict)."""

    def __init__(self, packings: Mapping[str, Packing] | None = None) -> None:
        self._index: dict[str, int] = {}
        self._columns: dict[str, list[Any]] = {}
        self._packings = dict(packings or {})

    def put(self, key: str, row: Mapping[str, Any]) -> None:
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self._index)
            for column in self._columns.values():
                column.append(_ABSENT)
        else:
            for column in self._columns.values():
                column[index] = _ABSENT
        for field, value in row.items():
            if field not in self._columns:
                self._columns[field] = [_ABSENT] * len(self._index)
            column = self._columns[field]
            packing = self._packings.get(field)
            if packing is not None:
                value = packing.pack(value)
            elif isinstance(value, str) and len(value) <= SHARED_TEXT_CHARS:
                value = sys.intern(value)
            column[index] = value

    def __getitem__(self, key: str) -> dict[str, Any]:
        index = self._index[key]
        row = {}
        for field, column in self._columns.items():
            value = column[index]
            if value is _ABSENT:
                continue
            packing = self._packings.get(field)
            row[field] = packing.unpack(value) if packing is not None else value
        return row

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index


class Locations(Mapping[str, tuple[int, int, int]]):
    """key → (file number, byte offset, length) of a record, held in three arrays (a few bytes a record
    instead of a tuple of boxed integers); setting a key again moves it to the later record."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._files = array("l")
        self._offsets = array("q")
        self._lengths = array("q")

    def __setitem__(self, key: str, at: tuple[int, int, int]) -> None:
        index = self._index.get(key)
        if index is None:
            self._index[key] = len(self._files)
            self._files.append(at[0])
            self._offsets.append(at[1])
            self._lengths.append(at[2])
        else:
            self._files[index], self._offsets[index], self._lengths[index] = at

    def __getitem__(self, key: str) -> tuple[int, int, int]:
        index = self._index[key]
        return self._files[index], self._offsets[index], self._lengths[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index
