"""What each record file of a run folder adds up to, kept beside it so ``status`` reads no record.

A *fact reader* says what it keeps of one record (a small fact: a status and a usage, an answer row)
and what one file's facts add up to (its *summary*: JSON-shaped, small). A file is read in one
streaming pass for every reader that claims it; the latest line per key wins, as everywhere else
(a retried failure, then its success), and only the latest facts are held, never whole records.

The summaries are kept in ``.record_facts.json`` in the run folder, each with its file's signature
(size, modification time in ns, inode). The stage runner keeps them as a stage finishes, for the
files the stage wrote, so the first ``status`` after a stage (or a resume) reads the kept
summaries instead of 10⁵ records. A file whose signature differs from the kept one (a merge, a
crash mid-stage, a hand edit, a stage appending now) is read again, and so is one whose reading
warned (an unreadable line): its warnings show every time. A kept value of a whole file (the call
ledger's totals) is kept the same way (``kept``). An unreadable or unwritable store is ignored.

Keys are per file: a conversation's id names its clinician and its file is its clinician's; a
judgment is keyed by that id in its judge's folder.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.lines import iter_json_records
from intake_eval.core.records import Record, Usage
from intake_eval.core.store import RunPaths, write_text_atomic
from intake_eval.core.usage import usage_of

FACTS_FILE = ".record_facts.json"
FORMAT = 1  # raised whenever what a reader keeps changes: older stores are then read again


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


class FolderFacts:
    """The summaries of a run folder's record files: kept ones while their file is unchanged, else read.
    With ``keep``, what was read is written back by ``save`` (the process holding the run lock, or
    ``status`` while none does)."""

    def __init__(self, paths: RunPaths, readers: Iterable[FactReader], *, keep: bool):
        self.paths = paths
        self.readers: tuple[FactReader, ...] = tuple(readers)
        self.keep = keep
        self._store = self._load()
        self._fresh: dict[str, dict[str, Any]] = {}  # file → facts read by this process (kept or not)
        self._dirty = False

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
                facts = self._read(path, where)
            self._fresh[where] = facts
        return facts.get(reader)

    def summaries(self, reader: str, files: Iterable[Path]) -> list[Any]:
        """The summaries of ``files`` (missing ones left out), in the order given."""
        found = (self.summary(reader, path) for path in dict.fromkeys(files))
        return [summary for summary in found if summary is not None]

    def _read(self, path: Path, where: str) -> dict[str, Any]:
        """One pass over a file for every reader that claims it; kept unless it warned or changed meanwhile."""
        readers = [reader for reader in self.readers if reader.claims(self.paths, path)]
        before = signature(path)
        latest: dict[str, dict[str, Any]] = {reader.name: {} for reader in readers}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for data, record in iter_json_records(path):
                for reader in readers:
                    key = data.get(reader.key)
                    if isinstance(key, str):
                        latest[reader.name][key] = reader.fact(data, record)
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        facts = {reader.name: _json_shaped(reader.summary([fact for fact in latest[reader.name].values()
                                                            if fact is not None]))
                 for reader in readers}
        if not caught and before is not None and signature(path) == before:
            self._store["files"][where] = {"signature": before, "facts": facts}
            self._dirty = True
        return facts

    def kept(self, name: str, path: Path, compute: Callable[[], Any]) -> Any:
        """A value computed from one whole file (``compute()``, JSON-shaped), kept while the file is unchanged."""
        entry = self._store["kept"].get(name)
        before = signature(path)
        if isinstance(entry, dict) and entry.get("signature") == before and "value" in entry:
            return entry["value"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = _json_shaped(compute())
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        if not caught and signature(path) == before:
            self._store["kept"][name] = {"signature": before, "value": value}
            self._dirty = True
        return value

    def save(self) -> None:
        """Write what was read back to the store (with ``keep``); a folder that cannot be written is left as is."""
        if not (self.keep and self._dirty):
            return
        self._store["files"] = {where: entry for where, entry in self._store["files"].items()
                                if (self.paths.root / where).exists()}  # a file moved aside is forgotten
        try:
            write_text_atomic(self.store_path, json.dumps(self._store, sort_keys=True))
        except (OSError, IntakeEvalError):  # the store names an OS error as one user-facing line
            return
        self._dirty = False


# ---------------------------------------------------------------- usage and records done, by group

def usage_fact(group: Sequence[str], ok: bool, usage: Mapping[str, Any]) -> tuple[tuple[str, ...], bool, dict[str, Usage]]:
    """A record's fact for a ``UsageReader``: the group it counts in, whether it finished ok, and its
    usage per role (raw usage dicts; anything malformed counts as no usage)."""
    return tuple(group), ok, {str(role): usage_of(raw) for role, raw in usage.items()}


def usage_summary(facts: list[tuple[tuple[str, ...], bool, dict[str, Usage]]]) -> list[list[Any]]:
    """Per group, in first-seen order: [group, records, done, {role: usage}]."""
    groups: dict[tuple[str, ...], list[Any]] = {}
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
