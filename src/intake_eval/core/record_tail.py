"""Where a kept record file's facts end, so a file that only grew is read from there on.

A *fold base* says how much of a file its kept facts cover: ``end`` (the byte after the last whole
line they folded), ``lines`` (how many lines that is, so a tail's warnings name the same line numbers
as a whole read), ``inode``, a ``check`` digest of the covered prefix as sampled (its first and last
64 KiB and 32 blocks between), and the digests of every key the covered lines hold, per key field. A
file *grew by appending* when it has the same inode, is longer than ``end`` and its prefix gives the
same ``check``: then its lines from ``end`` on are its tail. A rewrite (compaction's new inode, a merge,
a truncation, an edit in place that keeps the length, an edit of the sampled blocks) fails one of these
and the file is read whole; an edit in place of unsampled covered bytes followed by an append is the
one change not seen (no writer of intake-eval edits a record file in place).

A *stream read* (``StreamRead``: the call ledger's) is a whole-file value whose reading state is itself
small: it is kept with its fold base and resumed on the lines past ``end`` (``read_on``).

Key digests are 8 bytes of BLAKE2b per key, packed and base64-encoded (a store of 3·10⁵ keys stays
near 3 MB). A tail key whose digest is among the kept ones may supersede a covered line; the caller
then reads the file whole (a collision only costs that read, never a wrong answer).
"""

from __future__ import annotations

import base64
import hashlib
import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from intake_eval.core.lines import LineSpan

CHECK_BLOCK = 65536  # bytes hashed at each end of the covered prefix
SAMPLES, SAMPLE_BLOCK = 32, 4096  # and blocks hashed between them
SCAN_BLOCK = 1 << 20  # bytes read at a time when counting lines
DIGEST_BYTES = 8


def key_digest(key: str) -> int:
    """A key's 8-byte BLAKE2b digest as an unsigned integer."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=DIGEST_BYTES).digest(), "little")


class KeyDigests:
    """The digests of the keys a file's covered lines hold, for one key field: a sorted packed array, so
    a store's keys are decoded and looked up without a Python object per key."""

    MERGE_AT = 1024  # more added digests than this are merged by one sort, fewer inserted one by one

    def __init__(self, packed: array[int] | None = None):
        self.packed: array[int] = packed if packed is not None else array("Q")
        self.added: set[int] = set()

    @classmethod
    def decoded(cls, text: str) -> KeyDigests:
        packed = array("Q")
        packed.frombytes(base64.b64decode(text.encode("ascii")))
        return cls(packed)

    def encoded(self) -> str:
        """Sorted and packed, so the same keys give the same text."""
        return base64.b64encode(self.merged().tobytes()).decode("ascii")

    def merged(self) -> array[int]:
        """Every digest, the added ones merged in, sorted."""
        if len(self.added) > self.MERGE_AT:
            self.packed = array("Q", sorted(self.added.union(self.packed)))
        else:
            for digest in self.added:
                at = bisect_left(self.packed, digest)
                if at == len(self.packed) or self.packed[at] != digest:
                    self.packed.insert(at, digest)
        self.added = set()
        return self.packed

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        digest = key_digest(key)
        at = bisect_left(self.packed, digest)
        return (at < len(self.packed) and self.packed[at] == digest) or digest in self.added

    def add(self, key: str) -> None:
        self.added.add(key_digest(key))

    def add_all(self, keys: Iterable[str]) -> None:
        self.added.update(key_digest(key) for key in keys)


def prefix_check(path: Path, end: int) -> str:
    """A digest of the file's first ``end`` bytes as sampled: their first and last ``CHECK_BLOCK`` bytes and
    ``SAMPLES`` blocks of ``SAMPLE_BLOCK`` bytes spread evenly between (a few dozen small reads at any size)."""
    digest = hashlib.blake2b(digest_size=16)
    starts = [0, *(end * n // (SAMPLES + 1) for n in range(1, SAMPLES + 1)), max(0, end - CHECK_BLOCK)]
    sizes = [CHECK_BLOCK, *([SAMPLE_BLOCK] * SAMPLES), CHECK_BLOCK]
    with open(path, "rb") as handle:
        for start, size in zip(starts, sizes):
            handle.seek(start)
            digest.update(handle.read(max(0, min(size, end - start))))
    return digest.hexdigest()


def whole_lines(path: Path, begin: int, stop: int) -> tuple[int, int]:
    """(where the last whole line of bytes ``begin``..``stop`` ends, how many whole lines there are)."""
    end, lines = begin, 0
    with open(path, "rb") as handle:
        handle.seek(begin)
        at = begin
        while at < stop:
            block = handle.read(min(SCAN_BLOCK, stop - at))
            if not block:
                break
            newlines = block.count(b"\n")
            if newlines:
                lines += newlines
                end = at + block.rindex(b"\n") + 1
            at += len(block)
    return end, lines


@dataclass(frozen=True)
class FoldBase:
    """How much of a file its kept facts cover (see the module docstring)."""

    end: int
    lines: int
    inode: int
    check: str
    keys: Mapping[str, str]  # key field → encoded KeyDigests

    def as_json(self) -> dict[str, Any]:
        return {"end": self.end, "lines": self.lines, "inode": self.inode, "check": self.check,
                "keys": dict(self.keys)}

    @classmethod
    def from_json(cls, value: Any) -> FoldBase | None:
        """The base a store entry kept, or None when it is absent or malformed."""
        if not isinstance(value, Mapping):
            return None
        end, lines, inode, check, keys = (value.get(name) for name in ("end", "lines", "inode", "check", "keys"))
        if not (isinstance(end, int) and isinstance(lines, int) and isinstance(inode, int)
                and isinstance(check, str) and isinstance(keys, Mapping)
                and all(isinstance(text, str) for text in keys.values())):
            return None
        return cls(end, lines, inode, check, dict(keys))

    def still_prefix_of(self, path: Path) -> bool:
        """Whether the file only grew since: same inode, longer, the same covered blocks. A file of the
        covered length that changed (its caller knows the signature did) did not grow: an edit in place."""
        try:
            info = os.stat(path)
            return (info.st_ino == self.inode and info.st_size > self.end
                    and prefix_check(path, self.end) == self.check)
        except OSError:
            return False

    def digests(self, field: str) -> KeyDigests:
        text = self.keys.get(field)
        return KeyDigests.decoded(text) if text is not None else KeyDigests()


class StreamRead(Protocol):
    """A read of one file, line by line, whose state is small, JSON-shaped (``as_json``) and resumable."""

    def read(self, path: Path, span: LineSpan | None = None) -> None:
        """Read the lines of ``span`` (the file's appended lines, when resumed), after those read before."""

    def as_json(self) -> Any:
        """The state, JSON-shaped, to keep."""


S = TypeVar("S", bound=StreamRead)


@dataclass
class StreamKept:
    """What ``read_on`` gives: the value of the file as read, where its whole lines end, and what to keep."""

    value: Any
    end: int
    entry: dict[str, Any]


def read_on(path: Path, entry: Mapping[str, Any], size: int, unchanged: bool, fresh: Callable[[], S],
            resumed: Callable[[Any], S | None], value: Callable[[S], Any]) -> StreamKept:
    """``value(state)`` after a read of the first ``size`` bytes of ``path``: the kept ``entry``'s state
    (``resumed(kept state)``) read on from its base's end when the file is ``unchanged`` or only grew since,
    else ``fresh()`` read from the start. A half-written last line is read, and counts in the value, but the
    state kept is the one before it (the next read starts at its beginning). The entry to keep holds the
    state, its base and the value."""
    base = FoldBase.from_json(entry.get("fold"))
    state = resumed(entry.get("state")) if base is not None and (unchanged or base.still_prefix_of(path)) else None
    if state is None:
        base, state = None, fresh()
    begin, first_line = (base.end, base.lines + 1) if base is not None else (0, 1)
    end, lines = whole_lines(path, begin, size)
    state.read(path, LineSpan(begin, first_line, end))
    covered = FoldBase(end, first_line - 1 + lines, os.stat(path).st_ino, prefix_check(path, end), {})
    if end == size:
        result = value(state)
        kept = state.as_json()  # (after ``value``, which may look up more that holds up to ``end``)
    else:
        kept = state.as_json()
        state.read(path, LineSpan(end, first_line + lines, size))
        result = value(state)
    return StreamKept(result, end, {"value": result, "fold": covered.as_json(), "state": kept})
