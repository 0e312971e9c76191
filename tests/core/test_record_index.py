"""core/record_index: a record looked up by key is the latest valid line of its key, read when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intake_eval.core.record_index import RecordIndex
from intake_eval.core.records import Usage


def test_the_latest_valid_line_of_a_key_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    lines = [{"id": "a", "calls": 1}, {"id": "b", "calls": 2}, {"id": "a", "calls": 3}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"id": "b", "calls": "many"}\n')
    with pytest.warns(UserWarning, match="not a valid Usage"):  # skipped while indexing, like any reader
        index = RecordIndex(path, Usage, "id", cached=1)
    assert sorted(index) == ["a", "b"] and len(index) == 2
    assert index["a"].calls == 3 and index["b"].calls == 2 and index["a"].calls == 3
    assert index.get("c") is None
