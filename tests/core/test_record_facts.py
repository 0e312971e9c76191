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


def _begins(read: list[tuple[Path, int]], path: Path) -> list[int]:
    """Where each read of ``path`` began (the whole reads of copies left out)."""
    return [begin for where, begin in read if where == path]


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


class _LineCount:
    """A stream read counting a file's lines, for ``kept_stream``."""

    def __init__(self, count: int = 0) -> None:
        self.count = count

    def read(self, path: Path, span: Any = None) -> None:
        from intake_eval.core.lines import iter_json_lines_at
        self.count += sum(1 for _ in iter_json_lines_at(path, model=None, span=span))

    def as_json(self) -> Any:
        return {"count": self.count}

    @classmethod
    def resumed(cls, kept: Any) -> "_LineCount | None":
        return cls(kept["count"]) if isinstance(kept, dict) and isinstance(kept.get("count"), int) else None


def test_a_kept_stream_follows_its_file_and_nothing_is_written_without_keep(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    ledger = tmp_path / "calls.jsonl"
    computed: list[int] = []

    def lines(state: _LineCount) -> int:
        computed.append(state.count)
        return state.count

    _lines(ledger, {"event": "opened"})
    for keep in (False, True, True):
        facts = FolderFacts(paths, [], keep=keep)
        assert facts.kept_stream("ledger", ledger, _LineCount, _LineCount.resumed, lines) == 1
        facts.save()
    assert computed == [1, 1]  # the first (not kept) and the second; the third came from the store
    assert FolderFacts(paths, [], keep=False).kept_stream("ledger", ledger, _LineCount, _LineCount.resumed, lines,
                                                          variant="other") == 1  # from the kept state
    _lines(ledger, {"event": "sent"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FolderFacts(paths, [], keep=False).kept_stream("ledger", ledger, _LineCount, _LineCount.resumed,
                                                              lines) == 2


class FoldingStatuses(Statuses):
    """``Statuses`` that folds a tail's facts into a kept summary."""

    def fold(self, summary: Any, facts: list[Any]) -> Any:
        counts = dict(summary)
        for status in facts:
            counts[status] = counts.get(status, 0) + 1
        return {status: counts[status] for status in sorted(counts)}


def _folded(paths: RunPaths, path: Path) -> tuple[Any, list[str]]:
    """The kept (folded) summary and the warnings its reading gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        facts = FolderFacts(paths, [FoldingStatuses()], keep=True)
        found = facts.summary("statuses", path)
        facts.save()
    return found, [str(warning.message) for warning in caught]


def _whole(path: Path, tmp_path: Path) -> tuple[Any, list[str]]:
    """What a whole read of the file as it is now gives (a copy in a folder with no kept facts)."""
    copy = tmp_path / "whole" / "tally" / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(path.read_bytes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = FolderFacts(RunPaths(tmp_path / "whole"), [Statuses()], keep=False).summary("statuses", copy)
    return found, [str(warning.message).replace(str(copy), str(path)) for warning in caught]


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def test_an_appended_tail_is_folded_into_the_kept_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"}, {"item": "shaun", "status": "error"})
    read = _reads(monkeypatch)
    assert _folded(paths, tally) == ({"error": 1, "ok": 1}, [])
    covered = tally.stat().st_size
    _lines(tally, {"item": "timmy", "status": "error"}, {"item": "timmy"}, {"item": "lamb", "status": "lost"})
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"error": 1, "lost": 1, "ok": 2}, [])
    assert _begins(read, tally) == [0, covered]  # the tail only; a key repeated within it keeps its latest
    kept = json.loads((tmp_path / FACTS_FILE).read_text())["files"]["tally/sheep.jsonl"]
    assert kept["fold"]["end"] == tally.stat().st_size and kept["fold"]["lines"] == 5
    assert kept["signature"] == record_facts.signature(tally)


def test_a_tail_that_supersedes_a_kept_line_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"}, {"item": "shaun", "status": "error"})
    _folded(paths, tally)
    covered = tally.stat().st_size
    read = _reads(monkeypatch)
    _lines(tally, {"item": "timmy"}, {"item": "shaun"})  # the retry of a kept failure succeeded
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"ok": 3}, [])
    assert _begins(read, tally) == [covered, 0]  # the tail showed a kept key: read again from the start
    _lines(tally, {"item": "lamb"})
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"ok": 4}, [])
    assert _begins(read, tally)[-1] == tally.stat().st_size - len('{"item": "lamb"}\n')  # folded again after


def test_a_half_written_last_line_is_read_as_a_whole_read_reads_it_and_never_covered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"})
    _folded(paths, tally)
    covered = tally.stat().st_size
    _lines(tally, {"item": "shaun", "status": "error"})
    line_starts = tally.stat().st_size
    _append(tally, '{"item": "timmy", "sta')  # a stage is writing it now
    read = _reads(monkeypatch)
    for _ in range(2):  # warned each time, like a whole read
        found = _folded(paths, tally)
        assert found == _whole(tally, tmp_path)
        assert found[0] == {"error": 1, "ok": 1} and "half-written last line" in found[1][0]
    _append(tally, 'tus": "error"}')  # whole, but its newline is not written yet: a whole read counts it
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"error": 2, "ok": 1}, [])
    assert json.loads((tmp_path / FACTS_FILE).read_text())["files"]["tally/sheep.jsonl"]["signature"] is None
    _append(tally, "\n")
    _lines(tally, {"item": "timmy"})
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"error": 1, "ok": 2}, [])
    assert set(_begins(read, tally)) == {covered, line_starts}  # the partial line is never covered


def test_a_corrupt_tail_line_warns_with_its_line_number_each_time(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"}, {"item": "shaun"})
    _folded(paths, tally)
    _append(tally, "{ not json\n")
    _lines(tally, {"item": "timmy", "status": "error"})
    for _ in range(2):
        found = _folded(paths, tally)
        assert found == _whole(tally, tmp_path)
        assert found == ({"error": 1, "ok": 2}, [f"{tally}:3: skipping a corrupt line"])


def test_a_file_that_did_not_only_grow_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    tally = tmp_path / "tally" / "sheep.jsonl"
    _lines(tally, {"item": "dolly"}, {"item": "shaun", "status": "error"})
    _folded(paths, tally)
    read = _reads(monkeypatch)
    with tally.open("r+b") as handle:  # an edit of a kept line, same length, same inode; then an append
        handle.write(b'{"item": "molly"}')
    _lines(tally, {"item": "timmy"})
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"error": 1, "ok": 2}, [])
    with tally.open("r+b") as handle:  # truncated and written again past the kept end
        handle.truncate(0)
        handle.write(b"".join(json.dumps({"item": f"lamb {n}", "status": "lost"}).encode() + b"\n"
                              for n in range(5)))
    assert _folded(paths, tally) == _whole(tally, tmp_path) == ({"lost": 5}, [])
    assert _begins(read, tally) == [0, 0]


def test_usage_is_folded_one_fact_at_a_time_as_a_whole_read_adds_it() -> None:
    def fact(cost: float) -> Any:
        return record_facts.usage_fact(["run", "a"], True, {"clinician": {"calls": 1, "cost_usd": cost}})

    kept, tail = [fact(1.0)], [fact(1e-16), fact(1e-16)]
    folded = record_facts.usage_fold(record_facts.usage_summary(kept), tail)
    assert folded == record_facts.usage_summary(kept + tail)
    assert folded[0][3]["clinician"]["cost_usd"] == 1.0  # summing the tail first would give 1.0000000000000002
    assert folded[0][1:3] == [3, 3]


def test_two_processes_saving_keep_each_others_entries(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    sheep, goats = tmp_path / "tally" / "sheep.jsonl", tmp_path / "tally" / "goats.jsonl"
    _lines(sheep, {"item": "dolly"})
    _lines(goats, {"item": "billy", "status": "lost"})
    stage, status = (FolderFacts(paths, [FoldingStatuses()], keep=True) for _ in range(2))  # both load the store
    assert stage.summary("statuses", sheep) == {"ok": 1}
    stage.save()
    assert status.summary("statuses", goats) == {"lost": 1}
    status.save()  # reads the store again: the stage's entry stays
    assert set(json.loads((tmp_path / FACTS_FILE).read_text())["files"]) == {"tally/sheep.jsonl", "tally/goats.jsonl"}
