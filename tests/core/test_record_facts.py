"""core/record_facts: a file's summary is kept with its signature, reused while the file is unchanged, read
again once it changes (an append, a rewrite), never kept when reading it warned; the latest line per key wins."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core import record_facts
from intake_eval.core.lines import LineSpan
from intake_eval.core.record_facts import FACTS_FILE, FolderFacts
from intake_eval.core.records import Record
from intake_eval.core.store import RunPaths


class Statuses:
    """Counts the latest status per item of tally/*.jsonl files."""

    name = "statuses"
    key = "item"

    def claims(self, paths: RunPaths, path: Path) -> bool:
        return path.parent == paths.root / "tally"

    def fact(self, data: Mapping[str, Any], record: Record | None) -> Any:
        return data.get("status", "ok")

    def summary(self, facts: list[Any]) -> Any:
        return {status: facts.count(status) for status in sorted(set(facts))}


def _lines(path: Path, *records: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


def _summary(paths: RunPaths, path: Path) -> Any:
    facts = FolderFacts(paths, [Statuses()], keep=True)
    found = facts.summary("statuses", path)
    facts.save()
    return found


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, int]]:
    """Each read of a file's lines, as (file, the byte it starts at)."""
    read: list[tuple[Path, int]] = []
    real = record_facts.iter_json_records_in

    def counting(path: Path, span: LineSpan, stats: Any = None) -> Any:
        read.append((path, span.begin))
        return real(path, span, stats)

    monkeypatch.setattr(record_facts, "iter_json_records_in", counting)
    return read


def test_kept_while_unchanged_and_read_again_after_an_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"}, {"item": "shaun", "status": "error"})
    read = _reads(monkeypatch)
    assert _summary(paths, tally) == {"error": 1, "ok": 1}
    assert _summary(paths, tally) == {"error": 1, "ok": 1}
    assert read == [(tally, 0)]  # the second answer came from the kept summary
    _lines(tally, {"item": "shaun"})  # the retry succeeded: the later line wins
    assert _summary(paths, tally) == {"ok": 2}
    assert [begin for _path, begin in read] == [0, 0]  # no fold: the file's reader cannot fold
    assert json.loads((tmp_path / FACTS_FILE).read_text())["files"]["tally/sheep.jsonl"]["facts"] == {
        "statuses": {"ok": 2}}


def test_a_file_replaced_by_another_of_the_same_size_is_read_again(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly", "status": "ok!"})
    assert _summary(paths, tally) == {"ok!": 1}
    replacement = tmp_path / "tally" / "new.tmp"
    _lines(replacement, {"item": "dolly", "status": "bad"})
    replacement.replace(tally)  # same size, another inode (a merge, a rewrite)
    assert _summary(paths, tally) == {"bad": 1}


def test_a_file_whose_reading_warned_is_not_kept(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"})
    with tally.open("a", encoding="utf-8") as handle:
        handle.write("{ not json\n")
    for _ in range(2):  # the warning is shown each time
        with pytest.warns(UserWarning, match="corrupt line"):
            assert _summary(paths, tally) == {"ok": 1}
    assert not (tmp_path / FACTS_FILE).exists()


def test_a_kept_value_follows_its_file_and_nothing_is_written_without_keep(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    ledger = tmp_path / "calls.jsonl"
    computed: list[int] = []

    def lines() -> int:
        computed.append(1)
        return len(ledger.read_text().splitlines()) if ledger.exists() else 0

    for keep in (False, True, True):
        facts = FolderFacts(paths, [], keep=keep)
        assert facts.kept("ledger", ledger, lines) == 0
        facts.save()
    assert len(computed) == 2  # the first (not kept) and the second; the third came from the store
    _lines(ledger, {"event": "sent"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FolderFacts(paths, [], keep=False).kept("ledger", ledger, lines) == 1
