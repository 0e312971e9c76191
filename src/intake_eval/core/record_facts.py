"""What each record file of a run folder adds up to, kept beside it so ``status`` reads no record.

A *fact reader* says what it keeps of one record (a small fact: a status and a usage, an answer row)
and what one file's facts add up to (its *summary*: JSON-shaped, small). A file is read in one
streaming pass for every reader that claims it; the latest line per key wins, as everywhere else
(a retried failure, then its success), and only the latest facts are held, never whole records.

The summaries are kept in ``.record_facts.json`` in the run folder, each with its file's signature
(size, modification time in ns, inode). The stage runner keeps them as a stage finishes, for the
files the stage wrote, so the first ``status`` after a stage (or a resume) reads the kept
summaries instead of 10⁵ records. A file whose reading warned (an unreadable line) is read again
each time: its warnings show every time. A value of a whole file read with a small state (the call
ledger's totals) is kept with that state (``kept_stream``), and read on from it while the file only grows.
An unreadable or unwritable store is ignored.

A file whose signature changed is folded when it only grew (a stage appending now): with each
summary the store keeps the file's fold base (core/record_tail: where the covered lines end, the
digests of their keys), and when every reader claiming the file can ``fold`` (``FoldsFacts``), only
the lines past that end are read and their latest facts folded into the kept summaries, in file
order, giving exactly what a whole read gives. The file is read whole instead when it did not only
grow (a new inode, a truncation, an edit of its covered blocks), or when a tail line's key is a
covered line's (it supersedes a fact folded already: sums of floats cannot take one back exactly).
A half-written last line is read (and warned about) like in a whole read but never covered: the
next read starts at its beginning.

Keys are per file: a conversation's id names its clinician and its file is its clinician's; a
judgment is keyed by that id in its judge's folder.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.lines import LineSpan, iter_json_records_in
from intake_eval.core.record_tail import S, FoldBase, KeyDigests, prefix_check, read_on, whole_lines
from intake_eval.core.records import Record, Usage
from intake_eval.core.store import RunPaths, write_text_atomic
from intake_eval.core.usage import usage_of

FACTS_FILE = ".record_facts.json"
FORMAT = 2  # raised whenever what a reader keeps changes: older stores are then read again


def signature(path: Path) -> list[int] | None:
    """(size, mtime in ns, inode) of a file; None when it does not exist."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ino]


def _json_shaped(value: Any) -> Any:
    """The value as the store gives it back, so a kept and a fresh summary are the same objects."""
    return json.loads(json.dumps(value))


class FactReader(Protocol):
    """What one reader keeps of the record files it claims."""

    @property
    def name(self) -> str:
        """The summary's name in a file's facts (unique among the readers of a folder)."""

    @property
    def key(self) -> str:
        """The field naming a record: a later line with the same value supersedes an earlier one."""

    def claims(self, paths: RunPaths, path: Path) -> bool:
        """Whether ``path`` is one of the record files it reads."""

    def fact(self, data: Mapping[str, Any], record: Record | None) -> Any:
        """What it keeps of one record (its line as parsed, and validated against the file's model)."""

    def summary(self, facts: list[Any]) -> Any:
        """One file's summary (JSON-shaped) from the facts of its latest records, in file order
        (None facts, records that are not this reader's, left out)."""


@runtime_checkable
class FoldsFacts(Protocol):
    """A fact reader whose summaries take more facts without their earlier ones."""

    def fold(self, summary: Any, facts: list[Any]) -> Any:
        """The summary of the facts ``summary`` was made of followed by ``facts`` (records of keys it has
        not seen, in file order; None facts left out), equal to ``summary`` of them all."""


class FolderFacts:
    """The summaries of a run folder's record files: kept ones while their file is unchanged, folded
    ones while it only grew, else read. With ``keep``, what was read is written back by ``save``."""

    def __init__(self, paths: RunPaths, readers: Iterable[FactReader], *, keep: bool):
        self.paths = paths
        self.readers: tuple[FactReader, ...] = tuple(readers)
        self.keep = keep
        self._store = self._load()
        self._fresh: dict[str, dict[str, Any]] = {}  # file → facts read by this process (kept or not)
        self._changed: dict[str, set[str]] = {"files": set(), "kept": set()}  # what ``save`` writes back

    @property
    def store_path(self) -> Path:
        return self.paths.root / FACTS_FILE

    def _load(self) -> dict[str, Any]:
        try:
            stored = json.loads(self.store_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"format": FORMAT, "files": {}, "kept": {}}
        if not isinstance(stored, dict) or stored.get("format") != FORMAT:
            return {"format": FORMAT, "files": {}, "kept": {}}
        stored.setdefault("files", {})
        stored.setdefault("kept", {})
        return stored

    def _where(self, path: Path) -> str:
        try:
            return path.relative_to(self.paths.root).as_posix()
        except ValueError:
            return str(path)

    def summary(self, reader: str, path: Path) -> Any:
        """The summary ``reader`` keeps of one file (None: the file is missing or not the reader's)."""
        where = self._where(path)
        facts = self._fresh.get(where)
        if facts is None or reader not in facts:
            entry = self._store["files"].get(where)
            wanted = signature(path)
            if wanted is None:
                return None
            if isinstance(entry, dict) and entry.get("signature") == wanted and reader in (entry.get("facts") or {}):
                facts = entry["facts"]
            else:
                facts = self._read(path, where, entry)
            self._fresh[where] = facts
        return facts.get(reader)

    def summaries(self, reader: str, files: Iterable[Path]) -> list[Any]:
        """The summaries of ``files`` (missing ones left out), in the order given."""
        found = (self.summary(reader, path) for path in dict.fromkeys(files))
        return [summary for summary in found if summary is not None]

    def _fold_base(self, path: Path, readers: list[FactReader], entry: Any) -> tuple[FoldBase, dict[str, Any]] | None:
        """The kept base and summaries a tail of ``path`` folds into, when the file only grew since."""
        if not isinstance(entry, dict) or not all(isinstance(reader, FoldsFacts) for reader in readers):
            return None
        base, kept = FoldBase.from_json(entry.get("fold")), entry.get("facts")
        if base is None or not isinstance(kept, dict) or any(reader.name not in kept for reader in readers):
            return None
        return (base, kept) if base.still_prefix_of(path) else None

    def _read(self, path: Path, where: str, entry: Any) -> dict[str, Any]:
        """The file's summaries: its tail folded into the kept ones while it only grew, else one pass over
        it for every reader that claims it. What its whole lines add up to is kept unless reading them
        warned or the file was replaced meanwhile."""
        readers = [reader for reader in self.readers if reader.claims(self.paths, path)]
        before = signature(path)
        if before is None:
            return {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            based = self._fold_base(path, readers, entry)
            read = _TailRead(path, readers, before[0], based)
            if based is None or not read.run():  # no base, or the tail supersedes a covered line
                del caught[:]
                read = _TailRead(path, readers, before[0], None)
                read.run()  # (a read from the start covers no key before it: it never stops)
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        after = signature(path)
        if read.clean and after is not None and after[2] == before[2] and after[0] >= read.base.end:
            whole = read.base.end == before[0] and after == before  # no half-written line left out
            self._store["files"][where] = {"signature": before if whole else None, "facts": read.covered,
                                           "fold": read.base.as_json()}
            self._changed["files"].add(where)
        return read.facts

    def kept_stream(self, name: str, path: Path, fresh: Callable[[], S], resumed: Callable[[Any], S | None],
                    value: Callable[[S], Any], *, variant: str = "") -> Any:
        """``value(state)`` (JSON-shaped) after a read of a whole file whose state is kept (core/record_tail:
        ``StreamRead``, ``read_on``): while the file is unchanged, the value kept for the same ``variant`` of
        ``value``, else computed from the kept state; while it only grew, the kept state reads its new lines
        alone; else a ``fresh()`` read reads it whole. Kept unless reading warned or the file was replaced."""
        entry = self._store["kept"].get(name)
        entry = entry if isinstance(entry, dict) else {}
        before = signature(path)
        if before is None:
            return _json_shaped(value(fresh()))
        unchanged = entry.get("signature") == before
        if unchanged and entry.get("variant") == variant and "value" in entry:
            return entry["value"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read = read_on(path, entry, before[0], unchanged, fresh, resumed, lambda state: _json_shaped(value(state)))
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        after = signature(path)
        if not caught and after is not None and after[2] == before[2] and after[0] >= read.end:
            whole = read.end == before[0] and after == before  # no half-written line left out
            self._store["kept"][name] = {**read.entry, "signature": before if whole else None, "variant": variant}
            self._changed["kept"].add(name)
        return read.value

    def save(self) -> None:
        """Write what was read back to the store (with ``keep``); a folder that cannot be written is left as is.
        The store is read again first and only what this process read replaces its entries, so a stage
        and a ``status`` saving at once lose at most each other's newest entries (each entry is checked
        against its file when used, so an older one is never wrong, only slower)."""
        if not (self.keep and (self._changed["files"] or self._changed["kept"])):
            return
        store = self._load()
        for part, names in self._changed.items():
            store[part].update({name: self._store[part][name] for name in names})
        store["files"] = {where: entry for where, entry in store["files"].items()
                          if (self.paths.root / where).exists()}  # a file moved aside is forgotten
        try:
            write_text_atomic(self.store_path, json.dumps(store, sort_keys=True))
        except (OSError, IntakeEvalError):  # the store names an OS error as one user-facing line
            return
        self._store = store
        self._changed = {"files": set(), "kept": set()}


class _TailRead:
    """One pass over a file's lines from its fold base's end (or its start) for every reader claiming it.

    ``facts``: the summaries of the file as ``size`` bytes long (a half-written last line included when it
    parses, as a whole read does); ``covered`` and ``base``: what its whole lines add up to and where they
    end, to keep; ``clean``: no whole line warned. ``run`` stops, returning False, at a tail line whose key
    is a covered line's."""

    def __init__(self, path: Path, readers: list[FactReader], size: int,
                 based: tuple[FoldBase, dict[str, Any]] | None):
        self.path = path
        self.readers = readers
        self.size = size
        self.based = based
        base = based[0] if based is not None else None
        self.begin = base.end if base is not None else 0
        self.first_line = base.lines + 1 if base is not None else 1
        self.by_field: dict[str, list[FactReader]] = {}  # key field → the readers keyed by it
        for reader in readers:
            self.by_field.setdefault(reader.key, []).append(reader)
        self.covered_keys = {field: base.digests(field) if base is not None else KeyDigests()
                             for field in self.by_field}
        self.tail_keys: dict[str, set[str]] = {field: set() for field in self.by_field}
        self.latest: dict[str, dict[str, Any]] = {reader.name: {} for reader in readers}
        self.clean = True
        self.facts: dict[str, Any] = {}
        self.covered: dict[str, Any] = {}
        self.base = FoldBase(0, 0, 0, "", {})

    def _take(self, span: LineSpan) -> bool:
        """Fold the lines of ``span`` into ``latest``; False when one supersedes a covered line."""
        for data, record in iter_json_records_in(self.path, span):
            for field, readers in self.by_field.items():
                key = data.get(field)
                if not isinstance(key, str):
                    continue
                if key not in self.tail_keys[field]:  # (a key of the tail may repeat in it)
                    if self.based is not None and key in self.covered_keys[field]:
                        return False
                    self.tail_keys[field].add(key)
                for reader in readers:
                    self.latest[reader.name][key] = reader.fact(data, record)
        return True

    def _summaries(self) -> dict[str, Any]:
        summaries: dict[str, Any] = {}
        for reader in self.readers:
            facts = [fact for fact in self.latest[reader.name].values() if fact is not None]
            if self.based is not None and isinstance(reader, FoldsFacts):
                summaries[reader.name] = _json_shaped(reader.fold(self.based[1][reader.name], facts))
            else:
                summaries[reader.name] = _json_shaped(reader.summary(facts))
        return summaries

    def run(self) -> bool:
        end, lines = whole_lines(self.path, self.begin, self.size)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            taken = self._take(LineSpan(self.begin, self.first_line, end))
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        if not taken:
            return False
        self.clean = not caught
        self.covered = self._summaries()
        for field, added in self.tail_keys.items():
            self.covered_keys[field].add_all(added)
        self.base = FoldBase(end, self.first_line - 1 + lines, os.stat(self.path).st_ino, prefix_check(self.path, end),
                             {field: digests.encoded() for field, digests in self.covered_keys.items()})
        if end == self.size:
            self.facts = self.covered
            return True
        if not self._take(LineSpan(end, self.first_line + lines, self.size)):
            return False
        self.facts = self._summaries()  # the half-written last line parsed: it counts now, not in ``covered``
        return True


# ---------------------------------------------------------------- usage and records done, by group

def usage_fact(group: Sequence[str], ok: bool, usage: Mapping[str, Any]) -> tuple[tuple[str, ...], bool, dict[str, Usage]]:
    """A record's fact for a ``UsageReader``: the group it counts in, whether it finished ok, and its
    usage per role (raw usage dicts; anything malformed counts as no usage)."""
    return tuple(group), ok, {str(role): usage_of(raw) for role, raw in usage.items()}


def usage_summary(facts: list[tuple[tuple[str, ...], bool, dict[str, Usage]]]) -> list[list[Any]]:
    """Per group, in first-seen order: [group, records, done, {role: usage}]."""
    return usage_fold([], facts)


def usage_fold(summary: Sequence[Sequence[Any]], facts: list[tuple[tuple[str, ...], bool, dict[str, Usage]]]
               ) -> list[list[Any]]:
    """A ``usage_summary`` with more facts added, one by one in order as ``usage_summary`` adds them (so the
    sums of floats are the same)."""
    groups: dict[tuple[str, ...], list[Any]] = {
        tuple(group): [list(group), records, done, {role: Usage.model_validate(raw) for role, raw in usage.items()}]
        for group, records, done, usage in summary}
    for group, ok, usage in facts:
        entry = groups.setdefault(group, [list(group), 0, 0, {}])
        entry[1] += 1
        entry[2] += ok
        for role, used in usage.items():
            entry[3][role] = entry[3].get(role, Usage()).add(used)
    return [[group, records, done, {role: used.model_dump() for role, used in usage.items()}]
            for group, records, done, usage in groups.values()]


class GroupTotals:
    """Records, records done and usage per role of one group, summed over files' usage summaries."""

    def __init__(self) -> None:
        self.records = 0
        self.done = 0
        self.usage: dict[str, Usage] = {}

    def add(self, records: int, done: int, usage: Mapping[str, Any]) -> None:
        self.records += records
        self.done += done
        for role, raw in usage.items():
            self.usage[role] = self.usage.get(role, Usage()).add(Usage.model_validate(raw))


def group_totals(summaries: Iterable[Any], wanted: Callable[[list[str]], bool] = lambda group: True
                 ) -> dict[tuple[str, ...], GroupTotals]:
    """Per group (as a tuple), the totals of the groups ``wanted`` over usage summaries, in order."""
    totals: dict[tuple[str, ...], GroupTotals] = {}
    for summary in summaries:
        for group, records, done, usage in summary:
            if wanted(group):
                totals.setdefault(tuple(group), GroupTotals()).add(records, done, usage)
    return totals


class UsageReader:
    """A fact reader whose facts are ``usage_fact``s, summed per group (``usage_summary``)."""

    def __init__(self, name: str, key: str, claims: Callable[[RunPaths, Path], bool],
                 fact: Callable[[Mapping[str, Any]], tuple[tuple[str, ...], bool, dict[str, Usage]] | None]):
        self.name = name
        self.key = key
        self._claims = claims
        self._fact = fact

    def claims(self, paths: RunPaths, path: Path) -> bool:
        return self._claims(paths, path)

    def fact(self, data: Mapping[str, Any], record: Record | None) -> Any:
        return self._fact(data)

    def summary(self, facts: list[Any]) -> Any:
        return usage_summary(facts)

    def fold(self, summary: Any, facts: list[Any]) -> Any:
        return usage_fold(summary, facts)
