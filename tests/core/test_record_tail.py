"""core/record_tail: key digests survive the store and answer membership exactly for the keys added;
a fold base holds while its file only grows and fails on a new inode, a truncation or an edited prefix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from intake_eval.core.record_tail import CHECK_BLOCK, FoldBase, KeyDigests, prefix_check, whole_lines


@pytest.mark.parametrize("count", [3, KeyDigests.MERGE_AT + 5])  # inserted one by one, or merged by one sort
def test_key_digests_round_trip_and_merge(count: int) -> None:
    digests = KeyDigests()
    for n in range(count):
        digests.add(f"conversation {n}")
    assert "conversation 0" in digests and "conversation 1 " not in digests and 7 not in digests
    kept = KeyDigests.decoded(digests.encoded())
    assert all(f"conversation {n}" in kept for n in range(count))
    assert "another" not in kept
    kept.add("another")
    kept.add("conversation 0")  # already there: kept once
    again = KeyDigests.decoded(kept.encoded())
    assert len(again.merged()) == count + 1 and list(again.merged()) == sorted(again.merged())
    assert again.encoded() == kept.encoded()


def test_whole_lines_end_at_the_last_newline(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"a": 2}\n{"a": 3')
    assert whole_lines(path, 0, path.stat().st_size) == (19, 3)
    assert whole_lines(path, 9, path.stat().st_size) == (19, 2)
    assert whole_lines(path, 19, path.stat().st_size) == (19, 0)


def _base(path: Path) -> FoldBase:
    end = path.stat().st_size
    return FoldBase(end, 1, os.stat(path).st_ino, prefix_check(path, end), {})


def test_a_fold_base_holds_while_its_file_only_grows(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"x" * (3 * CHECK_BLOCK) + b"\n")
    base = _base(path)
    assert FoldBase.from_json(base.as_json()) == base
    assert FoldBase.from_json({"end": "9"}) is None
    assert not base.still_prefix_of(path)  # not longer: nothing was appended (an edit in place, a touch)
    with path.open("ab") as handle:
        handle.write(b"more\n")
    assert base.still_prefix_of(path)
    with path.open("r+b") as handle:  # an edit of a sampled block in the middle
        handle.seek(base.end // 2)
        handle.write(b"z")
    assert not base.still_prefix_of(path)
    with path.open("r+b") as handle:
        handle.seek(base.end // 2)
        handle.write(b"x")
    assert base.still_prefix_of(path)
    with path.open("r+b") as handle:  # an edit inside the last covered block
        handle.seek(base.end - 10)
        handle.write(b"y")
    assert not base.still_prefix_of(path)


def test_a_fold_base_fails_on_a_new_inode_or_a_truncation(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')
    base = _base(path)
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes() + b'{"a": 3}\n')
    other.replace(path)  # compaction's way: a new file renamed over
    assert not base.still_prefix_of(path)
    base = _base(path)
    with path.open("r+b") as handle:
        handle.truncate(5)
    assert not base.still_prefix_of(path)
    path.unlink()
    assert not base.still_prefix_of(path)
