"""core/folder_cache: a value reused while its input files are unchanged, recomputed when one changes,
never cached when its computation warned."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from intake_eval.core.folder_cache import cached_json


def _counting(value: dict[str, int]) -> tuple[list[int], object]:
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return value

    return calls, compute


def test_reused_while_the_inputs_are_unchanged_and_recomputed_after(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text('{"a": 1}\n', encoding="utf-8")
    cache = tmp_path / ".cache.json"
    calls, compute = _counting({"done": 1})
    assert cached_json(cache, lambda: [records], compute) == {"done": 1}  # type: ignore[arg-type]
    assert cached_json(cache, lambda: [records], compute) == {"done": 1}  # type: ignore[arg-type]
    assert len(calls) == 1
    with records.open("a", encoding="utf-8") as handle:
        handle.write('{"a": 2}\n')
    cached_json(cache, lambda: [records], compute)  # type: ignore[arg-type]
    assert len(calls) == 2


def test_a_computation_that_warned_is_not_kept(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text("{\n", encoding="utf-8")
    cache = tmp_path / ".cache.json"

    def compute() -> int:
        warnings.warn("records.jsonl:1: unreadable line skipped", stacklevel=1)
        return 3

    for _ in range(2):  # the warning is shown each time
        with pytest.warns(UserWarning, match="unreadable line"):
            assert cached_json(cache, lambda: [records], compute) == 3
    assert not cache.exists()
